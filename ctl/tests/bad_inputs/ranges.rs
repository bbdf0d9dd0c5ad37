//! Values outside their range (docs/limits.md, "Value ranges"), task fields the docs say are
//! refused at load, and exit codes the README documents, through the real binaries:
//! `akbench`, `akbench-worker` and `akbench-coordinator` each refuse the value with the
//! documented exit code, naming the flag or field, its range and the fix, never panicking
//! and never blocked (each run has the parent's [`super::PATIENCE`]).

use super::{
    akbench, argv, assert_all_passed, fifo, fixture, guarded, misses, note, plan, planned,
    snapshot, Case, PLAN,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

// A workspace binary built from the current tree, this crate's tests having only
// `akbench`'s path from cargo (the build is a no-op after the workspace's test build).
#[path = "../../../worker/tests/common/workspace_bin.rs"]
mod workspace_bin;
use workspace_bin::workspace_bin;

/// Runs `bin` with `env` in `cwd`: (exit code, stdout + stderr, how long it took); `None`
/// when it was still running after [`super::PATIENCE`] and had to be killed.
fn run(
    bin: &Path,
    args: &[String],
    cwd: &Path,
    env: &[(&str, String)],
) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .current_dir(cwd)
        .env("AKBENCH_CACHE", cwd.join("cache"))
        .env_remove("AKBENCH_COORDINATOR")
        .env_remove("AKBENCH_LEASE_TTL_MS")
        .env_remove("AKBENCH_WORKER_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (code, text) = guarded(&mut cmd);
    (code, text, started.elapsed())
}

fn toml_of(d: &Path) -> PathBuf {
    d.join("tasks/wordcount-001/task.toml")
}

fn edit_toml(d: &Path, edit: impl Fn(String) -> String) {
    let p = toml_of(d);
    let t = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, edit(t)).unwrap();
}

fn add_to_toml(d: &Path, text: &str) {
    edit_toml(d, |t| format!("{t}{text}"));
}

fn solution(d: &Path) {
    let s = d.join("tasks/wordcount-001/solution");
    std::fs::create_dir_all(&s).unwrap();
    std::fs::write(s.join("solve.sh"), "true\n").unwrap();
}

const TASK_CHECK: &[&str] = &["task", "check", "tasks/wordcount-001"];

