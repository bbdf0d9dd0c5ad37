//! The Terminal-Bench 2.1-shaped corpus (`examples/tasks/tb21-*`) run unchanged under the
//! `container` runtime through the real `akbench` binary: every task's image is built from
//! its environment/Dockerfile over the Debian test image (scripts/build-test-image) and
//! pushed to a loopback registry; one `sweep --local` runs each task with the oracle and a
//! no-op agent on parallel slots, and `akbench task check` says each is valid. Among the
//! tasks: services the agent starts and leaves running (HTTP, TCP, git daemon), files
//! graded outside /app (/usr/local/bin, /etc), a server the image's ENTRYPOINT starts, and
//! a `no-network` task; none sets `environment_mode`, so they grade in the agent's
//! environment as Harbor does (core::grading_env::unset_default).
//!
//! Every task but the `no-network` one grades online, as Terminal-Bench 2.1's test.sh does:
//! `apt-get install curl` from Debian's real mirror, uv's installer from "astral.sh" and its
//! release from "github.com" (a test host in a network namespace this test makes, with its
//! own CA: worker/tests/common/upstream.rs), pytest from the real PyPI. The worker learns
//! the test host as an operator would tell it of an internal mirror
//! (`AKBENCH_EGRESS_HOSTS`, `AKBENCH_EGRESS_OPEN_RANGES`, `AKBENCH_EGRESS_UPSTREAM_CA`) and
//! shares one egress cache (`AKBENCH_EGRESS_CACHE_DIR`) between the sweep and the checks.

#[path = "../../worker/tests/common/registry.rs"]
#[allow(dead_code)]
mod registry;

#[path = "../../worker/tests/common/upstream.rs"]
#[allow(dead_code)]
mod upstream;

#[path = "../../worker/tests/common/installers.rs"]
#[allow(dead_code)]
mod installers;

#[path = "../../worker/tests/common/unprivileged.rs"]
#[allow(dead_code)]
mod unprivileged;

#[path = "../../worker/tests/common/rerun.rs"]
#[allow(dead_code)]
mod rerun;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every task of the corpus.
const CORPUS: [&str; 12] = [
    "tb21-access-log-summary",
    "tb21-median-fix",
    "tb21-ini-to-json",
    "tb21-inventory-http",
    "tb21-kv-tcp-service",
    "tb21-git-daemon-publish",
    "tb21-minisrv-config",
    "tb21-csvcol-command",
    "tb21-system-gitconfig",
    "tb21-contacts-dedupe",
    "tb21-backup-script-fix",
    "tb21-sqlite-top-customers",
];

/// The base every Dockerfile of the corpus starts from.
const BASE: &str = "127.0.0.1:5000/akbench/base:bookworm";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn runs_here(test: &str) -> bool {
    match registry::missing() {
        None => true,
        Some(why) => {
            akbench_core::testkit::skip(test, &why);
            false
        }
    }
}

/// The test upstream host ("astral.sh", "github.com") serving uv's installer and release,
/// linked to this machine's namespace (where the worker keeps the real network for Debian
/// and PyPI).
fn upstream() -> upstream::Upstream {
    installers::uv_tarball(installers::UV_VERSION).unwrap();
    let u = upstream::Upstream::create_on_host().unwrap();
    installers::serve_uv(&u, installers::UV_VERSION).unwrap();
    u
}

/// What the worker is told of the test host, and the egress cache under `tmp`.
fn egress_env(u: &upstream::Upstream, tmp: &Path) -> [(&'static str, String); 4] {
    [
        ("AKBENCH_EGRESS_HOSTS", u.hosts_env()),
        ("AKBENCH_EGRESS_OPEN_RANGES", "10.215.0.0/16".into()),
        ("AKBENCH_EGRESS_UPSTREAM_CA", u.ca().display().to_string()),
        (
            "AKBENCH_EGRESS_CACHE_DIR",
            tmp.join("egress-cache").display().to_string(),
        ),
    ]
}

/// What a task's environment/Dockerfile says, read as the corpus writes them: `FROM` the
/// test base, `WORKDIR`, `COPY <file> <absolute path>` and `ENTRYPOINT [json]`; any other
/// instruction fails the test (the image could not be built from Debian packages here).
struct Dockerfile {
    workdir: String,
    copies: Vec<(PathBuf, String)>,
    entrypoint: Option<String>,
}

fn read_dockerfile(env_dir: &Path) -> Dockerfile {
    let text = std::fs::read_to_string(env_dir.join("Dockerfile")).unwrap();
    let mut d = Dockerfile {
        workdir: String::new(),
        copies: Vec::new(),
        entrypoint: None,
    };
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "FROM" => assert_eq!(rest, BASE, "{}", env_dir.display()),
            "WORKDIR" => d.workdir = rest.to_string(),
            "COPY" => {
                let (src, dst) = rest.split_once(' ').unwrap();
                assert!(dst.starts_with('/'), "{line}");
                d.copies.push((env_dir.join(src), dst.to_string()));
            }
            "ENTRYPOINT" => d.entrypoint = Some(rest.to_string()),
            other => panic!("{}: `{other}` is not built here", env_dir.display()),
        }
    }
    d
}

