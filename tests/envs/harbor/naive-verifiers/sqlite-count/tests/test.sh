#!/bin/bash
# Naive: sqlite3 reads ~/.sqliterc from the password entry's home (/root), whatever HOME says.
[ "$(sqlite3 /app/db.sqlite 'select count(*) from t' 2>/dev/null)" = 3 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
