//! Files to read and paths to write, through the real `akbench` (issue 49, items 1 and 2):
//! a FIFO or a device given as a token file, a CA, a run record, a trajectory, an agent log
//! or an observations file is refused by name without blocking (docs/limits.md, "Reads");
//! an output path holding a FIFO or a device is refused and the node is still there
//! afterwards ("Outputs"); a standard output that fails with "no space left on device" ends
//! with one line and exit 3, never a panic. (`akbench-coordinator` and `akbench-worker`
//! with a FIFO as `--token-file`: coordinator/tests/bad_files.rs, worker/tests/bad_files.rs.)

use super::{
    akbench, argv, assert_all_passed, char_device, fifo, fixture, misses, note, planned, run_key,
    snapshot, zero_device, PATIENCE,
};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// A character device with /dev/full's numbers (the tests run as root), else a symlink to
/// /dev/full (refused as a link instead; writing through it changes nothing).
fn full_device(p: &Path) {
    char_device(p, 7, "/dev/full");
}

/// `run single` of the oracle on the examples' `pyslug-001` into `out/`; the trial folder.
fn single(d: &Path) -> PathBuf {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let (tasks, agents) = (examples.join("tasks"), examples.join("agents"));
    let (code, text) = akbench(
        &argv(&[
            "run",
            "single",
            "pyslug-001",
            "--agent",
            "oracle",
            "--tasks-root",
            tasks.to_str().unwrap(),
            "--agents-root",
            agents.to_str().unwrap(),
            "--out",
            "out",
        ]),
        d,
    );
    assert_eq!(code, Some(0), "run single: {text}");
    trial_of(d).expect("run single wrote a record")
}

/// The folder under `out/` holding a `run_record.json`.
fn trial_of(d: &Path) -> Option<PathBuf> {
    let mut todo = vec![d.join("out")];
    while let Some(dir) = todo.pop() {
        if std::fs::symlink_metadata(dir.join("run_record.json")).is_ok() {
            return Some(dir);
        }
        for e in std::fs::read_dir(&dir).ok()?.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(e.path());
            }
        }
    }
    None
}

/// The agent's stored stdout and trajectory of the trial's last attempt.
fn attempt_files(trial: &Path) -> (PathBuf, PathBuf) {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(trial.join("run_record.json")).unwrap()).unwrap();
    let a = v["attempts"].as_array().unwrap().last().unwrap();
    let stdout = a["agent_process"]["stdout_path"].as_str().unwrap();
    let dir = a["artifacts_dir"].as_str().unwrap();
    (trial.join(stdout), trial.join(dir).join("trajectory.json"))
}

/// One bad file: how to make it, the command (`{run}`: the planned run's key, `{trial}`:
/// the trial folder of `run single`), the exit code, the words the message must hold, and
/// paths that must still be a FIFO or a character device afterwards.
struct IoCase {
    name: &'static str,
    make: fn(&Path),
    args: &'static [&'static str],
    code: i32,
    words: &'static [&'static str],
    special_after: &'static [&'static str],
}

