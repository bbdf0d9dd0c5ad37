//! Bad inputs against the real `akbench` binary, one table: each case builds a folder,
//! runs one command, and asserts the exit code, that the message names the field or file,
//! that nothing was written, and that the command returned (a child still running after
//! [`PATIENCE`] is killed and fails its case: a FIFO or device must be refused, never read).

#[path = "bad_inputs/io.rs"]
mod io;

use akbench_core::testkit::{write_agent, write_task};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

#[path = "bad_inputs/net.rs"]
mod net;
#[path = "bad_inputs/ranges.rs"]
mod ranges;

/// How long a case may run before it counts as blocked (generous: never a timing claim).
const PATIENCE: Duration = Duration::from_secs(20);

const MANIFEST: &str = "\
experiment: demo
tasks:
  root: tasks
  ids: [wordcount-001]
agents:
  root: agents
  conditions:
    - descriptor: oracle
repetitions: 1
";

/// Runs akbench in `cwd`; (exit code, stdout + stderr); `None` when it had to be killed.
fn akbench(args: &[String], cwd: &Path) -> (Option<i32>, String) {
    guarded(
        Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(args)
            .current_dir(cwd)
            .env_remove("AKBENCH_STORE_ROOT")
            .env_remove("AKBENCH_TASKS_ROOT")
            .env_remove("AKBENCH_AGENTS_ROOT")
            .env_remove("AKBENCH_OUT")
            .env_remove("AKBENCH_COORDINATOR")
            .env("AKBENCH_PLAN_TIME", "2026-03-04T05:06:07Z")
            .env("AKBENCH_CACHE", cwd.join("cache")),
    )
}

/// Runs `cmd` with no input and its output piped: (exit code, stdout + stderr); `None` for
/// the code when it was still running after [`PATIENCE`] and had to be killed.
fn guarded(cmd: &mut Command) -> (Option<i32>, String) {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the binary");
    let pid = child.id() as libc::pid_t;
    let (done, wait) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if wait.recv_timeout(PATIENCE).is_err() {
            // SAFETY: signals our own child, which has not been reaped yet (the main thread
            // is still waiting on it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            true
        } else {
            false
        }
    });
    let out = child.wait_with_output().expect("wait for the binary");
    let _ = done.send(());
    let killed = watchdog.join().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (if killed { None } else { out.status.code() }, text)
}

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// A folder with one task, the oracle agent and `experiment.yaml`.
fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_task(&tmp.path().join("tasks"), "wordcount-001", "1.0");
    write_agent(&tmp.path().join("agents"), "oracle", "oracle");
    std::fs::write(tmp.path().join("experiment.yaml"), MANIFEST).unwrap();
    tmp
}

/// Every entry under `dir` with its kind, size and modification time (nothing is opened).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (String, u64, Option<SystemTime>)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                todo.push(e.path());
            }
            out.insert(
                e.path(),
                (format!("{:?}", m.file_type()), m.len(), m.modified().ok()),
            );
        }
    }
    out
}

fn mknod(p: &Path, mode: libc::mode_t, dev: libc::dev_t) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mknod(c.as_ptr(), mode, dev) },
        0,
        "mknod {p:?}"
    );
}

fn fifo(p: &Path) {
    let _ = std::fs::remove_file(p);
    mknod(p, libc::S_IFIFO | 0o600, 0);
}

/// A character device with /dev/zero's numbers (the tests run as root), else a symlink to
/// /dev/zero.
fn zero_device(p: &Path) {
    char_device(p, 5, "/dev/zero");
}

/// A character device with the numbers of memory device `minor` (1, `minor`: /dev/zero is
/// 5, /dev/full 7), else a symlink to `fallback`, that device's path.
fn char_device(p: &Path, minor: libc::c_uint, fallback: &str) {
    let _ = std::fs::remove_file(p);
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, minor)) } != 0 {
        std::os::unix::fs::symlink(fallback, p).unwrap();
    }
}

fn sparse(p: &Path, len: u64) {
    std::fs::File::create(p).unwrap().set_len(len).unwrap();
}

fn manifest_with(dir: &Path, extra: &str) {
    std::fs::write(
        dir.join("experiment.yaml"),
        MANIFEST.replace("repetitions: 1\n", &format!("repetitions: 1\n{extra}")),
    )
    .unwrap();
}

