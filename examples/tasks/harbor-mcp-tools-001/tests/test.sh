#!/bin/bash
# Compares /app/bins.txt with the bins the `warehouse` server holds (tests/expected.txt,
# which the agent never sees): every line must match, in order.
echo "--- /app/bins.txt"
cat /app/bins.txt 2>&1
if [ -f /app/bins.txt ] && diff <(sed -e 's/[[:space:]]*$//' -e '/^$/d' /app/bins.txt) /tests/expected.txt; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
