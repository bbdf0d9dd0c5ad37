//! The `sandbox` runtime's limits as the kernel sees them, read from outside while the
//! confined process runs: every process of the tree (bubblewrap, the namespace's init and the
//! agent's own shell) sits in one cpu cgroup whose CFS quota is `cpus` x the period, and in
//! a pids cgroup whose `pids.max` is the process limit. Read, not timed: no assertion on how
//! fast anything ran.
//!
//! Needs a working sandbox (bubblewrap and writable cgroups); otherwise it prints that it
//! skipped.

use akbench_worker::process::{base_env, spawn, CancelToken, ProcessSpec};
use akbench_worker::runtime::cgroup::own_path;
use akbench_worker::runtime::{prepare, sandbox_available, Exposure, Limits, RuntimeKind};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

const ROOT: &str = "/sys/fs/cgroup";

/// The folder of `pid`'s group for v1 controller `controller`, or its v2 group
/// (`controller` = "").
fn group_of(pid: i32, controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = own_path(&text, controller)?;
    let base = if controller.is_empty() {
        PathBuf::from(ROOT)
    } else {
        Path::new(ROOT).join(controller)
    };
    Some(base.join(path.trim_start_matches('/')))
}

/// `pid` and every process descending from it.
fn tree(pid: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a mode.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// What the kernel says about the confined tree while it runs with `limits`: per process of
/// the tree, its cpu group's (quota, period) and its pids group's `pids.max`.
fn observe(limits: Limits) -> Vec<(i32, String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    // The agent says it runs (through `ready`), then waits for `go`: the test reads the
    // groups in between, when every process of the tree exists.
    mkfifo(&ws.join("ready"));
    mkfifo(&ws.join("go"));
    let spec = ProcessSpec {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "echo up > ready; read x < go".into(),
        ],
        cwd: ws.clone(),
        env: base_env(&home),
        stdout_path: dir.path().join("out"),
        stderr_path: dir.path().join("err"),
        output_cap: 4096,
        timeout: Duration::from_secs(60),
        grace: Duration::from_secs(1),
        tag: uuid::Uuid::now_v7().to_string(),
        hooks: Default::default(),
    };
    let exposure = Exposure {
        hosts: Vec::new(),
        budget: None,
        egress: None,
        writable: vec![ws.clone(), home.clone()],
        readable: Vec::new(),
        endpoints: Vec::new(),
        disk_roots: vec![ws.clone(), home.clone()],
        scratch: dir.path().join("rt"),
        container: None,
    };
    let p = prepare(RuntimeKind::Sandbox, spec, &exposure, limits).unwrap();
    let running = spawn(p.spec).unwrap();
    let mut up = String::new();
    std::fs::File::open(ws.join("ready"))
        .unwrap()
        .read_to_string(&mut up)
        .unwrap();
    assert_eq!(up, "up\n");
    let mut seen = Vec::new();
    for pid in tree(running.pid()) {
        let v1 = group_of(pid, "cpu").filter(|d| d.join("cpu.cfs_quota_us").exists());
        let cpu = match v1 {
            Some(d) => format!(
                "{} {}",
                std::fs::read_to_string(d.join("cpu.cfs_quota_us"))
                    .unwrap()
                    .trim(),
                std::fs::read_to_string(d.join("cpu.cfs_period_us"))
                    .unwrap()
                    .trim()
            ),
            None => group_of(pid, "")
                .and_then(|d| std::fs::read_to_string(d.join("cpu.max")).ok())
                .unwrap_or_default()
                .trim()
                .to_string(),
        };
        let pids = group_of(pid, "pids")
            .filter(|d| d.join("pids.max").exists())
            .or_else(|| group_of(pid, ""))
            .and_then(|d| std::fs::read_to_string(d.join("pids.max")).ok())
            .unwrap_or_default()
            .trim()
            .to_string();
        seen.push((pid, cpu, pids));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(ws.join("go"))
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let end = running.wait(&CancelToken::new());
    let fin = p.guard.finish();
    assert_eq!(end.exit_code, Some(0), "{end:?}");
    assert!(fin.limit_cause.is_none(), "{fin:?}");
    seen
}

#[test]
fn every_process_of_the_sandbox_runs_under_the_planned_cpu_quota_and_process_limit() {
    if let Err(e) = sandbox_available() {
        akbench_core::testkit::skip(
            "every_process_of_the_sandbox_runs_under_the_planned_cpu_quota_and_process_limit",
            &format!("the sandbox does not work here: {e}"),
        );
        return;
    }
    for (cpus, pids) in [(1u32, 64u32), (2, 100)] {
        let limits = Limits {
            cpus: Some(cpus),
            pids,
            ..Limits::default()
        };
        let seen = observe(limits);
        // bubblewrap, the pid namespace's init, the agent's shell (and its `read`).
        assert!(seen.len() >= 3, "cpus={cpus}: the tree was {seen:?}");
        let quota = u64::from(cpus) * 100_000;
        for (pid, cpu, max) in &seen {
            assert!(
                cpu == &format!("{quota} 100000") || cpu == &format!("{quota} 100000\n"),
                "cpus={cpus}: process {pid} has cpu quota/period `{cpu}`, expected `{quota} 100000` ({seen:?})"
            );
            assert_eq!(max, &pids.to_string(), "cpus={cpus}: process {pid}");
        }
    }
}

/// Runs `script` in the sandbox with `readable` exposed and returns how it ended and who the
/// runtime says ended it.
fn ended(
    script: &str,
    readable: Vec<PathBuf>,
    limits: Limits,
) -> (
    akbench_worker::process::ProcessEnd,
    akbench_worker::runtime::Finished,
) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let spec = ProcessSpec {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: ws.clone(),
        env: base_env(&home),
        stdout_path: dir.path().join("out"),
        stderr_path: dir.path().join("err"),
        output_cap: 4096,
        timeout: Duration::from_secs(60),
        grace: Duration::from_secs(1),
        tag: uuid::Uuid::now_v7().to_string(),
        hooks: Default::default(),
    };
    let exposure = Exposure {
        hosts: Vec::new(),
        budget: None,
        egress: None,
        writable: vec![ws.clone(), home.clone()],
        readable,
        endpoints: Vec::new(),
        disk_roots: vec![ws.clone(), home.clone()],
        scratch: dir.path().join("rt"),
        container: None,
    };
    let p = prepare(RuntimeKind::Sandbox, spec, &exposure, limits).unwrap();
    let end = spawn(p.spec).unwrap().wait(&CancelToken::new());
    (end, p.guard.finish())
}