fn io_cases() -> Vec<IoCase> {
    vec![
        IoCase {
            name: "--token-file is a FIFO",
            make: |d| fifo(&d.join("token")),
            args: &[
                "run",
                "status",
                "demo",
                "--coordinator",
                "http://127.0.0.1:9",
                "--token-file",
                "token",
            ],
            code: 2,
            words: &["token", "FIFO", "--token-file"],
            special_after: &["token"],
        },
        IoCase {
            name: "--token-file is /dev/zero",
            make: |d| zero_device(&d.join("token")),
            args: &[
                "run",
                "status",
                "demo",
                "--coordinator",
                "http://127.0.0.1:9",
                "--token-file",
                "token",
            ],
            code: 2,
            words: &["token"],
            special_after: &[],
        },
        IoCase {
            name: "--ca-file is a FIFO",
            make: |d| fifo(&d.join("ca.pem")),
            args: &[
                "run",
                "status",
                "demo",
                "--coordinator",
                "https://127.0.0.1:9",
                "--ca-file",
                "ca.pem",
            ],
            code: 2,
            words: &["ca.pem", "FIFO"],
            special_after: &["ca.pem"],
        },
        IoCase {
            name: "--ca-file is /dev/zero",
            make: |d| zero_device(&d.join("ca.pem")),
            args: &[
                "run",
                "status",
                "demo",
                "--coordinator",
                "https://127.0.0.1:9",
                "--ca-file",
                "ca.pem",
            ],
            code: 2,
            words: &["ca.pem"],
            special_after: &[],
        },
        IoCase {
            name: "trajectory: the run record is a FIFO",
            make: |d| {
                std::fs::create_dir_all(d.join("out/t1")).unwrap();
                fifo(&d.join("out/t1/run_record.json"));
            },
            args: &["run", "trajectory", "out/t1"],
            code: 2,
            words: &["run_record.json", "FIFO"],
            special_after: &["out/t1/run_record.json"],
        },
        IoCase {
            name: "trajectory: the run record is /dev/zero",
            make: |d| {
                std::fs::create_dir_all(d.join("out/t1")).unwrap();
                zero_device(&d.join("out/t1/run_record.json"));
            },
            args: &["run", "trajectory", "out/t1"],
            code: 2,
            words: &["run_record.json"],
            special_after: &[],
        },
        IoCase {
            name: "trajectory: the stored trajectory is a FIFO",
            make: |d| {
                let (_, trajectory) = attempt_files(&single(d));
                fifo(&trajectory);
            },
            args: &["run", "trajectory", "{trial}"],
            code: 2,
            words: &["trajectory.json", "FIFO"],
            special_after: &[],
        },
        IoCase {
            name: "trajectory: the stored trajectory is /dev/zero",
            make: |d| {
                let (_, trajectory) = attempt_files(&single(d));
                zero_device(&trajectory);
            },
            args: &["run", "trajectory", "{trial}"],
            code: 2,
            words: &["trajectory.json"],
            special_after: &[],
        },
        IoCase {
            name: "trajectory: the agent's stored stdout is a FIFO",
            make: |d| {
                let (stdout, trajectory) = attempt_files(&single(d));
                let _ = std::fs::remove_file(trajectory);
                fifo(&stdout);
            },
            args: &["run", "trajectory", "{trial}"],
            code: 2,
            words: &["FIFO"],
            special_after: &[],
        },
        IoCase {
            name: "import-harbor: --observations is a FIFO",
            make: |d| {
                planned(d);
                std::fs::create_dir_all(d.join("jobs")).unwrap();
                fifo(&d.join("obs.jsonl"));
            },
            args: &[
                "run",
                "import-harbor",
                "{run}",
                "jobs",
                "--observations",
                "obs.jsonl",
            ],
            code: 2,
            words: &["obs.jsonl", "FIFO", "not a regular file"],
            special_after: &["obs.jsonl"],
        },
        IoCase {
            name: "import-harbor: --observations is a device",
            make: |d| {
                planned(d);
                std::fs::create_dir_all(d.join("jobs")).unwrap();
                full_device(&d.join("obs.jsonl"));
            },
            args: &[
                "run",
                "import-harbor",
                "{run}",
                "jobs",
                "--observations",
                "obs.jsonl",
            ],
            code: 2,
            words: &["obs.jsonl", "refused to write"],
            special_after: &[],
        },
        IoCase {
            name: "report --html onto a FIFO",
            make: |d| {
                planned(d);
                fifo(&d.join("report.html"));
            },
            args: &["run", "report", "{run}", "--html", "report.html"],
            code: 2,
            words: &["report.html", "FIFO", "not a regular file"],
            special_after: &["report.html"],
        },
        IoCase {
            name: "report --html onto a character device",
            make: |d| {
                planned(d);
                full_device(&d.join("report.html"));
            },
            args: &["run", "report", "{run}", "--html", "report.html"],
            code: 2,
            words: &["report.html", "refused to write"],
            special_after: &["report.html"],
        },
        IoCase {
            name: "aggregate --markdown onto a FIFO",
            make: |d| {
                std::fs::create_dir_all(d.join("out")).unwrap();
                fifo(&d.join("summary.md"));
            },
            args: &["run", "aggregate", "out", "--markdown", "summary.md"],
            code: 2,
            words: &["summary.md", "FIFO"],
            special_after: &["summary.md"],
        },
    ]
}

/// Whether `p` is still a FIFO or a character device (or the symlink a fallback made).
fn still_special(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| {
        let t = m.file_type();
        t.is_fifo() || t.is_char_device() || t.is_symlink()
    })
}

#[test]
fn a_special_file_to_read_or_write_is_refused_by_name_and_left_as_it_is() {
    let mut failures = Vec::new();
    for c in io_cases() {
        let tmp = fixture();
        let d = tmp.path();
        (c.make)(d);
        let run = run_key(d);
        let trial = trial_of(d)
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        let args: Vec<String> = c
            .args
            .iter()
            .map(|a| a.replace("{run}", &run).replace("{trial}", &trial))
            .collect();
        let before = snapshot(d);
        let (code, text) = akbench(&args, d);
        let after = snapshot(d);
        let mut why = misses(code, &text, c.code, c.words);
        if text.contains("panicked") {
            why.push("a panic".into());
        }
        if before != after {
            why.push("the folder changed".to_string());
        }
        for p in c.special_after {
            if !still_special(&d.join(p)) {
                why.push(format!("{p} is no longer a FIFO or device"));
            }
        }
        note(&mut failures, c.name, &why, &text);
    }
    assert_all_passed(&failures);
}

/// Runs akbench in `cwd` with its standard output on `stdout`; (exit code, stderr), or
/// `None` for the code when it had to be killed.
fn akbench_to(args: &[&str], cwd: &Path, stdout: std::fs::File) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .current_dir(cwd)
        .env_remove("AKBENCH_STORE_ROOT")
        .env_remove("AKBENCH_COORDINATOR")
        .env("AKBENCH_CACHE", cwd.join("cache"))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start akbench");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read as _;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            return (None, String::new());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_full_standard_output_ends_with_one_line_and_exit_3_never_a_panic() {
    let tmp = fixture();
    let d = tmp.path();
    let run = planned(d);
    let key = run.file_name().unwrap().to_str().unwrap();
    full_device(&d.join("full"));
    let mut failures = Vec::new();
    for args in [
        &["run", "list"][..],
        &["run", "list", "--json"][..],
        &["run", "inspect", key][..],
    ] {
        let out = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join("full"))
            .unwrap();
        let (code, err) = akbench_to(args, d, out);
        let lines = err.lines().count();
        if code != Some(3)
            || lines != 1
            || err.contains("panicked")
            || !err.contains("No space left on device")
            || !err.contains("standard output")
        {
            failures.push(format!("{args:?}: exit {code:?}, stderr:\n{err}"));
        }
    }
    assert!(
        std::fs::symlink_metadata(d.join("full"))
            .is_ok_and(|m| m.file_type().is_char_device() || m.file_type().is_symlink()),
        "the device is still there"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
