#!/bin/bash
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, Harbor!" ] && [ "$(tail -c1 /app/hello.txt | od -An -c | tr -d ' ')" = '\n' ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
