#!/usr/bin/env bash
# Reference solution: run by the oracle agent with cwd = the workspace.
set -euo pipefail
git apply --verbose "${AKBENCH_SOLUTION_DIR:?}/fix.patch"
