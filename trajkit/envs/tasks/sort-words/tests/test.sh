#!/bin/bash
printf 'apple\nbanana\ncherry\ndate\nfig\n' > /tmp/want
if cmp -s /tmp/want /app/sorted.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
