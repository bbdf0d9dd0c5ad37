#!/bin/bash
# Reference solution: configparser, then typed values.
set -euo pipefail
python3 - <<'PY'
import configparser, json


def typed(v):
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    try:
        return int(v)
    except ValueError:
        return v


cp = configparser.ConfigParser()
cp.read("/app/service.ini", encoding="utf-8")
out = {s: {k: typed(v) for k, v in cp[s].items()} for s in cp.sections()}
with open("/app/service.json", "w", encoding="utf-8") as f:
    json.dump(out, f, indent=2)
PY
