#!/usr/bin/env python3
"""Reads the trials Harbor ran with its `oracle` and `nop` agents (scripts/check-harbor-export).

    check-harbor-oracle.py JOB_DIR [ORACLE_OUT] [--tasks N]

JOB_DIR is the folder `harbor run` wrote for a job with the agents `oracle` and `nop` over
N tasks (1 unless given: the exported task; N for the sidecar examples, run as one
dataset): one trial of each agent per task. Every trial's result.json is loaded with
Harbor's own `TrialResult`; the oracle's must end without an exception with reward 1 (the
reference solution solves the task), the nop's without an exception with reward 0 (the
task unchanged does not pass): the verdicts akbench gives the same tasks. With ORACLE_OUT,
the oracle's trial folders are copied there (for `akbench run import-harbor`: the nop's
result names the same planned trial and would conflict). Prints what it read; exit 0 when
all hold, 1 otherwise (each problem printed).
"""

import argparse
import shutil
import sys
from pathlib import Path

from harbor.models.trial.result import TrialResult

WANT = {"oracle": 1.0, "nop": 0.0}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("job", type=Path)
    ap.add_argument("oracle_out", type=Path, nargs="?")
    ap.add_argument("--tasks", type=int, default=1)
    args = ap.parse_args()
    problems = []
    seen = {}  # task -> agent -> trials
    for path in sorted(args.job.glob("*/result.json")):
        r = TrialResult.model_validate_json(path.read_text())
        agent = r.config.agent.name
        reward = (r.verifier_result.rewards or {}).get("reward") if r.verifier_result else None
        exc = r.exception_info.exception_type if r.exception_info else None
        print(f"  harbor trial {r.trial_name}: task {r.task_name}, agent {agent}, reward {reward}, exception {exc}")
        per_task = seen.setdefault(r.task_name, {})
        per_task[agent] = per_task.get(agent, 0) + 1
        if agent == "oracle" and args.oracle_out is not None:
            shutil.copytree(path.parent, args.oracle_out / path.parent.name)
        if agent not in WANT:
            problems.append(f"{path}: unexpected agent {agent}")
        elif exc is not None:
            problems.append(f"{path}: {agent} ended with {exc}: {r.exception_info.exception_message}")
        elif reward != WANT[agent]:
            problems.append(f"{path}: {agent} got reward {reward}, expected {WANT[agent]}")
    if len(seen) != args.tasks:
        problems.append(f"{args.job}: trials of {len(seen)} tasks ({', '.join(sorted(seen))}), expected {args.tasks}")
    for task, agents in sorted(seen.items()):
        for agent in WANT:
            if agents.get(agent) != 1:
                problems.append(f"{args.job}: {task}: {agents.get(agent, 0)} {agent} trials, expected 1")
    for p in problems:
        print(f"FAIL {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
