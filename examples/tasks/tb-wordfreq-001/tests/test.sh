#!/usr/bin/env bash
# Terminal-Bench's contract: the tests are at /tests, the program in the working folder
# (/app); the reward goes to /logs/verifier/reward.txt (1 when every test passes).
set -uo pipefail
export PYTHONDONTWRITEBYTECODE=1
cd /app || { echo "test.sh: no /app" >&2; exit 2; }
mkdir -p /logs/verifier
if python3 -m pytest -p no:cacheprovider -rA /tests/test_outputs.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
