#!/bin/bash
# Reference solution: Python's sqlite3 loads the dump and runs the query.
set -euo pipefail
python3 - <<'PY'
import csv
import sqlite3

db = sqlite3.connect("/app/shop.db")
db.executescript(open("/app/shop.sql", encoding="utf-8").read())
rows = db.execute(
    "SELECT c.name, SUM(o.amount_cents) AS t FROM orders o JOIN customers c"
    " ON c.id = o.customer_id WHERE o.status = 'paid'"
    " GROUP BY c.id ORDER BY t DESC LIMIT 3"
).fetchall()
db.close()
with open("/app/top_customers.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["customer", "total"])
    for name, cents in rows:
        w.writerow([name, f"{cents // 100}.{cents % 100:02d}"])
PY
