//! One rule for "is this agent descriptor valid": the same bad descriptor is refused with the
//! same message when a run is planned (`akbench_core::spec::resolve`, what `run plan` and
//! `sweep` call) and when the worker resolves its adapter (`Registry::resolve`, what every
//! attempt calls before it launches anything).

use std::path::{Path, PathBuf};

use akbench_core::agent::Agent;
use akbench_core::clock::SystemClock;
use akbench_core::manifest::ExperimentManifest;
use akbench_core::spec::{resolve, ResolveInputs};
use akbench_worker::adapters::Registry;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The error `run plan` gives for an experiment of one task and the agent `descriptor`.
fn plan_time(agents: &Path, name: &str) -> Result<(), String> {
    let text = format!(
        "experiment: adapters\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: {name}\n"
    );
    let manifest = ExperimentManifest::parse(&text, Path::new("experiment.yaml"))
        .map_err(|e| format!("the manifest: {e}"))?;
    resolve(
        &manifest,
        &ResolveInputs {
            manifest_path: None,
            tasks_root: Some(examples().join("tasks")),
            agents_root: Some(agents.to_path_buf()),
        },
        &SystemClock,
    )
    .map(drop)
    .map_err(|e| e.to_string())
}

/// The error the worker gives when an attempt resolves the adapter of `descriptor`.
fn worker(agents: &Path, name: &str) -> Result<(), String> {
    // The worker loads the descriptor as the planner does (`trial::prepare`; every case
    // here loads, so the refusal is the registry's).
    let agent = Agent::load(agents, name).unwrap_or_else(|e| panic!("{name} loads: {e}"));
    Registry::builtin().resolve(&agent).map(drop)
}

#[test]
fn a_bad_descriptor_is_refused_with_the_same_message_at_plan_time_and_by_the_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path();
    std::fs::write(agents.join("s.sh"), "exit 0\n").unwrap();
    // (descriptor, what the message names; "" = valid)
    let cases = [
        ("adapter = \"oracle\"\n", ""),
        ("adapter = \"command\"\ncommand = [\"my-agent\"]\n", ""),
        ("adapter = \"scripted\"\nscript = \"s.sh\"\n", ""),
        ("adapter = \"telepathy\"\n", "unknown adapter `telepathy`"),
        ("adapter = \"command\"\n", "field `command`"),
        ("adapter = \"command\"\ncommand = []\n", "field `command`"),
        (
            "adapter = \"command\"\ncommand = [\" \"]\n",
            "field `command`",
        ),
        (
            "adapter = \"command\"\ncommand = [\"a\", \"{prompt}\"]\n",
            "placeholder `{prompt}`",
        ),
        ("adapter = \"scripted\"\n", "field `script`"),
        (
            "adapter = \"oracle\"\n[parameters]\nx = 1\n",
            "takes no parameters",
        ),
        (
            "adapter = \"claude-code\"\n[parameters]\nmax_turnz = 3\n",
            "`max_turnz`",
        ),
        (
            "adapter = \"claude-code\"\n[parameters]\nmax_turns = \"many\"\n",
            "`max_turns`",
        ),
        (
            "adapter = \"claude-code\"\nprogram = \" \"\n",
            "empty program",
        ),
        (
            "adapter = \"codex\"\n[parameters]\nsandbox = true\n",
            "`sandbox` is true",
        ),
    ];
    for (i, (descriptor, want)) in cases.iter().enumerate() {
        let name = format!("agent{i}");
        std::fs::write(agents.join(format!("{name}.toml")), descriptor).unwrap();
        let planned = plan_time(agents, &name);
        let resolved = worker(agents, &name);
        if want.is_empty() {
            assert_eq!(planned, Ok(()), "{descriptor:?} at plan time");
            assert_eq!(resolved, Ok(()), "{descriptor:?} by the worker");
            continue;
        }
        let planned = planned.expect_err(descriptor);
        let resolved = resolved.expect_err(descriptor);
        assert!(planned.contains(want), "{descriptor:?}: {planned}");
        assert_eq!(
            resolved, planned,
            "{descriptor:?}: the worker and the plan disagree"
        );
        assert!(
            resolved.starts_with("failed to load agent descriptor ")
                && resolved.contains(&format!("{name}.toml")),
            "{descriptor:?}: {resolved}"
        );
    }
}
