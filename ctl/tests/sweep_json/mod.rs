//! `akbench sweep --json` in a folder of its own, `--local` or on the embedded default (a
//! private PostgreSQL under `<dir>/data`, a coordinator and local workers): the one way the
//! local-against-coordinator tests run a sweep (`mod sweep_json;`). Permissions the agents
//! or the PostgreSQL account need are the caller's to set before the call.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The example corpus (tasks and agents).
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// What a sweep ended with: its exit code, its JSON and its stderr.
pub struct Swept {
    pub code: i32,
    pub json: Value,
    #[allow(dead_code)] // read by some of the tests that share this module
    pub stderr: String,
}

/// Runs `manifest` with the example tasks and the agents of `agents`, writing runs, out and
/// cache under `dir`; `plan_time` fixes the planning instant (`AKBENCH_PLAN_TIME`).
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn sweep(
    dir: &Path,
    manifest: &Path,
    agents: &Path,
    local: bool,
    plan_time: Option<&str>,
) -> Swept {
    sweep_with(dir, manifest, agents, local, plan_time, &[])
}

/// [`sweep`] with `extra` arguments after the manifest (e.g. `--workers 1`).
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn sweep_with(
    dir: &Path,
    manifest: &Path,
    agents: &Path,
    local: bool,
    plan_time: Option<&str>,
    extra: &[&str],
) -> Swept {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_akbench"));
    cmd.arg("sweep").arg(manifest).args(extra);
    if let Some(t) = plan_time {
        cmd.env("AKBENCH_PLAN_TIME", t);
    }
    if local {
        cmd.arg("--local");
    } else {
        cmd.env("AKBENCH_DATA", dir.join("data"));
    }
    let out = cmd
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(agents)
        .arg("--store-root")
        .arg(dir.join("runs"))
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--cache")
        .arg(dir.join("cache"))
        .arg("--json")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "akbench sweep ended {:?} with stdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        )
    });
    Swept {
        code: out.status.code().unwrap(),
        json,
        stderr,
    }
}
