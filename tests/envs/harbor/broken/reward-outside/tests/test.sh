#!/bin/bash
[ "$(cat /app/ok.txt 2>/dev/null)" = ok ] && echo 1 > /logs/reward.txt || echo 0 > /logs/reward.txt
