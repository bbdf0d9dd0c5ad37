#!/bin/bash
set -euo pipefail
echo "balance=100" > /app/ledger.txt
