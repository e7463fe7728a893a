#!/bin/bash
set -e
python3 -c 'import json; items = json.load(open("/app/order.json"))["items"]; json.dump({"total": round(sum(i["price"] * i["qty"] for i in items), 2)}, open("/app/total.json", "w"))'
