#!/usr/bin/env bash
# crash agent: fails loudly before doing anything.
echo "crash: fatal: simulated agent crash on task ${AKBENCH_TASK_ID:-?}" >&2
exit 3
