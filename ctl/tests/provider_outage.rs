//! A two-agent sweep with the real `claude` and `codex` CLIs, each on its own provider route
//! served by a loopback fake provider (worker/tests/common/fake_provider.rs). The claude
//! route is down at the start: its first trial ends `infrastructure_error` (cause
//! `provider: ...`) after the provider grace, never the agent timeout; the route is paused,
//! the provider comes back, and its next trial is solved. The codex agent's rates are
//! untouched. Skipped, with a notice, where a CLI is not installed.

#[path = "../../worker/tests/common/fake_provider.rs"]
mod fake_provider;

use fake_provider::{FakeProvider, Mode};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn installed(program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        akbench_core::testkit::skip(
            &format!("the outage sweep with the real `{program}` CLI"),
            &format!("`{program}` is not installed (.ci/run installs it from npm)"),
        );
    }
    ok
}

fn records(dir: &Path, out: &mut Vec<Value>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            records(&p, out);
        } else if p.file_name().unwrap() == "run_record.json" {
            if let Ok(v) = serde_json::from_slice(&std::fs::read(&p).unwrap()) {
                out.push(v);
            }
        }
    }
}

/// True once an attempt of the claude agent has ended: its `run_record.json` (`--local`) or
/// its worker's `attempt_record.json` (embedded) exists somewhere under `dir`.
fn claude_attempt_ended(dir: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            // The database, the mirrors and the evidence store hold no attempt records.
            !matches!(name.to_str(), Some("data" | "cache" | "runs")) && claude_attempt_ended(&p)
        } else {
            matches!(
                name.to_str(),
                Some("run_record.json" | "attempt_record.json")
            ) && p.to_string_lossy().contains("/claude/")
        }
    })
}

#[test]
fn a_route_down_for_part_of_a_local_sweep_costs_infrastructure_errors_not_scores() {
    outage(true);
}

#[test]
fn a_route_down_for_part_of_an_embedded_sweep_costs_infrastructure_errors_not_scores() {
    outage(false);
}

/// The sweep `--local`, or on the embedded default (a private PostgreSQL in the temp dir, a
/// coordinator and local workers).
fn outage(local: bool) {
    if !installed("claude") || !installed("codex") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tasks = repo().join("examples/tasks");
    // The scripted model applies the task's reference fix with its shell tool. The patches
    // travel inside the command: the sandbox hides the tasks root from the agent.
    let mut fix = String::from("case $AKBENCH_TASK_ID in\n");
    for id in ["pyslug-001", "pyslug-002", "pyslug-003", "pyslug-004"] {
        let patch = tasks.join(id).join("solution/fix.patch");
        if let Ok(p) = std::fs::read_to_string(&patch) {
            fix.push_str(&format!(
                "{id}) git apply <<'AKBENCH_PATCH'\n{p}AKBENCH_PATCH\n;;\n"
            ));
        }
    }
    fix.push_str("esac\n");
    let anthropic = FakeProvider::start(Mode::Down, Some(&fix));
    let openai = FakeProvider::start(Mode::Up, Some(&fix));
    let agents = tmp.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("claude.toml"),
        format!(
            "adapter = \"claude-code\"\nmodel = \"claude-sonnet-4-5\"\n\
             network = [\"{}\"]\n\
             [env]\nANTHROPIC_BASE_URL = \"{}\"\nANTHROPIC_API_KEY = \"sk-fake\"\n\
             CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\"\n",
            anthropic.endpoint(),
            anthropic.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        agents.join("codex.toml"),
        format!(
            "adapter = \"codex\"\nmodel = \"gpt-5-codex\"\n\
             network = [\"{}\"]\n\
             extra_args = [\"-c\", \"model_provider=\\\"fake\\\"\", \
             \"-c\", \"model_providers.fake={{ name = \\\"fake\\\", base_url = \\\"{}\\\", env_key = \\\"FAKE_KEY\\\", wire_api = \\\"responses\\\" }}\"]\n\
             [parameters]\nsandbox = \"bypass\"\n[env]\nFAKE_KEY = \"sk-fake\"\n",
            openai.endpoint(),
            openai.openai_base_url()
        ),
    )
    .unwrap();
    let manifest = tmp.path().join("experiment.yaml");
    // One claude trial at a time, so the second starts after the first met the outage.
    std::fs::write(
        &manifest,
        "experiment: outage\ntasks:\n  ids: [pyslug-001, pyslug-002]\nagents:\n  conditions:\n\
         \x20   - descriptor: claude\n      provider_route: anthropic\n\
         \x20   - descriptor: codex\n      provider_route: openai\n\
         repetitions: 1\nexecution:\n  concurrency:\n    per_agent: {claude: 1}\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_akbench"));
    cmd.arg("sweep").arg(&manifest);
    if local {
        cmd.arg("--local").arg("--jobs").arg("2");
    } else {
        // The PostgreSQL account (as root: `postgres`) must reach the data folder.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        cmd.env("AKBENCH_DATA", tmp.path().join("data"));
    }
    let mut child = cmd
        .arg("--tasks-root")
        .arg(&tasks)
        .arg("--agents-root")
        .arg(&agents)
        .arg("--store-root")
        .arg(tmp.path().join("runs"))
        .arg("--out")
        .arg(&out)
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .arg("--json")
        .env("AKBENCH_PROVIDER_GRACE_SEC", "2")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The provider comes back once the first claude attempt has ended (its record is
    // written): the event the outage's end waits for.
    loop {
        if claude_attempt_ended(tmp.path()) {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the sweep ended ({status}) before any claude trial did");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    anthropic.set_mode(Mode::Up);
    let output = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let mut recs = Vec::new();
    records(&out, &mut recs);
    assert_eq!(recs.len(), 4, "{v}");
    let mut claude: Vec<&Value> = recs
        .iter()
        .filter(|r| r["agent"]["name"] == "claude")
        .collect();
    claude.sort_by_key(|r| r["started_at"].as_str().unwrap().to_string());
    let first = &claude[0]["attempts"][0];
    assert_eq!(first["state"], "infrastructure_error", "{}", claude[0]);
    let cause = first["cause"].as_str().unwrap();
    assert!(cause.starts_with("provider: unreachable"), "{cause}");
    assert!(
        cause.contains("stopped after 2s of provider failures"),
        "{cause}"
    );
    assert_eq!(first["agent_process"]["timed_out"], false);
    eprintln!(
        "the outage cost the first claude trial {} ms of agent time",
        first["agent_process"]["duration_ms"]
    );
    // The second claude trial ran once the route was back, and was solved.
    assert_eq!(claude[1]["outcome"]["state"], "completed", "{}", claude[1]);
    assert_eq!(claude[1]["outcome"]["ok"], true, "{}", claude[1]);
    assert!(
        claude[1]["started_at"].as_str().unwrap() >= claude[0]["finished_at"].as_str().unwrap()
    );
    // The infrastructure error is not a score: claude's pass rate is over its one graded
    // trial, the codex agent's rates are untouched.
    let by = &v["summary"]["by_agent"];
    assert_eq!(by["claude"]["counts"]["infrastructure_error"], 1, "{v}");
    assert_eq!(by["claude"]["rates"]["pass_rate"], 1.0, "{v}");
    assert_eq!(by["codex"]["counts"]["succeeded"], 2, "{v}");
    assert_eq!(by["codex"]["rates"]["pass_rate"], 1.0, "{v}");
    assert_eq!(by["codex"]["rates"]["solve_rate"], 1.0, "{v}");
}
