#!/usr/bin/env python3
"""Reads the trials Harbor ran on an exported akbench task (scripts/check-harbor-export).

    check-harbor-oracle.py JOB_DIR [ORACLE_OUT]

JOB_DIR is the folder `harbor run` wrote for the exported job with the agents `oracle` and
`nop` (one trial each). Every trial's result.json is loaded with Harbor's own `TrialResult`;
the oracle's must end without an exception with reward 1 (the reference solution solves the
exported task), the nop's without an exception with reward 0 (the task unchanged does not
pass). With ORACLE_OUT, the oracle's trial folder is copied there (for `akbench run
import-harbor`: the nop's result names the same planned trial and would conflict). Prints
what it read; exit 0 when both hold, 1 otherwise (each problem printed).
"""

import shutil
import sys
from pathlib import Path

from harbor.models.trial.result import TrialResult

WANT = {"oracle": 1.0, "nop": 0.0}


def main() -> int:
    job = Path(sys.argv[1])
    problems = []
    seen = {}
    for path in sorted(job.glob("*/result.json")):
        r = TrialResult.model_validate_json(path.read_text())
        agent = r.config.agent.name
        reward = (r.verifier_result.rewards or {}).get("reward") if r.verifier_result else None
        exc = r.exception_info.exception_type if r.exception_info else None
        print(f"  harbor trial {r.trial_name}: agent {agent}, reward {reward}, exception {exc}")
        seen[agent] = seen.get(agent, 0) + 1
        if agent == "oracle" and len(sys.argv) > 2:
            shutil.copytree(path.parent, Path(sys.argv[2]) / path.parent.name)
        if agent not in WANT:
            problems.append(f"{path}: unexpected agent {agent}")
        elif exc is not None:
            problems.append(f"{path}: {agent} ended with {exc}: {r.exception_info.exception_message}")
        elif reward != WANT[agent]:
            problems.append(f"{path}: {agent} got reward {reward}, expected {WANT[agent]}")
    for agent in WANT:
        if seen.get(agent) != 1:
            problems.append(f"{job}: {seen.get(agent, 0)} {agent} trials, expected 1")
    for p in problems:
        print(f"FAIL {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
