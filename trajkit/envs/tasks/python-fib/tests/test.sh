#!/bin/bash
cd /app && timeout 10 python3 -c '
from fib import fib
assert [fib(i) for i in range(10)] == [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]
assert fib(90) == 2880067194370816120
' && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
