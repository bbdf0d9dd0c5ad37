#!/usr/bin/env bash
# Reference solution, run in the working folder (/app): Harbor's oracle finds it in
# /solution, akbench's in AKBENCH_SOLUTION_DIR.
set -euo pipefail
cd /app
git apply --verbose "${AKBENCH_SOLUTION_DIR:-/solution}/fix.patch"