/// Bad inputs `akbench` refuses with exit 2, naming them, writing nothing.
fn cases() -> Vec<Case> {
    vec![
        // --- flags: the ranges table ---
        Case {
            name: "certs --days 100000000 (was a date overflow panic)",
            make: |_| {},
            args: &["certs", "--days", "100000000", "--server-name", "c1"],
            code: 2,
            words: &["--days", "1 to 3650 days", "fix:"],
        },
        Case {
            name: "certs --server-name empty",
            make: |_| {},
            args: &["certs", "--server-name", ""],
            code: 2,
            words: &["--server-name", "0 bytes", "1 to 253 bytes", "fix:"],
        },
        Case {
            name: "certs --server-name with a space",
            make: |_| {},
            args: &["certs", "--server-name", "a b"],
            code: 2,
            words: &["--server-name", "DNS name", "fix:"],
        },
        Case {
            name: "sweep --lease-ttl-ms 0",
            make: |_| {},
            args: &["sweep", "experiment.yaml", "--lease-ttl-ms", "0"],
            code: 2,
            words: &["--lease-ttl-ms", "1000 to 86400000 ms", "fix:"],
        },
        Case {
            name: "up --lease-ttl-ms u64::MAX",
            make: |_| {},
            args: &["up", "--lease-ttl-ms", "18446744073709551615"],
            code: 2,
            words: &["--lease-ttl-ms", "1000 to 86400000 ms"],
        },
        // --- task fields refused at load ---
        plan(
            "tripwire file outside tests/",
            |d| add_to_toml(d, "[verifier.tripwire]\nfile = \"../task.toml\"\n"),
            &["task.toml", "verifier.tripwire.file", "tests/", "fix:"],
        ),
        plan(
            "workdir with a NUL",
            |d| {
                add_to_toml(
                    d,
                    "[environment]\nimage = \"img:1\"\nworkdir = \"/a\\u0000b\"\n",
                )
            },
            &["task.toml", "environment.workdir", "0x00"],
        ),
        plan(
            "workdir with a 300-byte folder name",
            |d| {
                add_to_toml(
                    d,
                    &format!(
                        "[environment]\nimage = \"img:1\"\nworkdir = \"/{}\"\n",
                        "w".repeat(300)
                    ),
                )
            },
            &["environment.workdir", "1 to 255 bytes"],
        ),
        plan(
            "source.repo that does not exist",
            |d| edit_toml(d, |t| t.replace("repos/x.bundle", "repos/none.git")),
            &["task.toml", "source.repo", "none.git", "fix:"],
        ),
        plan(
            "source.repo /etc",
            |d| edit_toml(d, |t| t.replace("repos/x.bundle", "/etc")),
            &["source.repo", "not a git repository", "fix:"],
        ),
        plan(
            "protected path ../x",
            |d| add_to_toml(d, "[verifier]\nprotected_paths = [\"../x\"]\n"),
            &["verifier.protected_paths", "../x", "fix:"],
        ),
        plan(
            "protected path /etc/passwd",
            |d| add_to_toml(d, "[verifier]\nprotected_paths = [\"/etc/passwd\"]\n"),
            &["verifier.protected_paths", "absolute"],
        ),
        plan(
            "version with a newline",
            |d| edit_toml(d, |t| t.replace("version = \"1.0\"", "version = \"1\\n2\"")),
            &["task.toml", "version", "control character"],
        ),
        plan(
            "build_timeout_sec 0.001",
            |d| add_to_toml(d, "[environment]\nbuild_timeout_sec = 0.001\n"),
            &["environment.build_timeout_sec", "1 to 604800 seconds"],
        ),
        // --- exit codes the README documents ---
        Case {
            name: "task check without solution/solve.sh: bad input, nothing cached",
            make: |d| {
                let s = d.join("tasks/wordcount-001/solution");
                std::fs::create_dir_all(&s).unwrap();
                std::fs::write(s.join("notes.txt"), "no script\n").unwrap();
            },
            args: TASK_CHECK,
            code: 2,
            words: &["solution/solve.sh", "fix:"],
        },
        Case {
            name: "task check --cache that is a file",
            make: |d| {
                solution(d);
                std::fs::write(d.join("cache-file"), "").unwrap();
            },
            args: &[
                "task",
                "check",
                "tasks/wordcount-001",
                "--cache",
                "cache-file",
            ],
            code: 2,
            words: &["--cache", "cache-file", "not a folder", "fix:"],
        },
    ]
}

#[test]
fn values_out_of_range_and_fields_refused_at_load_exit_2_naming_them() {
    let mut failures = Vec::new();
    for c in cases() {
        let tmp = fixture();
        (c.make)(tmp.path());
        let before = snapshot(tmp.path());
        let (code, text) = akbench(&argv(c.args), tmp.path());
        let after = snapshot(tmp.path());
        let mut why = misses(code, &text, c.code, c.words);
        if text.contains("panicked") || text.len() > 4000 {
            why.push(format!("a panic or a {}-byte message", text.len()));
        }
        if before != after {
            why.push("the folder changed".into());
        }
        note(&mut failures, c.name, &why, &text);
    }
    assert_all_passed(&failures);
}

#[test]
fn a_10kb_server_name_is_refused_cut_short() {
    let tmp = fixture();
    let long = "s".repeat(10_000);
    let (code, text) = akbench(&argv(&["certs", "--server-name", &long]), tmp.path());
    assert_eq!(code, Some(2), "{text:.600}");
    assert!(
        text.contains("--server-name") && text.contains("1 to 253 bytes") && text.len() < 2000,
        "{text:.600}"
    );
    assert!(!tmp.path().join("certs").exists());
}

/// One case of a binary other than `akbench`: name, binary, argv, environment, words.
type BinCase<'a> = (
    &'a str,
    &'a Path,
    Vec<String>,
    Vec<(&'a str, String)>,
    &'a [&'a str],
);

