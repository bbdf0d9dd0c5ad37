#!/usr/bin/env python3
"""Reads the trials Harbor ran on the multi-step example (scripts/check-harbor-export).

    check-harbor-steps.py JOBS_DIR

JOBS_DIR holds the jobs `harbor run` wrote for examples/tasks/harbor-steps-001 with the
agents `oracle` and `nop` (one trial each). Every trial's result.json is loaded with
Harbor's own `TrialResult`; its steps (`step_results`: name and `reward`) and the trial's
reward must be what akbench gives the same task (worker/tests/container_steps.rs,
`the_oracle_solves_every_step_of_the_example_and_a_no_op_agent_is_stopped_by_the_gate`):
the oracle solves the three steps (reward 1 each, trial 1); nop fails step `open` (reward
0), whose `min_reward` gate stops the rest (no result for `deposit` and `report`, trial 0).
Prints what it read; exit 0 when both hold, 1 otherwise (each problem printed).
"""

import sys
from pathlib import Path

from harbor.models.trial.result import TrialResult

# agent -> (trial reward, [(step, reward)]): akbench's verdicts on the same task.
WANT = {
    "oracle": (1.0, [("open", 1.0), ("deposit", 1.0), ("report", 1.0)]),
    "nop": (0.0, [("open", 0.0)]),
}


def reward_of(verifier_result):
    if verifier_result is None:
        return None
    return (verifier_result.rewards or {}).get("reward")


def main() -> int:
    jobs = Path(sys.argv[1])
    problems = []
    seen = {}
    for path in sorted(jobs.glob("*/*/result.json")):
        r = TrialResult.model_validate_json(path.read_text())
        agent = r.config.agent.name
        steps = [(s.step_name, reward_of(s.verifier_result)) for s in r.step_results or []]
        reward = reward_of(r.verifier_result)
        excs = [e.exception_type for e in r.exceptions] if hasattr(r, "exceptions") else []
        print(f"  harbor trial {r.trial_name}: agent {agent}, reward {reward}, steps {steps}, exceptions {excs}")
        seen[agent] = seen.get(agent, 0) + 1
        if agent not in WANT:
            problems.append(f"{path}: unexpected agent {agent}")
            continue
        want_reward, want_steps = WANT[agent]
        if r.exception_info is not None:
            problems.append(f"{path}: {agent} ended with {r.exception_info.exception_type}: {r.exception_info.exception_message}")
        if steps != want_steps:
            problems.append(f"{path}: {agent} steps {steps}, akbench gives {want_steps}")
        if reward != want_reward:
            problems.append(f"{path}: {agent} trial reward {reward}, akbench gives {want_reward}")
    for agent in WANT:
        if seen.get(agent) != 1:
            problems.append(f"{jobs}: {seen.get(agent, 0)} {agent} trials, expected 1")
    for p in problems:
        print(f"FAIL {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
