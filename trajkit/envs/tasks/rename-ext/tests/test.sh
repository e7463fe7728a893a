#!/bin/bash
cd /app/notes 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
ok=1
for n in a b c; do
  [ -f "$n.md" ] && [ ! -e "$n.txt" ] && [ "$(cat "$n.md")" = "note $n" ] || ok=0
done
[ -f keep.csv ] && [ "$(cat keep.csv)" = "x,y" ] || ok=0
echo $ok > /logs/verifier/reward.txt