/// `akbench-worker` and `akbench-coordinator` refuse the same values from the same table:
/// exit 2 (a bad command line), the flag and the range named, no panic, at once.
#[test]
fn the_worker_and_the_coordinator_refuse_out_of_range_flags_at_once() {
    let worker = workspace_bin("akbench-worker");
    let coordinator = workspace_bin("akbench-coordinator");
    let tmp = tempfile::tempdir().unwrap();
    let base = |extra: &[&str]| {
        let mut a = argv(&[
            "--coordinator",
            "http://127.0.0.1:9",
            "--tasks-root",
            "t",
            "--agents-root",
            "a",
        ]);
        a.extend(argv(extra));
        a
    };
    let long_id = "w".repeat(10_000);
    let cases: Vec<BinCase> = vec![
        (
            "worker --grace 1e20 (was a Duration panic)",
            &worker,
            base(&["--grace", "1e20"]),
            vec![],
            &["--grace", "0 to 604800 seconds", "fix:"],
        ),
        (
            "worker --grace -1",
            &worker,
            base(&["--grace=-1"]),
            vec![],
            &["--grace", "0 to 604800 seconds"],
        ),
        (
            "worker --worker-id of 10 KB (was retried forever)",
            &worker,
            base(&["--worker-id", &long_id]),
            vec![],
            &["--worker-id", "1 to 200 bytes", "fix:"],
        ),
        (
            "coordinator --lease-ttl-ms u64::MAX (every session refused)",
            &coordinator,
            argv(&[
                "--database-url",
                "postgres://nobody@127.0.0.1:9/none",
                "--lease-ttl-ms",
                "18446744073709551615",
            ]),
            vec![],
            &["--lease-ttl-ms", "1000 to 86400000 ms", "fix:"],
        ),
        (
            "coordinator AKBENCH_LEASE_TTL_MS=0",
            &coordinator,
            argv(&["--database-url", "postgres://nobody@127.0.0.1:9/none"]),
            vec![("AKBENCH_LEASE_TTL_MS", "0".to_string())],
            &["--lease-ttl-ms", "1000 to 86400000 ms"],
        ),
    ];
    let mut failures = Vec::new();
    for (name, bin, args, env, words) in cases {
        let (code, text, took) = run(bin, &args, tmp.path(), &env);
        let mut why = misses(code, &text, 2, words);
        if text.contains("panicked") || text.len() > 4000 {
            why.push(format!("a panic or a {}-byte message", text.len()));
        }
        if took > Duration::from_secs(10) {
            why.push(format!("took {took:?}"));
        }
        note(&mut failures, name, &why, &text);
    }
    assert_all_passed(&failures);
}

/// A registry answering 500 is the registry's trouble, not the task's: `task check` and
/// `run plan` exit 3 (README, "Exit codes"), not 2.
#[test]
fn task_check_and_plan_with_a_registry_answering_500_exit_3() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut s in listener.incoming().flatten() {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    let tmp = fixture();
    solution(tmp.path());
    add_to_toml(
        tmp.path(),
        &format!("[environment]\nimage = \"127.0.0.1:{port}/team/img:1\"\n"),
    );
    let (code, text, _) = run(
        Path::new(env!("CARGO_BIN_EXE_akbench")),
        &argv(&[TASK_CHECK, &["--runtime", "container"]].concat()),
        tmp.path(),
        &[("AKBENCH_INSECURE_REGISTRIES", format!("127.0.0.1:{port}"))],
    );
    assert_eq!(code, Some(3), "{text:.800}");
    assert!(
        text.contains("500") && !text.contains("panicked"),
        "{text:.800}"
    );
    // Planning a container run pins the tag at the same registry: the same exit 3, and no
    // plan is written.
    let manifest = std::fs::read_to_string(tmp.path().join("experiment.yaml")).unwrap();
    std::fs::write(
        tmp.path().join("experiment.yaml"),
        format!("{manifest}execution:\n  runtime: container\n"),
    )
    .unwrap();
    let (code, text, _) = run(
        Path::new(env!("CARGO_BIN_EXE_akbench")),
        &argv(PLAN),
        tmp.path(),
        &[("AKBENCH_INSECURE_REGISTRIES", format!("127.0.0.1:{port}"))],
    );
    assert_eq!(code, Some(3), "run plan: {text:.800}");
    assert!(
        text.contains("500") && text.contains("failed to pin the image of task"),
        "run plan: {text:.800}"
    );
    assert!(
        !tmp.path().join("cache/task-checks").exists()
            || std::fs::read_dir(tmp.path().join("cache/task-checks"))
                .unwrap()
                .next()
                .is_none(),
        "no verdict cached"
    );
}

/// `image build` of the fixture's task pushed to 127.0.0.1:9 with the `docker` builder
/// first on `PATH` (`env` holds it), as [`run`] answers.
fn image_build(d: &Path, env: &[(&str, String)]) -> (Option<i32>, String, Duration) {
    run(
        Path::new(env!("CARGO_BIN_EXE_akbench")),
        &argv(&[
            "image",
            "build",
            "tasks/wordcount-001",
            "--push",
            "127.0.0.1:9",
            "--builder",
            "docker",
        ]),
        d,
        env,
    )
}

