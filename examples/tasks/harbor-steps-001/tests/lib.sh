#!/bin/bash
# Shared by every step's tests/test.sh: Harbor copies tests/ and then the step's tests/
# into /tests for each step's grading, so this file is there for all of them.

# pass CONDITION-COMMAND...: writes the step's reward (1 when the command succeeds).
pass() {
    if "$@"; then
        echo 1 > /logs/verifier/reward.txt
    else
        echo 0 > /logs/verifier/reward.txt
    fi
}
