//! Multi-step tasks (`[[steps]]`, Harbor 0.25's finite lifecycle) under the `container`
//! runtime, end to end: a real registry, the Debian test image, the example three-step task
//! (`examples/tasks/harbor-steps-001`) run in one environment. The oracle solves every step;
//! a no-op agent fails step one, whose `min_reward` gate stops the rest; a step graded below
//! its gate stops the steps after it even when the agent would solve them (without the gate
//! they run); an infrastructure failure in step two ends the attempt, which is retried whole,
//! and each attempt's record keeps the steps that ran; a multi-step attempt is not graded
//! again from its final workspace.

mod common;

use akbench_core::record::steps::StepVerdict;
use akbench_core::record::RunRecord;
use akbench_worker::process::CancelToken;
use common::container_trial::{base_registry, run_in_container, runs_here};
use common::registry::Registry;
use common::Corpus;
use std::fs;
use std::path::Path;

/// The registry with the Debian base image, a corpus, and the example three-step task
/// copied into it as `id`, its image the registry's.
fn setup(id: &str) -> (Registry, Corpus) {
    let (reg, c) = base_registry();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks/harbor-steps-001");
    let dir = c.tasks().join(id);
    assert!(std::process::Command::new("cp")
        .arg("-a")
        .arg(&example)
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    edit(&c, id, "task.toml", |t| {
        t.replacen(
            "workdir = \"/app\"",
            &format!(
                "workdir = \"/app\"\ndocker_image = \"{}/akbench/base:bookworm\"",
                reg.addr
            ),
            1,
        )
    });
    (reg, c)
}

/// Rewrites file `rel` of task `id`.
fn edit(c: &Corpus, id: &str, rel: &str, f: impl Fn(&str) -> String) {
    let p = c.tasks().join(id).join(rel);
    let text = fs::read_to_string(&p).unwrap();
    let new = f(&text);
    assert_ne!(new, text, "{rel} unchanged");
    fs::write(&p, new).unwrap();
}

fn run(c: &Corpus, task: &str, agent: &str, name: &str, retries: u32) -> RunRecord {
    let record = run_in_container(c, task, agent, name, 60.0, retries);
    for a in &record.attempts {
        eprintln!(
            "{name} attempt {}: state={} cause={:?} timings_ms={:?} grade={:?}\nsteps={}",
            a.number,
            a.state,
            a.cause,
            a.timings_ms,
            a.grade.as_ref().map(|g| (g.ok, g.score, &g.report)),
            serde_json::to_string_pretty(&a.steps).unwrap()
        );
    }
    record
}

fn verdicts(r: &RunRecord, attempt: usize) -> Vec<(String, StepVerdict)> {
    r.attempts[attempt]
        .steps
        .iter()
        .map(|s| (s.name.clone(), s.verdict))
        .collect()
}

fn names(v: &[(&str, StepVerdict)]) -> Vec<(String, StepVerdict)> {
    v.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

#[test]
fn the_oracle_solves_every_step_of_the_example_and_a_no_op_agent_is_stopped_by_the_gate() {
    const TEST: &str =
        "the_oracle_solves_every_step_of_the_example_and_a_no_op_agent_is_stopped_by_the_gate";
    if !runs_here(TEST) {
        return;
    }
    let (_reg, c) = setup("steps");
    let r = run(&c, "steps", "oracle", "oracle", 0);
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    assert_eq!(r.outcome.ok, Some(true), "{:?}", r.attempts[0].grade);
    assert_eq!(r.outcome.score, Some(1.0));
    use StepVerdict::*;
    assert_eq!(
        verdicts(&r, 0),
        names(&[("open", Solved), ("deposit", Solved), ("report", Solved)])
    );
    let a = &r.attempts[0];
    for s in &a.steps {
        assert_eq!(s.agent_exit, Some(0), "{s:?}");
        assert!(s.started_at.is_some() && s.ended_at.is_some(), "{s:?}");
        assert!(s.gated_stop.is_none(), "{s:?}");
    }
    let g = a.grade.as_ref().unwrap();
    assert_eq!(g.source, "steps_mean");
    assert_eq!(g.environment.as_deref(), Some("shared"));
    // Each step's agent got its own instruction and left its own logs.
    let out = c.root().join("out/oracle/a1");
    for step in ["open", "deposit", "report"] {
        assert!(
            out.join("steps")
                .join(step)
                .join("agent.stdout.log")
                .is_file(),
            "{step}"
        );
    }
    // Each step's artifacts, collected after it ran.
    assert_eq!(a.steps[0].artifacts, ["a1/steps/open/artifacts/ledger.txt"]);
    assert_eq!(
        fs::read_to_string(out.join("steps/open/artifacts/ledger.txt")).unwrap(),
        "balance=100\n"
    );
    assert_eq!(
        fs::read_to_string(out.join("steps/report/artifacts/report.txt")).unwrap(),
        "150\n"
    );

    // Its steps were graded as they ran: grading the attempt again is refused.
    let err = akbench_worker::regrade::regrade(
        &c.orchestrator(),
        &c.root().join("out/oracle"),
        &c.tasks(),
        akbench_worker::regrade::WorkspaceMode::Auto,
        &CancelToken::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("multi-step attempt"), "{err}");

    // A no-op agent: step one graded 0, below its min_reward; the rest do not run.
    let r = run(&c, "steps", "noop", "noop", 0);
    assert_eq!(r.outcome.state.to_string(), "completed");
    assert_eq!(r.outcome.ok, Some(false), "{:?}", r.attempts[0].grade);
    assert_eq!(r.outcome.score, Some(0.0));
    assert_eq!(
        verdicts(&r, 0),
        names(&[("open", Failed), ("deposit", NotRun), ("report", NotRun)])
    );
    assert_eq!(
        r.attempts[0].steps[0].gated_stop.as_deref(),
        Some("reward=0 below min_reward 1")
    );
    assert!(!c.root().join("out/noop/a1/steps/deposit").exists());
}

/// Step one's tests always grade 0: with its gate the oracle never reaches step two; without
/// it, steps two and three run and are solved (the mean is 2/3). A gate on a key of step
/// one's reward.json stops the rest though its `reward` solves it.
#[test]
fn a_step_below_its_min_reward_stops_the_steps_after_it() {
    const TEST: &str = "a_step_below_its_min_reward_stops_the_steps_after_it";
    if !runs_here(TEST) {
        return;
    }
    let (_reg, c) = setup("gated");
    edit(&c, "gated", "steps/open/tests/test.sh", |t| {
        t.replace("pass test", "pass false && test")
    });
    let r = run(&c, "gated", "oracle", "gated", 0);
    use StepVerdict::*;
    assert_eq!(
        verdicts(&r, 0),
        names(&[("open", Failed), ("deposit", NotRun), ("report", NotRun)])
    );
    assert_eq!(r.outcome.ok, Some(false));
    assert!(!c.root().join("out/gated/a1/steps/deposit").exists());

    // The same task without the gate: the later steps run.
    let text = fs::read_to_string(c.tasks().join("gated/task.toml")).unwrap();
    fs::write(
        c.tasks().join("gated/task.toml"),
        text.replacen("min_reward = 1.0\n", "", 1),
    )
    .unwrap();
    let r = run(&c, "gated", "oracle", "ungated", 0);
    assert_eq!(
        verdicts(&r, 0),
        names(&[("open", Failed), ("deposit", Solved), ("report", Solved)])
    );
    let score = r.outcome.score.unwrap();
    assert!((score - 2.0 / 3.0).abs() < 1e-9, "{score}");
    assert_eq!(r.outcome.ok, Some(false));

    // A gate on a key of the step's reward.json: `reward` 1 solves the step, `tests` 0 is
    // below its gate, so the rest do not run.
    fs::write(
        c.tasks().join("gated/steps/open/tests/test.sh"),
        "#!/bin/bash\necho '{\"reward\": 1, \"tests\": 0}' > /logs/verifier/reward.json\n",
    )
    .unwrap();
    edit(&c, "gated", "task.toml", |t| {
        t.replacen(
            "name = \"open\"\n",
            "name = \"open\"\nmin_reward = { tests = 1.0 }\n",
            1,
        )
    });
    let r = run(&c, "gated", "oracle", "keyed", 0);
    assert_eq!(
        verdicts(&r, 0),
        names(&[("open", Solved), ("deposit", NotRun), ("report", NotRun)])
    );
    let open = &r.attempts[0].steps[0];
    assert_eq!(
        open.rewards.as_ref().map(|m| m.len()),
        Some(2),
        "{:?}",
        open.rewards
    );
    assert_eq!(
        open.gated_stop.as_deref(),
        Some("tests=0 below min_reward 1")
    );
}

/// Step two's healthcheck never passes: the infrastructure's failure ends the attempt; the
/// trial retries it whole (step one runs again), and each attempt keeps its steps.
#[test]
fn an_infrastructure_failure_in_step_two_retries_the_whole_trial_and_keeps_its_steps() {
    const TEST: &str =
        "an_infrastructure_failure_in_step_two_retries_the_whole_trial_and_keeps_its_steps";
    if !runs_here(TEST) {
        return;
    }
    let (_reg, c) = setup("flaky");
    edit(&c, "flaky", "task.toml", |t| {
        t.replacen("test -x /app/bin/balance", "test -e /app/never-there", 1)
    });
    let r = run(&c, "flaky", "oracle", "flaky", 1);
    assert_eq!(r.attempts.len(), 2);
    use StepVerdict::*;
    for (i, a) in r.attempts.iter().enumerate() {
        assert_eq!(a.state.to_string(), "infrastructure_error");
        let cause = a.cause.as_deref().unwrap_or_default();
        assert!(cause.starts_with("step `deposit` healthcheck:"), "{cause}");
        assert_eq!(
            verdicts(&r, i),
            names(&[("open", Solved), ("deposit", NotGraded), ("report", NotRun)])
        );
        assert!(a.steps[1].started_at.is_some() && a.steps[1].cause.is_some());
    }
}

/// The example with each step graded Harbor's common way, pytest over a hidden test file
/// (`/tests/test_<step>.py`), so a tripwire twin can be made of each step's tests.
fn pytest_graded(c: &Corpus, id: &str) {
    let tests = [
        (
            "open",
            "def test_ledger():\n    with open(\"/app/ledger.txt\") as f:\n        assert f.read().strip() == \"balance=100\"\n",
        ),
        (
            "deposit",
            "import subprocess\n\ndef test_balance():\n    out = subprocess.run([\"/app/bin/balance\"], capture_output=True, text=True).stdout\n    assert out.strip() == \"150\"\n",
        ),
        (
            "report",
            "def test_report():\n    with open(\"/app/report.txt\") as f:\n        assert f.read().strip() == \"150\"\n",
        ),
    ];
    for (step, test) in tests {
        let dir = c.tasks().join(id).join("steps").join(step).join("tests");
        fs::write(dir.join(format!("test_{step}.py")), test).unwrap();
        fs::write(
            dir.join("test.sh"),
            format!(
                "#!/bin/bash\ncd /app\npython3 -m pytest -q -p no:cacheprovider /tests/test_{step}.py\n\
                 if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
            ),
        )
        .unwrap();
    }
}

/// Each step is graded as a one-step task graded in the agent's environment is: the
/// oracle's steps each keep a tripwire that failed as it must. An agent that plants a
/// `.pth` hook in the environment's Python (every pytest run "passes" before a test runs)
/// is caught in every step: each step's twin, run in the environment after its graded run,
/// passes too, and the step's reference solution, graded on the twin in a fresh
/// environment where the steps before it ran first with their solutions, fails it. Without
/// that replay the reference of `deposit` and `report` could not run (they build on `open`),
/// and the twin would be `unconfirmed`, the hook's grade solved.
#[test]
fn a_hook_planted_in_step_one_is_caught_in_every_step_by_its_tripwire() {
    const TEST: &str = "a_hook_planted_in_step_one_is_caught_in_every_step_by_its_tripwire";
    if !runs_here(TEST) {
        return;
    }
    let (_reg, c) = setup("hooked");
    pytest_graded(&c, "hooked");
    // No gates: every step runs whatever the one before scored.
    edit(&c, "hooked", "task.toml", |t| {
        t.replacen("min_reward = 1.0\n", "", 1)
            .replacen("min_reward = { reward = 1.0 }\n", "", 1)
    });
    let r = run(&c, "hooked", "oracle", "oracle", 0);
    use StepVerdict::*;
    assert_eq!(
        verdicts(&r, 0),
        names(&[("open", Solved), ("deposit", Solved), ("report", Solved)])
    );
    for s in &r.attempts[0].steps {
        let t = s.tripwire.as_ref().map(|t| t.result.as_str());
        assert_eq!(t, Some(akbench_core::record::TRIPWIRE_OK), "{s:?}");
    }
    let g = r.attempts[0].grade.clone().unwrap();
    assert!(g.ok && !g.tampered, "{g:?}");
    assert_eq!(
        g.tripwire.as_ref().map(|t| t.result.as_str()),
        Some(akbench_core::record::TRIPWIRE_OK),
        "the trial's grade holds its steps' tripwires: {g:?}"
    );

    c.add_agent(
        "hooker",
        "adapter = \"scripted\"\nscript = \"hooker.sh\"\n",
        Some(
            "for d in $(python3 -c 'import site; print(\" \".join(site.getsitepackages()))'); do\n\
               mkdir -p \"$d\" && echo 'import os; os._exit(0)' > \"$d/zz_akb.pth\" && echo \"planted in $d\"\n\
             done\n\
             f=$(mktemp /logs/agent/step.XXXXXX) && ls /logs/agent | wc -l > \"$f\"\n\
             exit 0\n",
        ),
    );
    let r = run(&c, "hooked", "hooker", "hooker", 0);
    // Each step's /logs/agent is its own (collected into the step's artifacts, emptied
    // before the next step, as Harbor does): one file there, which saw only itself.
    for step in ["open", "deposit", "report"] {
        let dir = c
            .root()
            .join("out/hooker/a1/steps")
            .join(step)
            .join("logs/agent");
        let files: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{step}: {files:?}");
        assert_eq!(fs::read_to_string(&files[0]).unwrap().trim(), "1", "{step}");
    }
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    let a = &r.attempts[0];
    assert_eq!(
        verdicts(&r, 0),
        names(&[("open", Failed), ("deposit", Failed), ("report", Failed)]),
        "the planted hook was graded solved in a step"
    );
    for s in &a.steps {
        let result = s
            .tripwire
            .as_ref()
            .map(|t| t.result.clone())
            .unwrap_or_default();
        assert!(
            result.starts_with("grading tampered") && result.contains("reference solution fails"),
            "step {}: {result}",
            s.name
        );
    }
    let g = a.grade.clone().unwrap();
    assert!(!g.ok && g.tampered, "{g:?}");
    assert_eq!(g.score, 0.0);
}

/// An agent that solves nothing and leaves, in step one, a process writing reward 1 into
/// every verifier folder it can find (its own `/logs/verifier`, other processes' roots): no
/// step's grading reads it, so step one fails and its gate stops the rest.
#[test]
fn a_reward_writer_left_in_step_one_reaches_no_steps_grading() {
    const TEST: &str = "a_reward_writer_left_in_step_one_reaches_no_steps_grading";
    if !runs_here(TEST) {
        return;
    }
    let (_reg, c) = setup("forged");
    // The grading of step one leaves its reward written for two seconds before it is read.
    edit(&c, "forged", "steps/open/tests/test.sh", |t| {
        format!("{t}sleep 2\n")
    });
    c.add_agent(
        "forger",
        "adapter = \"scripted\"\nscript = \"forger.sh\"\n",
        Some(
            "(while true; do\n\
               mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\n\
               for f in /proc/[0-9]*/root/logs/verifier; do echo 1 > \"$f/reward.txt\"; done\n\
               for f in /proc/[0-9]*/root/tmp/*/eval/*/verifier /proc/[0-9]*/root/work*/*/eval*/*/*/verifier; do echo 1 > \"$f/reward.txt\"; done\n\
               sleep 0.05\n\
             done) >/dev/null 2>&1 &\n\
             echo left-running\nexit 0\n",
        ),
    );
    let r = run(&c, "forged", "forger", "forger", 0);
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    use StepVerdict::*;
    assert_eq!(
        verdicts(&r, 0),
        names(&[("open", Failed), ("deposit", NotRun), ("report", NotRun)]),
        "the planted reward was read"
    );
    assert_eq!(r.outcome.ok, Some(false));
    assert_eq!(r.outcome.score, Some(0.0));
}
