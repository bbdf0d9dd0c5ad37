#!/bin/bash
# Grades the state the `kv` service holds, read through its API: not a file the agent
# left in the workspace.
got=$(python3 - <<'PY'
import os, urllib.request
url = os.environ.get("KV_URL", "http://kv:8080") + "/keys/release-2.4"
try:
    print(urllib.request.urlopen(url, timeout=5).read().decode().strip())
except Exception as e:
    print(f"(unreadable: {e})")
PY
)
echo "release-2.4 = $got"
if [ "$got" = "approved-by-dana" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
