#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import os, urllib.request
base = os.environ.get("KV_URL", "http://kv:8080")
approved = urllib.request.urlopen(base + "/keys/release-2.4", timeout=5).read().decode().strip()
req = urllib.request.Request(base + "/keys/release-2.4-status", data=f"shipped-after-{approved}".encode(), method="PUT")
urllib.request.urlopen(req, timeout=5)
print("recorded shipped-after-" + approved)
PY
