#!/bin/bash
source /tests/lib.sh
pass test "$(cat /app/ledger.txt 2>/dev/null)" = "balance=100"
