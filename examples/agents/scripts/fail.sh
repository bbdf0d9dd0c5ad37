#!/usr/bin/env bash
# fail agent: a plausible but wrong change. It "documents" the reported bug as a known
# issue in the README instead of fixing the code, then exits 0, so the task is graded
# and not solved.
set -euo pipefail
title=$(grep -m1 '^#' "${AKBENCH_INSTRUCTION_FILE:?}" | sed 's/^#* *//')
readme=README.md
[ -f "$readme" ] || readme=NOTES.md
{
    echo
    echo "## Known issues"
    echo
    echo "- ${title:-a reported bug} (under investigation)."
} >>"$readme"
echo "fail: documented \"$title\" in $readme; no code changed"
exit 0