/// Past `environment.build_timeout_sec`, `image build` stops the builder's whole process
/// group: a builder whose child sleeps 40 s holding the output open ends within seconds; a
/// push is stopped the same way at the registry's deadline.
#[test]
fn a_build_past_its_time_limit_is_stopped_with_its_children() {
    let tmp = fixture();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let docker = bin.join("docker");
    std::fs::write(&docker, "#!/bin/sh\nsleep 40 &\nsleep 40\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let task = tmp.path().join("tasks/wordcount-001");
    std::fs::create_dir_all(task.join("environment")).unwrap();
    std::fs::write(task.join("environment/Dockerfile"), "FROM scratch\n").unwrap();
    add_to_toml(tmp.path(), "[environment]\nbuild_timeout_sec = 1\n");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (code, text, took) = image_build(tmp.path(), &[("PATH", path.clone())]);
    assert_eq!(code, Some(3), "{text:.800}");
    assert!(
        text.contains("build time limit") && text.contains("environment.build_timeout_sec"),
        "{text:.800}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}: {text:.400}");

    // A bad registry deadline is refused before anything is built (the builder leaves a
    // mark when it runs).
    let mark = tmp.path().join("builder-ran");
    std::fs::write(
        &docker,
        format!("#!/bin/sh\ntouch {}\nexit 0\n", mark.display()),
    )
    .unwrap();
    let (code, text, _) = image_build(
        tmp.path(),
        &[
            ("PATH", path.clone()),
            ("AKBENCH_PULL_TIMEOUT_SEC", "abc".to_string()),
        ],
    );
    assert_eq!(code, Some(2), "{text:.800}");
    assert!(text.contains("AKBENCH_PULL_TIMEOUT_SEC"), "{text:.800}");
    assert!(!mark.exists(), "the builder ran: {text:.800}");

    // The push is bounded by the registry's deadline: a builder whose push hangs is
    // stopped at AKBENCH_PULL_TIMEOUT_SEC, with its children.
    std::fs::write(
        &docker,
        "#!/bin/sh\ncase \"$1\" in push) sleep 40 & sleep 40;; esac\nexit 0\n",
    )
    .unwrap();
    let (code, text, took) = image_build(
        tmp.path(),
        &[
            ("PATH", path),
            ("AKBENCH_PULL_TIMEOUT_SEC", "1".to_string()),
        ],
    );
    assert_eq!(code, Some(3), "{text:.800}");
    assert!(
        text.contains("docker push") && text.contains("AKBENCH_PULL_TIMEOUT_SEC"),
        "{text:.800}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}: {text:.400}");
}

/// `run import-harbor` names each result.json it skips and why (a FIFO is never opened, an
/// array is no result); `run reconcile` refuses a negative cost naming the file and field.
#[test]
fn skipped_harbor_results_are_named_and_a_negative_cost_is_refused() {
    let tmp = fixture();
    let d = tmp.path();
    let run_dir = planned(d);
    let run = run_dir.file_name().unwrap().to_string_lossy().into_owned();
    let jobs = d.join("jobs");
    std::fs::create_dir_all(jobs.join("a")).unwrap();
    std::fs::create_dir_all(jobs.join("b")).unwrap();
    fifo(&jobs.join("a/result.json"));
    std::fs::write(jobs.join("b/result.json"), "[1, 2]").unwrap();
    let (code, text) = akbench(&argv(&["run", "import-harbor", &run, "jobs"]), d);
    assert_eq!(code, Some(1), "{text:.800}");
    for w in ["a/result.json", "FIFO", "b/result.json", "JSON array"] {
        assert!(text.contains(w), "no `{w}`: {text:.800}");
    }

    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("plan.ready.json")).unwrap()).unwrap();
    let trial = plan["trials"][0]["trial_id"].as_str().unwrap().to_string();
    std::fs::write(
        d.join("neg.jsonl"),
        format!(
            "{{\"trial_id\":\"{trial}\",\"state\":\"failed\",\"ok\":false,\"score\":null,\"attempt_id\":null,\"source\":null,\"spend\":{{\"cost_usd\":-5}}}}\n"
        ),
    )
    .unwrap();
    let (code, text) = akbench(
        &argv(&["run", "reconcile", &run, "--observations", "neg.jsonl"]),
        d,
    );
    assert_eq!(code, Some(2), "{text:.800}");
    assert!(
        text.contains("neg.jsonl") && text.contains("spend.cost_usd"),
        "{text:.800}"
    );
}
