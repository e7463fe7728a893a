#!/bin/bash
# The expected text goes through a pipe, not a file: a symlink the agent planted in /tmp cannot redirect it.
if printf 'apple\nbanana\ncherry\ndate\nfig\n' | cmp -s - /app/sorted.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
