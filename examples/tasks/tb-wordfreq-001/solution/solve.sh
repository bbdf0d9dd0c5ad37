#!/usr/bin/env bash
# Reference solution, as Terminal-Bench's oracle runs it: the fixed program from /solution
# into the working folder.
set -euo pipefail
cp /solution/wordfreq.py /app/wordfreq.py