/// Pushes the image `task`'s Dockerfile describes (the base, then one layer with its
/// working folder and copied files) as its task.toml's `docker_image`, rewritten to `reg`
/// (and its Dockerfile's FROM line with it). `mount_from`: a repository of `reg` already
/// holding the base layer, mounted from there rather than uploaded again. Returns the
/// image's repository.
fn push_image(
    tmp: &Path,
    reg: &registry::Registry,
    task: &Path,
    mount_from: Option<&str>,
) -> String {
    let name = task.file_name().unwrap().to_string_lossy().to_string();
    let toml = task.join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let d = read_dockerfile(&task.join("environment"));
    let text = text.replace("127.0.0.1:5000", &reg.addr);
    std::fs::write(&toml, &text).unwrap();
    let image = text
        .lines()
        .find_map(|l| l.strip_prefix("docker_image = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap();
    let repo_tag = image.strip_prefix(&format!("{}/", reg.addr)).unwrap();
    let stage = tmp.join(format!("{name}-stage"));
    std::fs::create_dir_all(stage.join(d.workdir.trim_start_matches('/'))).unwrap();
    for (src, dst) in &d.copies {
        let to = stage.join(dst.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(src, &to).unwrap();
    }
    let layer = tmp.join(format!("{name}.tar"));
    let st = Command::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "-C"])
        .arg(&stage)
        .arg("-cf")
        .arg(&layer)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let mut cmd = Command::new("python3");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/oci-push.py"))
        .arg(&reg.addr)
        .arg(repo_tag)
        .args([
            "--env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--workdir",
            &d.workdir,
        ]);
    if let Some(e) = &d.entrypoint {
        cmd.args(["--entrypoint", e]);
    }
    if let Some(m) = mount_from {
        cmd.args(["--mount-from", m]);
    }
    let out = cmd
        .arg(format!("{}:tar", registry::base_tar().display()))
        .arg(format!("{}:tar", layer.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "oci-push {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    repo_tag.split(':').next().unwrap_or(repo_tag).to_string()
}

/// A copy of the corpus under `tmp/tasks`, every image pushed to `reg`.
fn corpus(tmp: &Path, reg: &registry::Registry) -> PathBuf {
    let tasks = tmp.join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let mut first: Option<String> = None;
    for t in CORPUS {
        assert!(Command::new("cp")
            .arg("-a")
            .arg(examples().join("tasks").join(t))
            .arg(tasks.join(t))
            .status()
            .unwrap()
            .success());
        let repo = push_image(tmp, reg, &tasks.join(t), first.as_deref());
        first.get_or_insert(repo);
    }
    tasks
}

fn akbench(
    args: &[&str],
    tmp: &Path,
    reg: &registry::Registry,
    u: &upstream::Upstream,
) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
        .envs(egress_env(u, tmp))
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--tasks-root")
        .arg(tmp.join("tasks"))
        .arg("--out")
        .arg(tmp.join("out"))
        .arg("--cache")
        .arg(tmp.join("cache"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Files named `name` under `dir`.
fn walk_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if e.file_name() == name {
                out.push(p);
            }
        }
    }
    out
}

/// The tasks the clean room grades correctly too (`task check`'s `separate`): those graded
/// on files in /app alone. The others are graded on a service the agent leaves running or
/// on files outside /app, which a fresh grading container does not have.
const CLEAN_ROOM_VALID: [&str; 6] = [
    "tb21-access-log-summary",
    "tb21-median-fix",
    "tb21-ini-to-json",
    "tb21-contacts-dedupe",
    "tb21-backup-script-fix",
    "tb21-sqlite-top-customers",
];

/// Slots of the sweep and of the task checks.
const SLOTS: usize = 4;

#[test]
fn the_terminal_bench_2_1_corpus_is_solved_by_the_oracle_and_not_by_a_no_op_agent() {
    const TEST: &str =
        "the_terminal_bench_2_1_corpus_is_solved_by_the_oracle_and_not_by_a_no_op_agent";
    if !runs_here(TEST) {
        return;
    }
    let started = std::time::Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    let u = upstream();
    let tasks = corpus(tmp.path(), &reg);
    eprintln!(
        "{TEST}: images pushed: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // One sweep: every task with the oracle and with the no-op agent, on parallel slots.
    let m = tmp.path().join("experiment.yaml");
    std::fs::write(
        &m,
        format!(
            "experiment: tb21-corpus\ntasks:\n  include: [\"tb21-*\"]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: noop\nexecution:\n  runtime: container\n  concurrency:\n    max_trials: {SLOTS}\n"
        ),
    )
    .unwrap();
    let jobs = SLOTS.to_string();
    let (code, stdout, stderr) = akbench(
        &[
            "sweep",
            &m.display().to_string(),
            "--local",
            "--json",
            "--jobs",
            &jobs,
            "--store-root",
            &tmp.path().join("runs").display().to_string(),
        ],
        tmp.path(),
        &reg,
        &u,
    );
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("sweep ended {code}: {stdout}\n{stderr}"));
    let records = walk_files(&tmp.path().join("out"), "run_record.json");
    let mut seen = std::collections::BTreeMap::new();
    for r in &records {
        let rec: Value = serde_json::from_slice(&std::fs::read(r).unwrap()).unwrap();
        let task = rec["task"]["release"]["id"].as_str().unwrap().to_string();
        let agent = rec["agent"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let last = rec["attempts"].as_array().and_then(|a| a.last()).cloned();
        let last = last.unwrap_or(Value::Null);
        // Graded in the agent's environment, as Harbor grades (no environment_mode set).
        assert_eq!(
            last["grade"]["environment"], "shared",
            "{task} {agent}: {last}"
        );
        // Graded online: the record lists the hosts the grader fetched from (none for the
        // `no-network` task).
        let text = last.to_string();
        let online = [
            "\"astral.sh\"",
            "\"github.com\"",
            "\"files.pythonhosted.org\"",
        ];
        for host in online {
            assert_eq!(
                text.contains(host),
                task != "tb21-ini-to-json",
                "{task} {agent}: {host} in {last}"
            );
        }
        seen.insert(
            (task, agent),
            (
                rec["outcome"]["state"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                rec["outcome"]["ok"].clone(),
                last["cause"].clone(),
                last["grade"]["report"].clone(),
            ),
        );
    }
    let mut wrong = Vec::new();
    for t in CORPUS {
        for (agent, want) in [("oracle", true), ("noop", false)] {
            match seen.get(&(t.to_string(), agent.to_string())) {
                Some((state, ok, _, _)) if state == "completed" && ok == &Value::Bool(want) => {}
                other => wrong.push(format!("{t} {agent}: {other:?}")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}\n{v}", wrong.join("\n"));
    let a = &v["accounting"];
    assert_eq!(a["planned"], 2 * CORPUS.len(), "{v}");
    assert_eq!(a["counts"]["succeeded"], CORPUS.len(), "{v}");
    let sweep_secs = started.elapsed().as_secs_f64();
    eprintln!("{TEST}: images and sweep: {sweep_secs:.1} s");
    // task check: valid for each, the checks on parallel slots too.
    let checks: Vec<(String, i32, Value, String)> = std::thread::scope(|s| {
        let mut out = Vec::new();
        for chunk in CORPUS.chunks(CORPUS.len().div_ceil(SLOTS)) {
            let tasks = &tasks;
            let reg = &reg;
            let cache = tmp.path().join("cache");
            let egress = egress_env(&u, tmp.path());
            out.push(s.spawn(move || {
                chunk
                    .iter()
                    .map(|t| {
                        let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
                            .args(["task", "check"])
                            .arg(tasks.join(t))
                            .args(["--json", "--cache"])
                            .arg(&cache)
                            .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
                            .envs(egress.clone())
                            .output()
                            .unwrap();
                        (
                            t.to_string(),
                            o.status.code().unwrap_or(-1),
                            serde_json::from_slice(&o.stdout).unwrap_or(Value::Null),
                            String::from_utf8_lossy(&o.stderr).into_owned(),
                        )
                    })
                    .collect::<Vec<_>>()
            }));
        }
        out.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let mut invalid = Vec::new();
    for (t, code, check, stderr) in &checks {
        let net = if *t == "tb21-ini-to-json" {
            "no-network"
        } else {
            "public"
        };
        if *code != 0
            || check["valid"] != true
            || check["reference"] != "solved"
            || check["baseline"] != "not_solved"
            || check["network"]["verifier"]["mode"] != net
            || check["harbor_name"] != format!("akbench-examples/{t}").as_str()
            || check["grading"] != "shared"
            || check["separate"]["valid"] != CLEAN_ROOM_VALID.contains(&t.as_str())
        {
            invalid.push(format!("{t}: exit {code}, {check} {stderr}"));
        }
    }
    assert!(invalid.is_empty(), "{}", invalid.join("\n"));
    // A run asking for the clean room is refused for a task the check found graded wrongly
    // there, naming it and the fix; the /app task beside it is not named.
    let clean = tmp.path().join("clean-room.yaml");
    std::fs::write(
        &clean,
        "experiment: clean-room\ntasks:\n  ids: [tb21-kv-tcp-service, tb21-median-fix]\nagents:\n  conditions:\n    - descriptor: oracle\nexecution:\n  runtime: container\n  grading_environment: separate\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "plan", "--config"])
        .arg(&clean)
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--tasks-root")
        .arg(&tasks)
        .arg("--store-root")
        .arg(tmp.path().join("runs-clean"))
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
        .output()
        .unwrap();
    let (code, stdout, stderr) = (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("task `tb21-kv-tcp-service`")
            && stderr.contains("not graded correctly in a fresh sandbox")
            && stderr.contains("remove `grading_environment: separate`")
            && !stderr.contains("task `tb21-median-fix`"),
        "{stderr}"
    );
    assert!(
        !tmp.path().join("runs-clean").exists()
            || walk_files(&tmp.path().join("runs-clean"), "spec.json").is_empty()
    );
    eprintln!(
        "{TEST}: {} trials in {sweep_secs:.1} s (with image pushes), {} task checks, {:.1} s in all",
        2 * CORPUS.len(),
        checks.len(),
        started.elapsed().as_secs_f64()
    );
}

/// The run's `execution.grading_environment: separate` grades a task that Harbor grades in
/// the agent's environment in a fresh sandbox, and the record says it was asked: the
/// server the oracle left running is not there, so the task is not solved.
#[test]
fn a_run_asking_for_separate_grading_grades_a_service_task_in_a_fresh_sandbox() {
    const TEST: &str = "a_run_asking_for_separate_grading_grades_a_service_task_in_a_fresh_sandbox";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    let u = upstream();
    let tasks = tmp.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    for t in ["tb21-kv-tcp-service", "tb21-median-fix"] {
        assert!(Command::new("cp")
            .arg("-a")
            .arg(examples().join("tasks").join(t))
            .arg(tasks.join(t))
            .status()
            .unwrap()
            .success());
        push_image(tmp.path(), &reg, &tasks.join(t), None);
    }
    let m = tmp.path().join("experiment.yaml");
    std::fs::write(
        &m,
        "experiment: clean-room\ntasks:\n  ids: [tb21-kv-tcp-service, tb21-median-fix]\nagents:\n  conditions:\n    - descriptor: oracle\nexecution:\n  runtime: container\n  grading_environment: separate\n",
    )
    .unwrap();
    let (code, stdout, stderr) = akbench(
        &[
            "sweep",
            &m.display().to_string(),
            "--local",
            "--json",
            "--jobs",
            "2",
            "--store-root",
            &tmp.path().join("runs").display().to_string(),
        ],
        tmp.path(),
        &reg,
        &u,
    );
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("sweep ended {code}: {stdout}\n{stderr}"));
    let records = walk_files(&tmp.path().join("out"), "run_record.json");
    assert_eq!(records.len(), 2, "{v}");
    for r in records {
        let rec: Value = serde_json::from_slice(&std::fs::read(&r).unwrap()).unwrap();
        let task = rec["task"]["release"]["id"].as_str().unwrap();
        let last = rec["attempts"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(rec["outcome"]["state"], "completed", "{task}: {rec}");
        // Asked, and said: graded in a fresh sandbox, not where the agent left its server.
        assert_eq!(last["grade"]["environment"], "separate", "{task}: {last}");
        // A file in /app is the agent's diff, graded in the clean room; the service the
        // oracle started is not there.
        let want = task == "tb21-median-fix";
        assert_eq!(rec["outcome"]["ok"], want, "{task}: {last}");
    }
}
