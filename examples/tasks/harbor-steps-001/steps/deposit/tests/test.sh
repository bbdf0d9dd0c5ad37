#!/bin/bash
source /tests/lib.sh
pass test -x /app/bin/deposit -a "$(/app/bin/balance)" = "150"
