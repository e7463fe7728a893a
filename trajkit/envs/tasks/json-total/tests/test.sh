#!/bin/bash
python3 - <<'EOF'
import json
items = [{"price": 2.5, "qty": 4}, {"price": 0.99, "qty": 3}, {"price": 12.0, "qty": 1}]
want = round(sum(i["price"] * i["qty"] for i in items), 2)
try:
    got = json.load(open("/app/total.json"))
    value = float(got["total"]) == want
    shape = isinstance(got, dict) and list(got) == ["total"]
except Exception:
    value = shape = False
json.dump({"reward": float(value), "format": float(shape)}, open("/logs/verifier/reward.json", "w"))
EOF
