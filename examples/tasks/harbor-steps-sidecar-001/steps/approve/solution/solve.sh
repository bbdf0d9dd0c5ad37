#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import os, urllib.request
base = os.environ.get("KV_URL", "http://kv:8080")
owner = urllib.request.urlopen(base + "/keys/release-owner", timeout=5).read().decode().strip()
req = urllib.request.Request(base + "/keys/release-2.4", data=f"approved-by-{owner}".encode(), method="PUT")
urllib.request.urlopen(req, timeout=5)
print("recorded approved-by-" + owner)
PY
