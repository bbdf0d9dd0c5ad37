#!/bin/bash
# Shared by both steps' tests/test.sh: Harbor copies tests/ and then the step's tests/ into
# /tests for each step's grading, so this file is there for both.

# kv_get NAME: the value the `kv` service holds for NAME, read through its API.
kv_get() {
    python3 - "$1" <<'PY'
import os, sys, urllib.request
url = os.environ.get("KV_URL", "http://kv:8080") + "/keys/" + sys.argv[1]
try:
    print(urllib.request.urlopen(url, timeout=5).read().decode().strip())
except Exception as e:
    print(f"(unreadable: {e})")
PY
}

# reward_if CONDITION-COMMAND...: writes the step's reward (1 when the command succeeds).
reward_if() {
    if "$@"; then
        echo 1 > /logs/verifier/reward.txt
    else
        echo 0 > /logs/verifier/reward.txt
    fi
}
