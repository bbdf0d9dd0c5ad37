#!/usr/bin/env python3
"""Checks an akbench Harbor export, and the import, with Harbor 0.25's own code.

Run by scripts/check-harbor-export (which plans and exports an example run) in a venv holding
harbor==0.25.0:

    check-harbor-export.py --akbench BIN --store-root DIR --run KEY --export DIR --tasks-root DIR

1. Every exported task loads with Harbor's `Task` (task.toml through `TaskConfig`), every job
   with `JobConfig`; the agent is not root, the verifier is separate, the oracle's
   `[solution].env` names Harbor's solution folder, the base image is pinned.
2. `harbor lint` passes on every task with its default rules plus root-agent and
   unpinned-image.
3. A Harbor job folder written with Harbor's own models (`TrialResult`, `TrialConfig`,
   `AgentContext`, `ExceptionInfo`, `VerifierResult`): one trial per exception type of
   Harbor's error policy (with and without a reward), plus rewarded trials without one, is
   imported by `akbench run import-harbor`; each observation must be the state
   docs/harbor.md gives for the type's cause in Harbor's own policy (`policy_for`), and the
   tokens and cost must be kept; the run records it writes (`--out`) must open in
   `run aggregate`.
Exit 0 when all hold, 1 otherwise (each problem printed).
"""

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from harbor.models.agent.context import AgentContext
from harbor.models.job.config import JobConfig
from harbor.models.task.config import VerifierEnvironmentMode
from harbor.models.task.id import LocalTaskId
from harbor.models.task.task import Task
from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
from harbor.models.trial.error_policy import ERROR_POLICIES, FailureCause, policy_for
from harbor.models.trial.paths import EnvironmentPaths
from harbor.models.trial.result import AgentInfo, ExceptionInfo, TrialResult
from harbor.models.verifier.result import VerifierResult

problems: list[str] = []


def problem(msg: str) -> None:
    problems.append(msg)
    print(f"FAIL {msg}", file=sys.stderr)


def check_models(export: Path, manifest: dict) -> None:
    before = len(problems)
    solution_dir = str(EnvironmentPaths().solution_dir)
    for t in manifest["trials"]:
        d = export / t["path"]
        try:
            task = Task(d)
        except Exception as e:  # pydantic's ValidationError, TOML and I/O errors alike
            problem(f"{d}: Harbor's Task does not load it: {type(e).__name__}: {e}")
            continue
        c = task.config
        if c.agent.user in (None, "root", 0, "0"):
            problem(f"{d}: the agent runs as root")
        if c.verifier.environment_mode != VerifierEnvironmentMode.SEPARATE:
            problem(f"{d}: the verifier shares the agent's environment")
        if c.solution.env.get("AKBENCH_SOLUTION_DIR") != solution_dir:
            problem(f"{d}: [solution].env does not point the oracle at {solution_dir}")
        if not task.paths.solve_path.is_file():
            problem(f"{d}: no {task.paths.solve_path}")
        docker = (d / "environment/Dockerfile").read_text()
        base = manifest.get("base_image") or ""
        if "@sha256:" not in base or f"FROM {base}\n" not in docker:
            problem(f"{d}: the Dockerfile does not start FROM the pinned base image {base!r}")
    for job in sorted((export / "jobs").glob("*.json")):
        try:
            cfg = JobConfig.model_validate(json.loads(job.read_text()))
        except Exception as e:
            problem(f"{job}: Harbor's JobConfig refuses it: {type(e).__name__}: {e}")
            continue
        for tc in cfg.tasks:
            if not (export / tc.path).is_dir():
                problem(f"{job}: task {tc.path} is not in the export")
    if len(problems) == before:
        print(f"ok Harbor's models load {len(manifest['trials'])} tasks and the jobs")


def check_lint(export: Path, manifest: dict) -> None:
    dirs = [str(export / t["path"]) for t in manifest["trials"]]
    p = subprocess.run(
        [sys.executable, "-m", "harbor.cli.main", "lint", "--json",
         "--extend-select", "root-agent", "--extend-select", "unpinned-image", *dirs],
        capture_output=True, text=True,
    )
    if p.returncode != 0:
        problem(f"harbor lint exit {p.returncode}: {p.stdout.strip()} {p.stderr.strip()}")
    else:
        print(f"ok harbor lint (defaults + root-agent, unpinned-image): {len(dirs)} tasks, no findings")


def expected_state(exception_type: str | None, reward: float | None, threshold: float) -> tuple[str, bool | None]:
    """docs/harbor.md's table, from Harbor's own policy for the type."""
    if exception_type is None:
        if reward is None:
            return "evaluation_error", None
        return "completed", reward >= threshold
    cause = policy_for(exception_type).cause
    if exception_type == "AgentTimeoutError":
        return "timeout", None
    if cause in (FailureCause.AGENT_EXHAUSTED_BUDGET, FailureCause.AGENT_REFUSED_TASK):
        return ("completed", reward >= threshold) if reward is not None else ("failed", None)
    if exception_type == "NonZeroAgentExitCodeError":
        return "failed", None
    if cause == FailureCause.VERIFIER_FAILED:
        return "evaluation_error", None
    if cause == FailureCause.CANCELLED:
        return "cancelled", None
    if exception_type in ("ModelNotFoundError", "ApiProviderResourceNotFoundError", "NotFoundError"):
        return "invalid_configuration", None
    return "infrastructure_error", None


