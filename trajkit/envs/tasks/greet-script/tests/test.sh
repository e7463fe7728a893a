#!/bin/bash
ok=1
[ -x /app/greet.sh ] || ok=0
for n in Ada Linus 'Grace Hopper'; do
  [ "$(/app/greet.sh "$n" 2>/dev/null)" = "Hello, $n!" ] || ok=0
done
echo $ok > /logs/verifier/reward.txt