fn append(p: &Path, text: &str) {
    let old = std::fs::read_to_string(p).unwrap();
    std::fs::write(p, old + text).unwrap();
}

/// What an outcome misses against a case: the exit code it wanted and the words its
/// message must hold.
fn misses(code: Option<i32>, text: &str, want: i32, words: &[&str]) -> Vec<String> {
    let mut why = Vec::new();
    if code != Some(want) {
        why.push(format!(
            "exit {code:?} (None: blocked, killed), wanted {want}"
        ));
    }
    for w in words {
        if !text.contains(w) {
            why.push(format!("no `{w}` in the message"));
        }
    }
    why
}

/// Notes case `name` in `failures` when it missed (`why` not empty), with its message's start.
fn note(failures: &mut Vec<String>, name: &str, why: &[String], text: &str) {
    if !why.is_empty() {
        let shown: String = text.chars().take(600).collect();
        failures.push(format!("{name}: {}\n    {shown}", why.join("; ")));
    }
}

/// Fails naming every case that missed.
fn assert_all_passed(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The key of the run planned in `d` (what a case's `{run}` stands for); empty when none is.
fn run_key(d: &Path) -> String {
    std::fs::read_dir(d.join("runs"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .next()
                .unwrap_or_default()
        })
        .unwrap_or_default()
}

/// One bad input: how to make it, the command, the exit code and the words the message
/// must hold.
struct Case {
    name: &'static str,
    make: fn(&Path),
    args: &'static [&'static str],
    code: i32,
    words: &'static [&'static str],
}

const PLAN: &[&str] = &["run", "plan", "--config", "experiment.yaml"];

