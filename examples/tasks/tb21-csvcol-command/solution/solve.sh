#!/bin/bash
# Reference solution: a Python script in /usr/local/bin.
set -euo pipefail
cat > /usr/local/bin/csvcol <<'PY'
#!/usr/bin/env python3
"""csvcol COLUMN [FILE]: the values of one column of a CSV file."""
import csv
import sys


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: csvcol COLUMN [FILE]", file=sys.stderr)
        return 2
    f = open(argv[2], newline="", encoding="utf-8") if len(argv) == 3 else sys.stdin
    rows = csv.reader(f)
    header = next(rows, [])
    if argv[1] not in header:
        print(f"csvcol: no column named {argv[1]!r}", file=sys.stderr)
        return 1
    i = header.index(argv[1])
    for row in rows:
        print(row[i] if i < len(row) else "")
    return 0


sys.exit(main(sys.argv))
PY
chmod 755 /usr/local/bin/csvcol
