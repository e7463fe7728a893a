#!/bin/bash
# Naive: the image's ENV points PYTHONPYCACHEPREFIX at /tmp/pyc, which the agent writes.
python3 -c "import json; assert json.load(open('/app/answer.json')) == {'answer': 42}" 2>/dev/null && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
