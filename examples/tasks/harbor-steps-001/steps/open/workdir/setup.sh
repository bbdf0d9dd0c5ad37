#!/bin/bash
# Runs in /app before the step's agent; the healthcheck waits for its mark.
set -euo pipefail
mkdir -p /app/bin
touch /app/.ledger-ready
