#!/bin/bash
python3 - <<'EOF'
import json
want = [{"name": "Ada", "age": 36, "city": "London"}, {"name": "Alan", "age": 41, "city": "Wilmslow"},
        {"name": "Grace", "age": 85, "city": "Arlington"}]
try:
    ok = json.load(open("/app/people.json")) == want
except Exception:
    ok = False
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
EOF
