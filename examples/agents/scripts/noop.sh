#!/usr/bin/env bash
# noop agent: reads the instruction, changes nothing, exits 0.
echo "noop: read ${AKBENCH_INSTRUCTION_FILE:-<no instruction>} for task ${AKBENCH_TASK_ID:-?}; changing nothing"
exit 0
