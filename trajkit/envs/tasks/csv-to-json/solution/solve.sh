#!/bin/bash
set -e
python3 -c 'import csv, json; rows = list(csv.DictReader(open("/app/people.csv"))); [r.update(age=int(r["age"])) for r in rows]; json.dump(rows, open("/app/people.json", "w"))'
