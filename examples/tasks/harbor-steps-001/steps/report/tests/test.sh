#!/bin/bash
source /tests/lib.sh
pass test "$(cat /app/report.txt 2>/dev/null)" = "${EXPECTED_BALANCE:?}"
