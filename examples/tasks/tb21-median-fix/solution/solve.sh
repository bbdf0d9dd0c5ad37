#!/bin/bash
# Reference solution: a median that sorts a copy and averages the middle pair.
set -euo pipefail
cat > /app/stats.py <<'PY'
"""Small statistics helpers."""


def mean(values):
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def median(values):
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
PY
