#!/bin/bash
# Reference solution: parse the log and write the report.
set -euo pipefail
cd /app
python3 - <<'PY'
import collections, json, re

line_re = re.compile(r'^\S+ \S+ \S+ \[[^\]]+\] "(\S+) (\S+) [^"]*" (\d{3}) \S+$')
by_status = collections.Counter()
paths = collections.Counter()
for line in open("/app/access.log", encoding="utf-8"):
    m = line_re.match(line.strip())
    if not m:
        continue
    by_status[m.group(3)] += 1
    paths[m.group(2)] += 1
top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
report = {"total": sum(by_status.values()), "by_status": dict(sorted(by_status.items())), "top_path": top}
with open("/app/summary.json", "w", encoding="utf-8") as f:
    json.dump(report, f, indent=2)
PY
