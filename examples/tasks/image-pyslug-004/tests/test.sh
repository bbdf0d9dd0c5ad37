#!/usr/bin/env bash
# Hidden evaluation for a pyslug (Python) task. cwd = the workspace.
# Runs the repository's own unittest suite together with the hidden tests
# ($AKBENCH_TESTS_DIR/test_hidden.py) and writes
# $AKBENCH_VERIFIER_DIR/{reward.txt,junit.xml}. Exits 0 once the reward is written;
# non-zero only when the evaluation itself broke.
set -uo pipefail
: "${AKBENCH_TESTS_DIR:?AKBENCH_TESTS_DIR is not set}"
: "${AKBENCH_VERIFIER_DIR:?AKBENCH_VERIFIER_DIR is not set}"
ws=${AKBENCH_WORKSPACE:-$PWD}
cd "$ws" || { echo "test.sh: cannot enter workspace $ws" >&2; exit 2; }
PY=python3
"$PY" -c 'import sys' 2>/dev/null || PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" "$AKBENCH_TESTS_DIR/run_tests.py"
