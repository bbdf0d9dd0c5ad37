//! Fixtures for tests and benchmarks: tiny task folders and agent descriptors on disk, and
//! synthetic specs built in memory (no disk I/O) for planning and accounting at scale.

use crate::agent::AgentCondition;
use crate::clock::Clock;
use crate::lifecycle::State;
use crate::manifest::{Concurrency, References, Runtime, Visibility};
use crate::spec::{
    ComputePolicy, EvaluationPolicy, ExecutionPolicy, Provenance, ResolvedRunSpec, RunCondition,
    SpecAgent, SpecTask,
};
use crate::task::{Family, TaskRelease};
use std::collections::BTreeMap;
use std::path::Path;

/// A pinned commit for fixtures.
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// Writes a minimal valid task `<root>/<id>` with `version`.
pub fn write_task(root: &Path, id: &str, version: &str) {
    let dir = root.join(id);
    std::fs::create_dir_all(dir.join("tests")).expect("create task dir");
    std::fs::write(
        dir.join("task.toml"),
        format!(
            "version = \"{version}\"\n[source]\nrepo = \"repos/x.bundle\"\ncommit = \"{COMMIT}\"\n"
        ),
    )
    .expect("write task.toml");
    std::fs::write(dir.join("instruction.md"), format!("Solve {id}.\n")).expect("write");
    std::fs::write(dir.join("tests/test.sh"), "exit 0\n").expect("write test.sh");
    write_bundle_header(root);
}

/// `<root>/repos/x.bundle`, the repository [`write_task`]'s tasks name: a bundle header only
/// (enough to load; a trial that clones it fails), unless one is there already.
pub fn write_bundle_header(root: &Path) {
    let bundle = root.join("repos/x.bundle");
    if !bundle.exists() {
        std::fs::create_dir_all(root.join("repos")).expect("create repos dir");
        std::fs::write(&bundle, format!("# v2 git bundle\n{COMMIT} HEAD\n\n"))
            .expect("write bundle");
    }
}

/// Writes an agent descriptor `<root>/<name>.toml` with `adapter` (a `scripted` one gets a
/// script `<name>.sh` that exits 1, a `command` one the argv `["false"]`).
pub fn write_agent(root: &Path, name: &str, adapter: &str) {
    std::fs::create_dir_all(root).expect("create agents dir");
    let extra = match adapter {
        "scripted" => {
            std::fs::write(root.join(format!("{name}.sh")), "exit 1\n").expect("write script");
            format!("script = \"{name}.sh\"\n")
        }
        "command" => "command = [\"false\"]\n".to_string(),
        _ => String::new(),
    };
    std::fs::write(
        root.join(format!("{name}.toml")),
        format!("adapter = \"{adapter}\"\n{extra}"),
    )
    .expect("write agent");
}

/// A synthetic task release (nothing on disk).
pub fn synthetic_task(id: &str, version: &str, family: Family) -> SpecTask {
    SpecTask {
        release: TaskRelease {
            id: id.to_string(),
            version: version.to_string(),
            digest: crate::digest::digest_of(&(id, version)),
        },
        family,
        source_repo: "repos/x.bundle".into(),
        source_commit: COMMIT.into(),
        mutation_digest: None,
        tests_digest: crate::digest::digest_of(&id),
        reference_digest: None,
        image: None,
        agent_timeout_sec: 600.0,
        verifier_timeout_sec: 300.0,
        requires: Default::default(),
        metadata: BTreeMap::new(),
        ignored_fields: Vec::new(),
        needs_egress: false,
        mcp_servers: Vec::new(),
    }
}

/// A synthetic agent condition (nothing on disk).
pub fn synthetic_agent(label: &str, model: Option<&str>) -> SpecAgent {
    let mut descriptor = AgentCondition {
        name: label.to_string(),
        adapter: "scripted".into(),
        model: model.map(str::to_string),
        credentials: vec![],
        descriptor_digest: crate::digest::digest_of(&label),
        digest: String::new(),
    };
    descriptor.digest = crate::digest::digest_of(&descriptor);
    SpecAgent::new(
        label.to_string(),
        descriptor,
        model.map(str::to_string),
        BTreeMap::new(),
        None,
    )
}