/// A case of `run plan` refused with exit 2 (a bad input): most of the tables.
fn plan(name: &'static str, make: fn(&Path), words: &'static [&'static str]) -> Case {
    Case {
        name,
        make,
        args: PLAN,
        code: 2,
        words,
    }
}

fn cases() -> Vec<Case> {
    vec![
        // --- manifest values: ranges with their unit ---
        plan(
            "memory 2^44 MiB wraps to 0 bytes",
            |d| manifest_with(d, "compute:\n  memory_mb: 17592186044416\n"),
            &["compute.memory_mb", "MiB", "experiment.yaml"],
        ),
        plan(
            "memory 1 MiB cannot start a process",
            |d| manifest_with(d, "compute:\n  memory_mb: 1\n"),
            &["compute.memory_mb", "MiB"],
        ),
        plan(
            "a billion cpus",
            |d| manifest_with(d, "compute:\n  cpus: 1000000000\n"),
            &["compute.cpus", "CPUs"],
        ),
        plan(
            "max_trials 0 would never start",
            |d| manifest_with(d, "execution:\n  concurrency:\n    max_trials: 0\n"),
            &["execution.concurrency.max_trials"],
        ),
        plan(
            "per-agent cap 0",
            |d| {
                manifest_with(
                    d,
                    "execution:\n  concurrency:\n    per_agent: {oracle: 0}\n",
                )
            },
            &["execution.concurrency.per_agent.oracle"],
        ),
        plan(
            "timeout 1e-300 named briefly",
            |d| manifest_with(d, "compute:\n  agent_timeout_sec: 1e-300\n"),
            &["compute.agent_timeout_sec", "1e-300 seconds"],
        ),
        plan(
            "a 1 MB experiment name is elided",
            |d| {
                let m = MANIFEST.replace(
                    "experiment: demo",
                    &format!("experiment: {}", "x/".repeat(300_000)),
                );
                std::fs::write(d.join("experiment.yaml"), m).unwrap();
            },
            &["experiment", "(600000 bytes)"],
        ),
        plan(
            "a 500 KB unknown visibility is elided",
            |d| manifest_with(d, &format!("visibility: {}\n", "y".repeat(500_000))),
            &["experiment.yaml", "unknown variant", "bytes)"],
        ),
        plan(
            "a task.toml with a 500 KB bad line is elided",
            |d| {
                append(
                    &d.join("tasks/wordcount-001/task.toml"),
                    &format!("bogus = \"{}\"\n", "z".repeat(500_000)),
                )
            },
            &["task.toml", "bogus", "bytes)"],
        ),
        // --- the manifest file ---
        Case {
            name: "manifest is /dev/zero",
            make: |_| {},
            args: &["run", "plan", "--config", "/dev/zero"],
            code: 2,
            words: &["/dev/zero", "character device"],
        },
        plan(
            "manifest is a FIFO",
            |d| fifo(&d.join("experiment.yaml")),
            &["experiment.yaml", "FIFO"],
        ),
        plan(
            "manifest over the cap",
            |d| sparse(&d.join("experiment.yaml"), 2 << 30),
            &["experiment.yaml", "more than the maximum"],
        ),
        // --- the task folder ---
        plan(
            "a FIFO in the task's tests",
            |d| fifo(&d.join("tasks/wordcount-001/tests/pipe")),
            &["pipe", "FIFO"],
        ),
        plan(
            "a device in the task",
            |d| zero_device(&d.join("tasks/wordcount-001/zero")),
            &["wordcount-001"],
        ),
        plan(
            "a 20 GB sparse file in the task",
            |d| sparse(&d.join("tasks/wordcount-001/tests/big.bin"), 20 << 30),
            &["big.bin", "more than the maximum"],
        ),
        plan(
            "instruction.md is a FIFO",
            |d| fifo(&d.join("tasks/wordcount-001/instruction.md")),
            &["instruction.md", "FIFO"],
        ),
        plan(
            "verifier.command with an unknown placeholder",
            |d| {
                append(
                    &d.join("tasks/wordcount-001/task.toml"),
                    "[verifier]\ncommand = [\"bash\", \"{test_dir}/test.sh\"]\n",
                )
            },
            &["verifier.command", "{test_dir}"],
        ),
        plan(
            "verifier.env key A=B",
            |d| {
                append(
                    &d.join("tasks/wordcount-001/task.toml"),
                    "[verifier]\nenv = { \"A=B\" = \"1\" }\n",
                )
            },
            &["verifier.env", "A=B"],
        ),
        plan(
            "a 64-hex commit in a sha1 repository",
            |d| {
                let toml = d.join("tasks/wordcount-001/task.toml");
                let t = std::fs::read_to_string(&toml).unwrap();
                let commit = t.split("commit = \"").nth(1).unwrap()[..40].to_string();
                std::fs::write(&toml, t.replace(&commit, &"ab".repeat(32))).unwrap();
                std::fs::create_dir_all(d.join("tasks/repos")).unwrap();
                std::fs::write(
                    d.join("tasks/repos/x.bundle"),
                    format!("# v2 git bundle\n{commit} HEAD\n\n"),
                )
                .unwrap();
            },
            &["source.commit", "sha1"],
        ),
        plan(
            "a task folder whose name is not UTF-8",
            |d| {
                use std::os::unix::ffi::OsStrExt;
                let name = std::ffi::OsStr::from_bytes(b"task-\xff");
                std::fs::create_dir_all(d.join("tasks").join(name)).unwrap();
                let m = MANIFEST.replace("ids: [wordcount-001]", "include: [\"*\"]");
                std::fs::write(d.join("experiment.yaml"), m).unwrap();
            },
            &["task-", "not UTF-8"],
        ),
        // --- agent descriptors ---
        plan(
            "descriptor is a link to /etc/passwd",
            |d| {
                let p = d.join("agents/oracle.toml");
                std::fs::remove_file(&p).unwrap();
                std::os::unix::fs::symlink("/etc/passwd", p).unwrap();
            },
            &["oracle.toml", "symbolic link"],
        ),
        plan(
            "descriptor is a FIFO",
            |d| fifo(&d.join("agents/oracle.toml")),
            &["oracle.toml", "FIFO"],
        ),
        plan(
            "descriptor over the cap",
            |d| sparse(&d.join("agents/oracle.toml"), 2 << 20),
            &["oracle.toml", "more than the maximum"],
        ),
        plan(
            "network wildcard [::]:1",
            |d| append(&d.join("agents/oracle.toml"), "network = [\"[::]:1\"]\n"),
            &["oracle.toml", "network", "unspecified"],
        ),
        plan(
            "network to the host's PostgreSQL",
            |d| {
                append(
                    &d.join("agents/oracle.toml"),
                    "network = [\"127.0.0.1:5432\"]\n",
                )
            },
            &["network", "PostgreSQL", "allow_local_ports"],
        ),
        plan(
            "10,000 endpoints",
            |d| {
                let list: Vec<String> = (0..10_000)
                    .map(|i| format!("\"h{i}.example:443\""))
                    .collect();
                append(
                    &d.join("agents/oracle.toml"),
                    &format!("network = [{}]\n", list.join(",")),
                );
            },
            &["network", "maximum 250"],
        ),
        // --- flags, bounded the same as the manifest ---
        Case {
            name: "run single --infrastructure-retries 1e9",
            make: |_| {},
            args: &[
                "run",
                "single",
                "wordcount-001",
                "--agent",
                "oracle",
                "--tasks-root",
                "tasks",
                "--agents-root",
                "agents",
                "--infrastructure-retries",
                "1000000000",
            ],
            code: 2,
            words: &["--infrastructure-retries", "0 to 10"],
        },
        Case {
            name: "run single --agent-timeout 1e-300",
            make: |_| {},
            args: &[
                "run",
                "single",
                "wordcount-001",
                "--agent",
                "oracle",
                "--tasks-root",
                "tasks",
                "--agents-root",
                "agents",
                "--agent-timeout",
                "1e-300",
            ],
            code: 2,
            words: &["--agent-timeout", "1e-300 seconds"],
        },
        Case {
            name: "sweep --workers 0",
            make: |_| {},
            args: &["sweep", "experiment.yaml", "--workers", "0"],
            code: 2,
            words: &["--workers", "1 to 256"],
        },
        Case {
            name: "sweep --workers 1e9",
            make: |_| {},
            args: &["sweep", "experiment.yaml", "--workers", "1000000000"],
            code: 2,
            words: &["--workers", "1 to 256"],
        },
        Case {
            name: "sweep --local --jobs 0",
            make: |_| {},
            args: &["sweep", "experiment.yaml", "--local", "--jobs", "0"],
            code: 2,
            words: &["--jobs"],
        },
        Case {
            name: "run list --state exploded",
            make: |_| {},
            args: &["run", "list", "--state", "exploded"],
            code: 2,
            words: &["exploded", "resolved", "cancelled"],
        },
        Case {
            name: "up with a missing --tasks-root",
            make: |_| {},
            args: &["up", "--tasks-root", "no-such-folder", "--data-dir", "pg"],
            code: 2,
            words: &["--tasks-root", "no-such-folder"],
        },
    ]
}

#[test]
fn every_bad_input_is_refused_at_load_naming_it_and_writing_nothing() {
    let mut failures = Vec::new();
    for c in cases() {
        let tmp = fixture();
        (c.make)(tmp.path());
        let before = snapshot(tmp.path());
        let (code, text) = akbench(&argv(c.args), tmp.path());
        let after = snapshot(tmp.path());
        let mut why = misses(code, &text, c.code, c.words);
        if text.len() > 4000 {
            why.push(format!("a {}-byte message", text.len()));
        }
        if before != after {
            let added: Vec<_> = after
                .keys()
                .filter(|k| !before.contains_key(*k))
                .take(3)
                .collect();
            why.push(format!("the folder changed (new: {added:?})"));
        }
        note(&mut failures, c.name, &why, &text);
    }
    assert_all_passed(&failures);
}

/// Plans the fixture's run; its folder in the store.
fn planned(d: &Path) -> PathBuf {
    let (code, text) = akbench(&argv(PLAN), d);
    assert_eq!(code, Some(0), "{text}");
    let runs: Vec<PathBuf> = std::fs::read_dir(d.join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(runs.len(), 1);
    runs[0].clone()
}

/// Rewrites the stored ready plan with `edit` applied to its trials, its summary and
/// self-digest recomputed (what a careful tamperer does).
fn tamper(run: &Path, edit: fn(&mut Vec<akbench_core::plan::PlannedTrial>)) {
    use akbench_core::plan::{sealed_plan_digest, PlanSummary, RunPlan};
    let p = run.join("plan.ready.json");
    let mut plan: RunPlan = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    edit(&mut plan.trials);
    plan.summary = PlanSummary::of(&plan.trials);
    plan.digest = sealed_plan_digest(&plan, plan.stage);
    assert!(plan.verify());
    std::fs::write(&p, serde_json::to_vec(&plan).unwrap()).unwrap();
}

/// A run folder or the run store holding a FIFO, a device, an over-size file or a plan
/// whose trials are not its spec's: refused, never waited on.
fn store_cases() -> Vec<Case> {
    vec![
        Case {
            name: "inspect: the ready plan is a FIFO",
            make: |d| fifo(&planned(d).join("plan.ready.json")),
            args: &["run", "inspect", "{run}"],
            code: 3,
            words: &["plan.ready.json", "FIFO"],
        },
        Case {
            name: "inspect: the spec is a device",
            make: |d| zero_device(&planned(d).join("spec.json")),
            args: &["run", "inspect", "{run}"],
            code: 3,
            words: &["spec.json"],
        },
        Case {
            name: "inspect: a trial removed, digest recomputed",
            make: |d| {
                let run = planned(d);
                // Two trials so one can go: a second repetition.
                tamper(&run, |t| {
                    t.clear();
                })
            },
            args: &["run", "inspect", "{run}"],
            code: 3,
            words: &["plan.ready.json", "missing"],
        },
        Case {
            name: "reconcile: a trial altered, digest recomputed",
            make: |d| tamper(&planned(d), |t| t[0].compute.memory_mb = 1),
            args: &["run", "reconcile", "{run}", "--observations", "obs.jsonl"],
            code: 3,
            words: &["plan.ready.json", "compute"],
        },
        Case {
            name: "reconcile: the observations file is a FIFO",
            make: |d| {
                planned(d);
                fifo(&d.join("obs.jsonl"));
            },
            args: &["run", "reconcile", "{run}", "--observations", "obs.jsonl"],
            code: 2,
            words: &["obs.jsonl", "FIFO"],
        },
        Case {
            name: "reconcile: the observations file is a device",
            make: |d| {
                planned(d);
                zero_device(&d.join("obs.jsonl"));
            },
            args: &["run", "reconcile", "{run}", "--observations", "obs.jsonl"],
            code: 2,
            words: &["obs.jsonl"],
        },
        Case {
            name: "reconcile: the observations file is over the cap",
            make: |d| {
                planned(d);
                sparse(&d.join("obs.jsonl"), 2 << 30);
            },
            args: &["run", "reconcile", "{run}", "--observations", "obs.jsonl"],
            code: 2,
            words: &["obs.jsonl", "more than the maximum"],
        },
        Case {
            name: "evaluate: the run record is a FIFO",
            make: |d| {
                std::fs::create_dir_all(d.join("out/t1")).unwrap();
                fifo(&d.join("out/t1/run_record.json"));
            },
            args: &["run", "evaluate", "out/t1", "--tasks-root", "tasks"],
            code: 2,
            words: &["run_record.json", "FIFO"],
        },
        Case {
            name: "evaluate --all: the run record is a FIFO",
            make: |d| {
                std::fs::create_dir_all(d.join("out/t1")).unwrap();
                fifo(&d.join("out/t1/run_record.json"));
            },
            args: &["run", "evaluate", "--all", "out", "--tasks-root", "tasks"],
            code: 1,
            words: &["run_record.json", "FIFO"],
        },
        Case {
            name: "aggregate: a record over the cap",
            make: |d| {
                std::fs::create_dir_all(d.join("out/t1")).unwrap();
                sparse(&d.join("out/t1/run_record.json"), 1 << 30);
            },
            args: &["run", "aggregate", "out"],
            code: 1,
            words: &["run_record.json", "more than the maximum"],
        },
        Case {
            name: "evaluate: a FIFO in an attempt folder",
            make: |d| {
                std::fs::create_dir_all(d.join("out/t1/a1")).unwrap();
                std::fs::write(d.join("out/t1/run_record.json"), "{}").unwrap();
                fifo(&d.join("out/t1/a1/agent.diff"));
            },
            args: &["run", "evaluate", "out/t1", "--tasks-root", "tasks"],
            code: 2,
            words: &["agent.diff", "FIFO"],
        },
    ]
}

#[test]
fn a_run_folder_with_a_special_file_or_a_tampered_plan_is_refused_not_waited_on() {
    let mut failures = Vec::new();
    for c in store_cases() {
        let tmp = fixture();
        std::fs::write(tmp.path().join("obs.jsonl"), "").ok();
        (c.make)(tmp.path());
        let run = run_key(tmp.path());
        let args: Vec<String> = c.args.iter().map(|a| a.replace("{run}", &run)).collect();
        let before = snapshot(tmp.path());
        let (code, text) = akbench(&args, tmp.path());
        let after = snapshot(tmp.path());
        let mut why = misses(code, &text, c.code, c.words);
        if before != after {
            why.push("the folder changed".to_string());
        }
        note(&mut failures, c.name, &why, &text);
    }
    assert_all_passed(&failures);
}
