#!/usr/bin/env bash
# Harbor's contract: run the tests from the task's folder (/tests in Harbor; akbench gives
# its copy as AKBENCH_TESTS_DIR) in the working folder, and write the reward to
# /logs/verifier/reward.txt. Exits 0 once the reward is written.
set -uo pipefail
export AKBENCH_TESTS_DIR=${AKBENCH_TESTS_DIR:-/tests}
export AKBENCH_VERIFIER_DIR=/logs/verifier
export PYTHONDONTWRITEBYTECODE=1
cd /app || { echo "test.sh: no /app" >&2; exit 2; }
exec python3 "$AKBENCH_TESTS_DIR/run_tests.py"
