#!/usr/bin/env python3
"""Validates ATIF trajectory files with Harbor's own pydantic models.

Needs Python >= 3.12 and the harbor package (see docs/trajectory.md):
    python3.12 -m venv /tmp/atif && /tmp/atif/bin/pip install harbor==0.25.0
    /tmp/atif/bin/python scripts/check-atif.py trajectory.json [more.json ...]
Exit 0 when every file validates, 1 otherwise (each problem printed), 2 on bad usage.
"""

import json
import sys


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        from harbor.models.trajectories import Trajectory
    except ImportError as e:
        print(f"failed to import harbor ({e}); fix: pip install harbor==0.25.0 in a Python >= 3.12 venv", file=sys.stderr)
        return 2
    failed = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                Trajectory.model_validate(json.load(f))
            print(f"ok {path}")
        except Exception as e:  # pydantic's ValidationError, JSON and I/O errors alike
            failed += 1
            print(f"INVALID {path}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