/// The runtime records who ended the confined tree (core::grading::blame::EndedBy): a
/// launcher that failed before the program started (a path to expose that vanished) exits 1
/// like a program would, and is told apart; a program that exits 1, or kills itself, ended
/// itself; a tree over its memory limit was ended at the run's limit.
#[test]
fn the_runtime_tells_who_ended_the_tree() {
    use akbench_core::grading::blame::EndedBy;
    if let Err(e) = sandbox_available() {
        akbench_core::testkit::skip(
            "the_runtime_tells_who_ended_the_tree",
            &format!("the sandbox does not work here: {e}"),
        );
        return;
    }
    let gone = tempfile::tempdir().unwrap().path().join("vanished");
    let (end, fin) = ended("exit 0", vec![gone], Limits::default());
    assert_eq!(end.exit_code, Some(1), "bwrap's own failure: {end:?}");
    assert_eq!(fin.ended_by, Some(EndedBy::Launcher), "{fin:?}");

    let (end, fin) = ended("exit 1", Vec::new(), Limits::default());
    assert_eq!(end.exit_code, Some(1), "{end:?}");
    assert_eq!(fin.ended_by, None, "the program's own exit: {fin:?}");

    let (end, fin) = ended("kill -9 $$", Vec::new(), Limits::default());
    assert_eq!(end.exit_code, Some(137), "{end:?}");
    assert_eq!(fin.ended_by, None, "the program killed itself: {fin:?}");

    let limits = Limits {
        memory_mb: Some(64),
        ..Limits::default()
    };
    let (_, fin) = ended(
        "python3 -c 'x = bytearray(512 * 1024 * 1024); x[::4096] = b\"1\" * len(x[::4096])'",
        Vec::new(),
        limits,
    );
    assert_eq!(fin.ended_by, Some(EndedBy::Limit), "{fin:?}");
    assert!(
        fin.limit_cause
            .as_deref()
            .unwrap_or("")
            .contains("memory_mb = 64"),
        "{fin:?}"
    );
}
