#!/bin/bash
[ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