def check_import(args, export: Path, manifest: dict) -> None:
    before = len(problems)
    trials = manifest["trials"]
    cases: list[tuple[str | None, float | None]] = [(None, 1.0), (None, 0.0), (None, None)]
    for t in sorted(ERROR_POLICIES):
        cases.append((t, 1.0))
    for t in ("ContextLengthExceededError", "OutputLengthExceededError", "ContentPolicyViolationError"):
        cases.append((t, None))
    cases.append(("SomethingHarborDoesNotKnowError", None))
    if len(cases) > len(trials):
        problem(f"the export has {len(trials)} trials, the import check needs {len(cases)}")
        return
    jobs = Path(args.jobs_out)
    now = datetime.now(timezone.utc)
    expected = {}
    for i, (etype, reward) in enumerate(cases):
        t = trials[i]
        name = f"{t['task'][:20]}__{i:07d}"
        result = TrialResult(
            task_name=f"akbench/{t['task']}",
            trial_name=name,
            trial_uri=f"file://{jobs}/job/{name}",
            task_id=LocalTaskId(path=Path(t["path"])),
            task_checksum="sha256:0",
            config=TrialConfig(
                task=TaskConfig(path=Path(t["path"])),
                trial_name=name,
                agent=AgentConfig(name="oracle"),
            ),
            agent_info=AgentInfo(name="oracle", version="1.0.0"),
            agent_result=AgentContext(n_input_tokens=1000 + i, n_cache_tokens=100, n_output_tokens=10, cost_usd=0.01),
            verifier_result=None if reward is None else VerifierResult(rewards={"reward": reward}),
            exception_info=None if etype is None else ExceptionInfo(
                exception_type=etype, exception_message="written by check-harbor-export",
                exception_traceback="", occurred_at=now),
        )
        out = jobs / "job" / name / "result.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(result.model_dump_json(indent=2))
        expected[t["trial_id"]] = (etype, expected_state(etype, reward, t["pass_threshold"]))
    obs = jobs / "observations.jsonl"
    p = subprocess.run(
        [args.akbench, "run", "import-harbor", args.run, str(jobs), "--export", str(export),
         "--observations", str(obs), "--out", str(jobs / "records"), "--json",
         "--store-root", args.store_root],
        capture_output=True, text=True,
    )
    # Exit 1: the plan has trials no result names (missing), which is valid but incomplete;
    # exit 0 expected since every result is identified and nothing conflicts.
    if p.returncode != 0:
        problem(f"import-harbor exit {p.returncode}: {p.stdout[-2000:]} {p.stderr[-2000:]}")
        return
    report = json.loads(p.stdout)
    seen = 0
    for line in obs.read_text().splitlines():
        o = json.loads(line)
        etype, (state, ok) = expected[o["trial_id"]]
        seen += 1
        if (o["state"], o["ok"]) != (state, ok):
            problem(f"{etype}: imported as {o['state']} ok={o['ok']}, docs/harbor.md says {state} ok={ok}")
        s = o.get("spend") or {}
        if s.get("cached_input_tokens") != 100 or s.get("output_tokens") != 10 or s.get("cost_usd") != 0.01 \
                or s.get("input_tokens") is None or s["input_tokens"] + 100 < 1000:
            problem(f"{etype}: tokens and cost not kept: {o}")
    if seen != len(cases):
        problem(f"import wrote {seen} observations for {len(cases)} results")
    if report["spend"]["cost_usd"] is None or abs(report["spend"]["cost_usd"] - 0.01 * len(cases)) > 1e-9:
        problem(f"the import's summed cost is {report['spend']}")
    if len(report.get("records", [])) != len(cases):
        problem(f"import-harbor --out wrote {len(report.get('records', []))} run records for {len(cases)} results")
    # The run records open where akbench's own do (`run aggregate` validates each, as view
    # and report read them).
    p = subprocess.run([args.akbench, "run", "aggregate", "--json", str(jobs / "records" / args.run)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        problem(f"run aggregate refuses the imported records: exit {p.returncode}: {p.stderr[-2000:]}")
    if len(problems) == before:
        print(f"ok import-harbor maps {len(cases)} Harbor results ({len(ERROR_POLICIES)} policy types) as documented, tokens, cost and run records kept")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--akbench", required=True)
    ap.add_argument("--store-root", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--export", required=True)
    ap.add_argument("--jobs-out", required=True)
    args = ap.parse_args()
    export = Path(args.export)
    manifest = json.loads((export / "akbench-harbor.json").read_text())
    check_models(export, manifest)
    check_lint(export, manifest)
    check_import(args, export, manifest)
    if problems:
        print(f"check-harbor-export: {len(problems)} problems", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
