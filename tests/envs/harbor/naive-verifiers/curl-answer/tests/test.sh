#!/bin/bash
# Naive: curl reads ~/.curlrc, falling back to the password entry's home (/root).
curl -s file:///app/answer.txt | grep -qx 42 && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
