#!/bin/bash
set -euo pipefail
/app/bin/balance > /app/report.txt
