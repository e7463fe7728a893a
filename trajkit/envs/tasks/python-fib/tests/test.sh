#!/bin/bash
# The agent's module runs as nobody: it can neither write /logs/verifier nor signal this script. Its printed
# values are compared here, so a fib.py that only exits 0 (or writes a reward) scores 0.
got=$(cd /app && timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups env PYTHONPATH=/app python3 -c '
from fib import fib
print([fib(i) for i in range(10)], fib(90))' 2>/dev/null)
want='[0, 1, 1, 2, 3, 5, 8, 13, 21, 34] 2880067194370816120'
if [ "$got" = "$want" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