/// A synthetic condition with `tasks` x `agents` x `repetitions` trials.
pub fn synthetic_condition(tasks: usize, agents: usize, repetitions: u32) -> RunCondition {
    RunCondition {
        experiment: "synthetic".into(),
        description: None,
        tasks: (0..tasks)
            .map(|i| synthetic_task(&format!("task-{i:05}"), "1.0", Family::Artefact))
            .collect(),
        agents: (0..agents)
            .map(|i| synthetic_agent(&format!("agent-{i:02}"), None))
            .collect(),
        repetitions,
        compute: ComputePolicy {
            cpus: 1,
            memory_mb: 2048,
            diff_mb: crate::spec::DEFAULT_DIFF_MB,
            agent_timeout_sec: None,
            verifier_timeout_sec: None,
        },
        execution: ExecutionPolicy {
            runtime: Runtime::Direct,
            infrastructure_retries: 0,
            candidates: 1,
            selection: Default::default(),
            concurrency: Concurrency::default(),
            budget: None,
            worker_labels: Vec::new(),
            priority: 0,
            weight: 1,
            grading_environment: Default::default(),
        },
        evaluation: EvaluationPolicy {
            grade: true,
            profile: "default".into(),
            reviewer: None,
        },
        visibility: Visibility::Private,
        credentials: vec![],
        references: References::default(),
    }
}

/// A synthetic spec (see [`synthetic_condition`]).
pub fn synthetic_spec(
    tasks: usize,
    agents: usize,
    repetitions: u32,
    clock: &dyn Clock,
) -> ResolvedRunSpec {
    ResolvedRunSpec::assemble(
        synthetic_condition(tasks, agents, repetitions),
        Provenance::default(),
        clock,
    )
}

/// A transition log through `path`, every step entered `at`, without notes.
pub fn transitions_along(
    path: &[State],
    at: chrono::DateTime<chrono::Utc>,
) -> Vec<crate::record::Transition> {
    path.iter()
        .enumerate()
        .map(|(i, s)| crate::record::Transition {
            seq: u32::try_from(i).unwrap(),
            state: *s,
            at,
            note: None,
        })
        .collect()
}

/// A valid attempt record: the whole chain for `completed` (graded `ok`), else pending then
/// `terminal`.
pub fn attempt_record(
    id: uuid::Uuid,
    trial_key: &str,
    number: u32,
    terminal: State,
    ok: Option<bool>,
) -> crate::record::AttemptRecord {
    let at = chrono::Utc::now();
    let path: Vec<State> = if terminal == State::Completed {
        let mut p = vec![State::Pending];
        while let Some(next) = p.last().unwrap().next_in_chain() {
            p.push(next);
        }
        p.push(State::Completed);
        p
    } else {
        vec![State::Pending, terminal]
    };
    let transitions = transitions_along(&path, at);
    let grade = ok.map(|ok| crate::record::Grade {
        ok,
        score: if ok { 1.0 } else { 0.0 },
        source: "reward_txt".into(),
        exit_code: Some(0),
        tests: vec![],
        report: String::new(),
        report_truncated: false,
        tests_digest: "sha256:00".into(),
        graded_at: at,
        duration_ms: 1,
        runtime: None,
        cause: None,
        tampered: false,
        tripwire: None,
        withheld: Vec::new(),
        ended_by: None,
        environment: None,
    });
    crate::record::AttemptRecord {
        services: Vec::new(),
        attempt: crate::record::Identity {
            id,
            key: format!("{trial_key}/a{number}"),
        },
        number,
        transitions,
        state: terminal,
        cause: (terminal != State::Completed).then(|| "test".to_string()),
        workspace: Default::default(),
        agent_process: None,
        observations: Default::default(),
        timings_ms: Default::default(),
        grade,
        artifacts_dir: format!("a{number}"),
        graded_from: None,
        redacted: Vec::new(),
        steps: Vec::new(),
        provenance: None,
    }
}

/// Set (to anything but empty) by `.ci/run` once it has installed everything the tests need:
/// a test that would skip for want of a tool or privilege then fails instead.
pub const REQUIRE_ALL_TESTS_ENV: &str = "AKBENCH_REQUIRE_ALL_TESTS";

/// Reports that `test` cannot run here because of `why` (say how to make it run) and returns,
/// so the caller can `return` from the test. Under [`REQUIRE_ALL_TESTS_ENV`] it panics: CI never
/// passes a test that did not run.
pub fn skip(test: &str, why: &str) {
    if std::env::var_os(REQUIRE_ALL_TESTS_ENV).is_some_and(|v| !v.is_empty()) {
        panic!(
            "{test} cannot run here ({why}) and {REQUIRE_ALL_TESTS_ENV} requires every test to run"
        );
    }
    eprintln!("SKIPPED {test}: {why}");
}
