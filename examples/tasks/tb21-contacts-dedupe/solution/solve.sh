#!/bin/bash
# Reference solution: keep the first row of every normalised email.
set -euo pipefail
python3 - <<'PY'
import csv

seen = set()
with open("/app/contacts.csv", newline="", encoding="utf-8") as f:
    rows = list(csv.reader(f))
out = [rows[0]]
col = rows[0].index("email")
for row in rows[1:]:
    key = row[col].strip().lower()
    if key and key in seen:
        continue
    seen.add(key)
    out.append(row)
with open("/app/contacts_clean.csv", "w", newline="", encoding="utf-8") as f:
    csv.writer(f, lineterminator="\n").writerows(out)
PY
