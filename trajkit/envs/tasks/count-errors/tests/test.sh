#!/bin/bash
expected=$(grep -c 'ERROR' /tests/server.log)
got=$(tr -d '[:space:]' < /app/errors.txt 2>/dev/null)
if [ -n "$got" ] && [ "$got" = "$expected" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
