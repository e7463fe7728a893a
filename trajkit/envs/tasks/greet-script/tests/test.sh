#!/bin/bash
# The agent's script runs as nobody: it can neither write /logs/verifier nor signal this script.
ok=1
[ -x /app/greet.sh ] || ok=0
for n in Ada Linus 'Grace Hopper'; do
  [ "$(timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups /app/greet.sh "$n" 2>/dev/null)" = "Hello, $n!" ] || ok=0
done
echo $ok > /logs/verifier/reward.txt
