//! The example corpus's image-based tasks (`examples/tasks/image-*`) under the `container`
//! runtime, through the real `akbench` binary: a loopback registry holding the Debian image
//! CI builds (scripts/build-test-image), the tasks' registry address rewritten to it.
//! `run single`: the oracle solves, `fail` does not, the record names the image by digest;
//! `run execute` then `run evaluate`: graded later in the same image, the same verdict.
//! `sweep --local`: the plan pins the tag, every trial runs that digest.

#[path = "../../worker/tests/common/registry.rs"]
#[allow(dead_code)]
mod registry;

#[path = "up/mod.rs"]
mod akbench_up;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The image-based examples, and the Harbor-layout one (`docker_image`, tests/test.sh
/// writing /logs/verifier/reward.txt, environment/Dockerfile).
const TASKS: [&str; 3] = ["image-pyslug-001", "image-pyslug-004", HARBOR];
const HARBOR: &str = "harbor-pyslug-002";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A copy of the image-based example tasks (and the repositories they pin) whose image is
/// on `reg`, and the digest pushed there.
fn corpus(tmp: &Path, reg: &registry::Registry) -> (PathBuf, String) {
    let digest = reg.push(
        "akbench/base:bookworm",
        &[(&registry::base_tar(), "tar")],
        &["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        None,
        None,
    );
    let tasks = tmp.join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    for t in TASKS {
        assert!(Command::new("cp")
            .arg("-a")
            .arg(examples().join("tasks").join(t))
            .arg(tasks.join(t))
            .status()
            .unwrap()
            .success());
        let toml = tasks.join(t).join("task.toml");
        let text = std::fs::read_to_string(&toml).unwrap();
        assert!(
            text.contains("127.0.0.1:5000/akbench/base:bookworm"),
            "{text}"
        );
        std::fs::write(&toml, text.replace("127.0.0.1:5000", &reg.addr)).unwrap();
        let dockerfile = tasks.join(t).join("environment/Dockerfile");
        if let Ok(text) = std::fs::read_to_string(&dockerfile) {
            std::fs::write(&dockerfile, text.replace("127.0.0.1:5000", &reg.addr)).unwrap();
        }
    }
    std::os::unix::fs::symlink(examples().join("repos"), tmp.join("repos")).unwrap();
    (tasks, digest)
}

/// `akbench run single TASK --agent AGENT --runtime container --json`: checks its exit code,
/// `ok` and `completed` state, and returns its JSON answer and the run record it wrote.
fn single_in_container(
    task: &str,
    agent: &str,
    want_code: i32,
    want_ok: bool,
    tmp: &Path,
    reg: &registry::Registry,
) -> (Value, Value) {
    let (code, stdout, stderr) = akbench(
        &[
            "run",
            "single",
            task,
            "--agent",
            agent,
            "--runtime",
            "container",
            "--json",
        ],
        tmp,
        reg,
    );
    let v: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    assert_eq!(code, want_code, "{task} {agent}: {stdout}{stderr}");
    assert_eq!(v["ok"], want_ok, "{task} {agent}: {v}");
    assert_eq!(v["state"], "completed", "{task} {agent}: {v}");
    let record =
        serde_json::from_slice(&std::fs::read(v["record"].as_str().unwrap()).unwrap()).unwrap();
    (v, record)
}

fn akbench(args: &[&str], tmp: &Path, reg: &registry::Registry) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
        .env("AKBENCH_PLAN_TIME", "2026-03-04T05:06:07Z")
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

fn runs_here(test: &str) -> bool {
    match registry::missing() {
        None => true,
        Some(why) => {
            akbench_core::testkit::skip(test, &why);
            false
        }
    }
}

#[test]
fn run_single_solves_the_image_tasks_with_the_oracle_and_not_with_fail() {
    const TEST: &str = "run_single_solves_the_image_tasks_with_the_oracle_and_not_with_fail";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    let (_, digest) = corpus(tmp.path(), &reg);
    let pinned = format!("{}/akbench/base@{digest}", reg.addr);
    for task in [TASKS[0], HARBOR] {
        for (agent, want_code, want_ok) in [("oracle", 0, true), ("fail", 1, false)] {
            let (v, record) =
                single_in_container(task, agent, want_code, want_ok, tmp.path(), &reg);
            assert_eq!(record["options"]["runtime"], "container");
            assert_eq!(
                record["task"]["image"],
                pinned.as_str(),
                "the record names the digest"
            );
            // Executed only, then graded later (`run evaluate`): graded in the run's image (the
            // grade's runtime says `container`), with the verdict grading in the run gave.
            let (code, stdout, stderr) = akbench(
                &[
                    "run",
                    "execute",
                    task,
                    "--agent",
                    agent,
                    "--runtime",
                    "container",
                    "--json",
                ],
                tmp.path(),
                &reg,
            );
            let exec: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
            assert_eq!(code, 0, "{task} {agent}: {stdout}{stderr}");
            assert_eq!(exec["state"], "not_graded", "{task} {agent}: {exec}");
            let exec_record = PathBuf::from(exec["record"].as_str().unwrap());
            let run_dir = exec_record.parent().unwrap().to_str().unwrap().to_string();
            let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
                .args([
                    "run",
                    "evaluate",
                    &run_dir,
                    "--copy",
                    "--json",
                    "--tasks-root",
                ])
                .arg(tmp.path().join("tasks"))
                .arg("--cache")
                .arg(tmp.path().join("cache"))
                .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
                .output()
                .unwrap();
            let later: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(want_code),
                "{task} {agent}: {later} {stderr}"
            );
            for field in ["state", "ok", "score"] {
                assert_eq!(
                    later[field], v[field],
                    "{task} {agent}: {field}: {later} vs {v}"
                );
            }
            let graded: Value =
                serde_json::from_slice(&std::fs::read(&exec_record).unwrap()).unwrap();
            let grade = |r: &Value| r["attempts"][0]["grade"].clone();
            assert_eq!(
                grade(&graded)["runtime"]["name"],
                "container",
                "{task} {agent}: graded in the image: {graded}"
            );
            assert_eq!(graded["task"]["image"], pinned.as_str());
            for field in [
                "ok",
                "score",
                "source",
                "exit_code",
                "tests",
                "tests_digest",
            ] {
                assert_eq!(
                    grade(&graded)[field],
                    grade(&record)[field],
                    "{task} {agent}: grade.{field} graded later vs graded in the run"
                );
            }
        }
    }
    // Without an image, `--runtime container` is refused before anything runs.
    let plain = tmp.path().join("tasks/plain");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks/pyslug-001"))
        .arg(&plain)
        .status()
        .unwrap()
        .success());
    let (code, _, stderr) = akbench(
        &[
            "run",
            "single",
            "plain",
            "--agent",
            "oracle",
            "--runtime",
            "container",
        ],
        tmp.path(),
        &reg,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("names no image") && stderr.contains("environment.image"),
        "{stderr}"
    );
}

#[test]
fn a_container_sweep_pins_the_tag_in_its_plan_and_runs_that_digest() {
    const TEST: &str = "a_container_sweep_pins_the_tag_in_its_plan_and_runs_that_digest";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    let (_, digest) = corpus(tmp.path(), &reg);
    // And the Terminal-Bench-layout task, as it is (no [source]; its own image).
    let tb_pinned = tb_corpus(tmp.path(), &reg);
    let m = tmp.path().join("experiment.yaml");
    std::fs::write(
        &m,
        format!(
            "experiment: images\ntasks:\n  ids: [{}, {TB}]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: fail\nexecution:\n  runtime: container\n",
            TASKS.join(", ")
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = akbench(
        &[
            "sweep",
            &m.display().to_string(),
            "--local",
            "--json",
            "--store-root",
            &tmp.path().join("runs").display().to_string(),
        ],
        tmp.path(),
        &reg,
    );
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("sweep ended {code}: {stdout}\n{stderr}"));
    let a = &v["accounting"];
    // Two trials a task, the Harbor-layout tasks among them.
    let n = TASKS.len() + 1;
    assert_eq!(a["planned"], 2 * n, "{v}");
    assert_eq!(a["counts"]["succeeded"], n, "{v}");
    let by = &v["summary"]["by_agent"];
    assert_eq!(by["oracle"]["counts"]["succeeded"], n, "{v}");
    assert_eq!(by["fail"]["counts"]["succeeded"], 0, "{v}");
    assert_eq!(by["fail"]["counts"]["failed"], n, "{v}");
    // The plan names the digest, and so does every record.
    let pinned = format!("{}/akbench/base@{digest}", reg.addr);
    let plans = walk_files(&tmp.path().join("runs"), "plan");
    assert!(!plans.is_empty());
    let mut seen = 0;
    let mut tb_seen = 0;
    for p in plans {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        seen += text.matches(&pinned).count();
        tb_seen += text.matches(&tb_pinned).count();
        assert!(
            !text.contains("akbench/base:bookworm"),
            "{}: the tag is in the plan",
            p.display()
        );
    }
    assert!(
        seen >= 2 * (n - 1) && tb_seen >= 2,
        "the plan names the digest for every trial"
    );
    let records = walk_files(&tmp.path().join("out"), "run_record.json");
    assert_eq!(records.len(), 2 * n);
    for r in records {
        let rec: Value = serde_json::from_slice(&std::fs::read(&r).unwrap()).unwrap();
        let want = if rec["task"]["release"]["id"] == TB {
            &tb_pinned
        } else {
            &pinned
        };
        assert_eq!(rec["task"]["image"], want.as_str(), "{}", r.display());
        assert_eq!(rec["options"]["runtime"], "container");
    }
}

/// Files under `dir` whose name contains `name`.
fn walk_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if e.file_name().to_string_lossy().contains(name) {
                out.push(p);
            }
        }
    }
    out
}

/// Docker image tags removed (best effort) when dropped.
struct Untag(Vec<String>);

impl Drop for Untag {
    fn drop(&mut self) {
        let _ = Command::new("docker").arg("rmi").args(&self.0).output();
    }
}

/// Why docker cannot build here, if it cannot (`docker info` fails: no client, no daemon).
fn docker_missing() -> Option<String> {
    match Command::new("docker").arg("info").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`docker info` failed (no daemon? start dockerd): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("docker is not installed: {e}")),
    }
}

#[test]
fn image_build_pushes_the_harbor_tasks_dockerfile_and_the_task_runs_in_that_image() {
    const TEST: &str =
        "image_build_pushes_the_harbor_tasks_dockerfile_and_the_task_runs_in_that_image";
    if !runs_here(TEST) {
        return;
    }
    if let Some(why) = docker_missing() {
        akbench_core::testkit::skip(TEST, &why);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    corpus(tmp.path(), &reg);
    let dir = tmp.path().join("tasks").join(HARBOR);
    // The tags docker keeps (this registry's port is this run's): removed at the end.
    let _untag = Untag(vec![
        format!("{}/akbench/{HARBOR}:1.0", reg.addr),
        format!("{}/akbench/base:bookworm", reg.addr),
    ]);
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(args)
            .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let d = dir.to_str().unwrap();
    let (code, built, stderr) = cli(&[
        "image",
        "build",
        d,
        "--push",
        &reg.addr,
        "--builder",
        "docker",
        "--json",
    ]);
    assert_eq!(code, 0, "{built} {stderr}");
    let image = built["image"].as_str().unwrap().to_string();
    let digest = built["digest"].as_str().unwrap().to_string();
    assert_eq!(
        image,
        format!("{}/akbench/{HARBOR}:1.0@{digest}", reg.addr),
        "{built}"
    );
    // Written where plans read it: Harbor's key, kept as the task wrote it.
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    assert!(
        toml.contains(&format!("docker_image = \"{image}\"")),
        "{toml}"
    );
    assert!(!toml.contains("akbench/base:bookworm"), "{toml}");
    // The task is valid in the built image, and that image is the Dockerfile's: the file
    // its RUN line wrote is in the unpacked root.
    let cache = tmp.path().join("cache");
    let (code, check, stderr) = cli(&[
        "task",
        "check",
        d,
        "--runtime",
        "container",
        "--json",
        "--cache",
        cache.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{check} {stderr}");
    assert_eq!(check["valid"], true, "{check}");
    assert_eq!(
        check["image"],
        format!("{}/akbench/{HARBOR}@{digest}", reg.addr).as_str()
    );
    let hex = digest.strip_prefix("sha256:").unwrap();
    let marker = cache.join(format!("images/roots/{hex}/rootfs/etc/akbench-task"));
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default(),
        format!("{HARBOR}\n"),
        "{}",
        marker.display()
    );
}

/// The Terminal-Bench-layout example (no `[source]`: the workspace is its image's /app).
const TB: &str = "tb-wordfreq-001";

/// A copy of the Terminal-Bench-layout example under `tmp/tasks`, its registry address
/// rewritten to `reg`, and its image pushed there as its Dockerfile describes it (the base
/// image, then a layer with environment/wordfreq.py at /app, working folder /app): the
/// pinned reference.
fn tb_corpus(tmp: &Path, reg: &registry::Registry) -> String {
    let src = examples().join("tasks").join(TB);
    let program = std::fs::read_to_string(src.join("environment/wordfreq.py")).unwrap();
    let app = registry::layer(tmp, "app", &[("app/wordfreq.py", &program)], "gzip");
    let digest = reg.push(
        &format!("akbench/{TB}:1.0"),
        &[(&registry::base_tar(), "tar"), (&app, "gzip")],
        &["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        Some("/app"),
        None,
    );
    let tasks = tmp.join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(tasks.join(TB))
        .status()
        .unwrap()
        .success());
    for f in ["task.toml", "environment/Dockerfile"] {
        let p = tasks.join(TB).join(f);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("127.0.0.1:5000/akbench/"), "{f}: {text}");
        std::fs::write(&p, text.replace("127.0.0.1:5000", &reg.addr)).unwrap();
    }
    format!("{}/akbench/{TB}@{digest}", reg.addr)
}

/// `akbench task check DIR --runtime container --json` with its own cache folder.
fn task_check(dir: &Path, cache: &Path, reg: &registry::Registry) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["task", "check"])
        .arg(dir)
        .args(["--runtime", "container", "--json", "--cache"])
        .arg(cache)
        .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_image_only_task_runs_in_container_with_a_relative_out_and_no_runtime_flag() {
    const TEST: &str =
        "an_image_only_task_runs_in_container_with_a_relative_out_and_no_runtime_flag";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    tb_corpus(tmp.path(), &reg);
    // As the README's commands are written: relative folders, the default `--out out`
    // (AKBENCH_OUT unset), and no `--runtime` (the task is image-only: `container` is picked).
    let single = |agent: &str, json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_akbench"));
        cmd.current_dir(tmp.path())
            .args(["run", "single", TB, "--agent", agent])
            .args(["--tasks-root", "tasks", "--cache", "cache"])
            .arg("--agents-root")
            .arg(examples().join("agents"))
            .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
            .env_remove("AKBENCH_OUT")
            .env_remove("AKBENCH_CACHE");
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = single("oracle", true);
    let v: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(v["state"], "completed", "{v}");
    assert_eq!(v["ok"], true, "{v}");
    let record = PathBuf::from(v["record"].as_str().unwrap());
    assert!(
        record.is_absolute() && record.starts_with(tmp.path().join("out")),
        "{}",
        record.display()
    );
    // Not solved by `fail`, and the pick is said.
    let (code, stdout, stderr) = single("fail", false);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("runtime container picked: every task is image-only"),
        "{stderr}"
    );
}

#[test]
fn a_terminal_bench_task_without_source_runs_in_its_image_as_it_is() {
    const TEST: &str = "a_terminal_bench_task_without_source_runs_in_its_image_as_it_is";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    let pinned = tb_corpus(tmp.path(), &reg);
    // The oracle (solve.sh copying from /solution) solves it; `fail` does not. Grading runs
    // the task's test.sh as written: pytest on /tests/test_outputs.py in /app.
    for (agent, want_code, want_ok) in [("oracle", 0, true), ("fail", 1, false)] {
        let (_, record) = single_in_container(TB, agent, want_code, want_ok, tmp.path(), &reg);
        // Its start is the image (pinned by digest), not a repository and commit.
        assert_eq!(record["task"]["image"], pinned.as_str(), "{record}");
        assert_eq!(record["task"]["commit"], "", "{record}");
        assert_eq!(record["task"]["repo"], "", "{record}");
        // As shipped (no environment_mode), it grades as Harbor does, in the environment the
        // agent left (core::grading_env), a solved grade's tripwire twin run there after the
        // graded run.
        let grade = &record["attempts"][0]["grade"];
        assert_eq!(grade["environment"], "shared", "{record}");
        let tripwire = if want_ok {
            akbench_core::record::TRIPWIRE_OK
        } else {
            "not run: the grade is not solved"
        };
        assert_eq!(grade["tripwire"]["result"], tripwire, "{record}");
        let base = record["attempts"][0]["workspace"]["base_commit"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            base.len() == 40 && base.chars().all(|c| c.is_ascii_hexdigit()),
            "the baseline commit made from /app: {record}"
        );
    }
    // Executed, then graded later (`run evaluate`): the grading rebuilds the workspace from
    // the image's /app plus the recorded diff, in the same image.
    let (code, stdout, stderr) = akbench(
        &[
            "run",
            "execute",
            TB,
            "--agent",
            "oracle",
            "--runtime",
            "container",
            "--json",
        ],
        tmp.path(),
        &reg,
    );
    let exec: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(exec["state"], "not_graded", "{exec}");
    let run_dir = PathBuf::from(exec["record"].as_str().unwrap())
        .parent()
        .unwrap()
        .to_path_buf();
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "evaluate"])
        .arg(&run_dir)
        .args(["--copy", "--json", "--tasks-root"])
        .arg(tmp.path().join("tasks"))
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
        .output()
        .unwrap();
    let later: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{later} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(later["ok"], true, "{later}");
    // The Harbor requirements (cpus 1, memory_mb 1024, storage_mb 1024) fit a plan's
    // defaults; a sandbox run is refused before anything runs, naming the task and the fix.
    let (code, _, stderr) = akbench(
        &[
            "run",
            "single",
            TB,
            "--agent",
            "oracle",
            "--runtime",
            "sandbox",
        ],
        tmp.path(),
        &reg,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("task `{TB}` has no [source]"))
            && stderr.contains("--runtime container"),
        "{stderr}"
    );
    // task check: the reference solves, the image's /app unchanged does not.
    let dir = tmp.path().join("tasks").join(TB);
    let (code, check, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    assert_eq!(code, 0, "{check} {stderr}");
    assert_eq!(check["valid"], true, "{check}");
    assert_eq!(check["reference"], "solved", "{check}");
    assert_eq!(check["baseline"], "not_solved", "{check}");
    assert_eq!(check["image"], pinned.as_str(), "{check}");
}

#[test]
fn what_a_solution_changes_outside_the_working_folder_does_not_reach_grading() {
    const TEST: &str = "what_a_solution_changes_outside_the_working_folder_does_not_reach_grading";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    tb_corpus(tmp.path(), &reg);
    // A reference solution that only works through state outside /app: the fixed program
    // installed in /usr/local/lib, /app's program a stub that runs it. In the agent's
    // container that works; the grader's fresh container over the same image has no
    // /usr/local/lib/wordfreq.py, so the task is not valid.
    let dir = tmp.path().join("tasks").join(TB);
    // Graded in a fresh sandbox as the task asks (a task in Harbor's layout that sets no
    // mode grades in the agent's environment, as Harbor does: core::grading_env).
    let toml = dir.join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace(
            "[verifier]\ntimeout_sec = 120.0\n",
            "[verifier]\ntimeout_sec = 120.0\nenvironment_mode = \"separate\"\n",
        ),
    )
    .unwrap();
    assert!(std::fs::read_to_string(&toml)
        .unwrap()
        .contains("environment_mode = \"separate\""));
    std::fs::write(
        dir.join("solution/solve.sh"),
        "#!/usr/bin/env bash\nset -euo pipefail\ncp /solution/wordfreq.py /usr/local/lib/wordfreq.py\n\
         printf 'import runpy\\nrunpy.run_path(\"/usr/local/lib/wordfreq.py\", run_name=\"__main__\")\\n' > /app/wordfreq.py\n\
         cd /app && printf 'a A b\\n' > /tmp/t.txt && test \"$(python3 wordfreq.py /tmp/t.txt 1)\" = 'a 2'\n",
    )
    .unwrap();
    let (code, check, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    assert_eq!(code, 1, "{check} {stderr}");
    assert_eq!(check["valid"], false, "{check}");
    assert_eq!(check["reference"], "not_solved", "{check}");
    // solve.sh ran to its end (its own last line checks the stub works there): it is the
    // grading of its result that fails.
    let problems = check["problems"].to_string();
    assert!(
        !problems.contains("solve.sh exited") && !problems.contains("did not finish"),
        "{check}"
    );
}

/// Harbor's `[agent] user` / `[verifier] user` in the agent's environment (Harbor's default
/// grading): the reference solution runs as `nobody` (it checks its uid and that a file of
/// the image only root may read stays unreadable, and writes /app, handed to it), the
/// grader too (test.sh checks its uid before grading); users in a task graded in a fresh
/// container are refused, naming the field and the fix, as a user the image does not have is.
#[test]
fn a_tasks_users_run_the_agent_and_the_grader_in_its_environment() {
    const TEST: &str = "a_tasks_users_run_the_agent_and_the_grader_in_its_environment";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    tb_corpus(tmp.path(), &reg);
    let dir = tmp.path().join("tasks").join(TB);
    let toml = dir.join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(!text.contains("\nuser = "), "{text}");
    let with = |agent: &str, verifier: &str| {
        let t = text
            .replace(
                "[verifier]\ntimeout_sec = 120.0\n",
                &format!("[verifier]\ntimeout_sec = 120.0\n{verifier}"),
            )
            .replace("[agent]\n", &format!("[agent]\n{agent}"));
        std::fs::write(&toml, t).unwrap();
    };
    let solve = dir.join("solution/solve.sh");
    let solution = std::fs::read_to_string(&solve).unwrap();
    std::fs::write(
        &solve,
        solution.replace(
            "cp /solution/wordfreq.py /app/wordfreq.py",
            "test \"$(id -u):$(id -g)\" = 65534:65534\n! cat /etc/shadow >/dev/null 2>&1\ncp /solution/wordfreq.py /app/wordfreq.py",
        ),
    )
    .unwrap();
    let test_sh = dir.join("tests/test.sh");
    let grader = std::fs::read_to_string(&test_sh).unwrap();
    std::fs::write(
        &test_sh,
        grader.replace(
            "cd /app ||",
            "test \"$(id -u)\" = 65534 || { echo 0 > /logs/verifier/reward.txt; exit 0; }\ncd /app ||",
        ),
    )
    .unwrap();
    with("user = \"nobody\"\n", "user = 65534\n");
    let (code, check, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    assert_eq!(code, 0, "{check} {stderr}");
    assert_eq!(check["valid"], true, "{check}");
    assert_eq!(check["reference"], "solved", "{check}");
    // Graded in a fresh container: refused, with the fix.
    with(
        "user = \"nobody\"\n",
        "user = \"nobody\"\nenvironment_mode = \"separate\"\n",
    );
    let (code, check, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    let said = format!("{check} {stderr}");
    assert_ne!(check["valid"], true, "{said}");
    assert!(
        said.contains("`agent.user` (uid 65534, gid 65534) is not the image's user")
            && said.contains("fix: grade in the agent's environment"),
        "exit {code}: {said}"
    );
    // A user the image does not have.
    with("user = \"akbench-no-such-user\"\n", "");
    let (code, check, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    let said = format!("{check} {stderr}");
    assert_ne!(code, 0, "{said}");
    assert!(
        said.contains("`agent.user` = `akbench-no-such-user`")
            && said.contains("is not in its /etc/passwd"),
        "{said}"
    );
}

/// A registry holding the Debian base image, and a copy of the multi-step example under
/// `tmp/tasks/harbor-steps-001` naming it (`docker_image`).
fn steps_task(tmp: &Path) -> (registry::Registry, PathBuf) {
    let reg = registry::Registry::start();
    reg.push(
        "akbench/base:bookworm",
        &[(&registry::base_tar(), "tar")],
        &["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        Some("/app"),
        None,
    );
    let dir = tmp.join("tasks/harbor-steps-001");
    std::fs::create_dir_all(tmp.join("tasks")).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks/harbor-steps-001"))
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    std::fs::write(
        dir.join("task.toml"),
        toml.replacen(
            "workdir = \"/app\"",
            &format!(
                "workdir = \"/app\"\ndocker_image = \"{}/akbench/base:bookworm\"",
                reg.addr
            ),
            1,
        ),
    )
    .unwrap();
    (reg, dir)
}

/// A multi-step task (`[[steps]]`) is checked step by step, each as its trial grades it:
/// the step's reference in a fresh environment where the steps before it ran first with
/// their solutions, its baseline there without its own. The example is valid (every step:
/// reference solved, baseline not); a step whose solution is wrong makes the task not
/// valid, the problem naming the step (and the step after it, whose reference builds on it).
#[test]
fn a_multi_step_task_is_checked_step_by_step_and_a_wrong_step_is_named() {
    const TEST: &str = "a_multi_step_task_is_checked_step_by_step_and_a_wrong_step_is_named";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (reg, dir) = steps_task(tmp.path());
    let (code, v, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    assert_eq!(code, 0, "{v}{stderr}");
    assert_eq!(v["valid"], true, "{v}");
    let steps = v["steps"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = steps.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["open", "deposit", "report"], "{v}");
    for s in &steps {
        assert_eq!(
            (&s["valid"], &s["reference"], &s["baseline"]),
            (
                &Value::Bool(true),
                &Value::from("solved"),
                &Value::from("not_solved")
            ),
            "{s}"
        );
    }
    // Step `deposit`'s solution deposits the wrong amount: that step is not valid, named.
    let solve = dir.join("steps/deposit/solution/solve.sh");
    let text = std::fs::read_to_string(&solve).unwrap();
    std::fs::write(&solve, text.replace("deposit 50", "deposit 40")).unwrap();
    let (code, v, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    assert_eq!(code, 1, "{v}{stderr}");
    assert_eq!(v["valid"], false, "{v}");
    let verdicts: Vec<(&str, &Value)> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), &s["valid"]))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("open", &Value::Bool(true)),
            ("deposit", &Value::Bool(false)),
            // Its reference starts where deposit's left the ledger (140, not 150).
            ("report", &Value::Bool(false))
        ],
        "{v}"
    );
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("step `deposit`: the reference solution does not solve"),
        "{problems}"
    );
}

/// A multi-step task through the coordinator (`akbench sweep` on its private PostgreSQL,
/// one worker daemon): the oracle's trial succeeds and no-op's fails, and each record the
/// coordinator exports keeps its attempt's steps as the worker ran them.
#[test]
fn a_multi_step_task_runs_through_the_coordinator_and_its_records_keep_the_steps() {
    const TEST: &str =
        "a_multi_step_task_runs_through_the_coordinator_and_its_records_keep_the_steps";
    if !runs_here(TEST) {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    // The private PostgreSQL may run as user postgres.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (reg, _dir) = steps_task(tmp.path());
    let m = tmp.path().join("experiment.yaml");
    std::fs::write(
        &m,
        "experiment: steps\ntasks:\n  ids: [harbor-steps-001]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: noop\nexecution:\n  runtime: container\n",
    )
    .unwrap();
    let (code, stdout, stderr) = akbench(
        &[
            "sweep",
            &m.display().to_string(),
            "--json",
            "--workers",
            "1",
            "--slots",
            "2",
            // `tmp/data`: where `akbench_up::up` serves it again for `run status`.
            "--data-dir",
            &tmp.path().join("data").display().to_string(),
            "--store-root",
            &tmp.path().join("runs").display().to_string(),
        ],
        tmp.path(),
        &reg,
    );
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("sweep ended {code}: {stdout}\n{stderr}"));
    let a = &v["accounting"];
    assert_eq!(a["planned"], 2, "{v}");
    assert_eq!(a["counts"]["succeeded"], 1, "{v}");
    assert_eq!(a["counts"]["failed"], 1, "{v}");
    let records = walk_files(&tmp.path().join("out"), "run_record.json");
    assert_eq!(records.len(), 2, "{records:?}");
    // Per step, from the records themselves: (reached, passed, stopped here).
    let mut from_records: Vec<(String, u64, u64, u64)> = Vec::new();
    for r in &records {
        let rec: Value = serde_json::from_slice(&std::fs::read(r).unwrap()).unwrap();
        let last = rec["attempts"].as_array().and_then(|a| a.last()).unwrap();
        for s in last["steps"].as_array().unwrap() {
            let name = s["name"].as_str().unwrap().to_string();
            let i = match from_records.iter().position(|c| c.0 == name) {
                Some(i) => i,
                None => {
                    from_records.push((name, 0, 0, 0));
                    from_records.len() - 1
                }
            };
            let verdict = s["verdict"].as_str().unwrap();
            let stopped = s.get("gated_stop").is_some();
            let c = &mut from_records[i];
            c.1 += u64::from(verdict != "not_run");
            c.2 += u64::from(verdict == "solved" || (verdict == "failed" && !stopped));
            c.3 += u64::from(stopped);
        }
    }
    assert_eq!(
        from_records,
        [
            ("open".to_string(), 2, 1, 1),
            ("deposit".to_string(), 1, 1, 0),
            ("report".to_string(), 1, 1, 0)
        ]
    );
    steps_are_reported(tmp.path(), &from_records);
    status_shows_the_steps_as_aggregate(tmp.path(), &v);
    for r in records {
        let rec: Value = serde_json::from_slice(&std::fs::read(&r).unwrap()).unwrap();
        let agent = rec["agent"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let steps: Vec<(String, String)> = rec["attempts"][0]["steps"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap_or_default().to_string(),
                    s["verdict"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = match agent.as_str() {
            "oracle" => vec![
                ("open", "solved"),
                ("deposit", "solved"),
                ("report", "solved"),
            ],
            "noop" => vec![
                ("open", "failed"),
                ("deposit", "not_run"),
                ("report", "not_run"),
            ],
            other => panic!("{}: agent {other}", r.display()),
        }
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(steps, want, "{agent}: {}", r.display());
    }
}

/// `run aggregate` (JSON and text) and `run report` over the records under `tmp/out` of one
/// run of harbor-steps-001 show its steps with the counts `want` read from the records
/// (name, reached, passed, stopped here).
fn steps_are_reported(tmp: &Path, want: &[(String, u64, u64, u64)]) {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(args)
            .current_dir(tmp)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let v: Value = serde_json::from_str(&run(&["run", "aggregate", "out", "--json"])).unwrap();
    let tasks = v["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(tasks.len(), 1, "{v}");
    assert_eq!(
        (&tasks[0]["task"], &tasks[0]["trials"]),
        (&Value::from("harbor-steps-001"), &Value::from(2)),
        "{v}"
    );
    let got: Vec<(String, u64, u64, u64)> = tasks[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["reached"].as_u64().unwrap(),
                s["passed"].as_u64().unwrap(),
                s["stopped"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want, "{v}");
    // The oracle's open scored 1 and the no-op's 0.
    assert_eq!(tasks[0]["steps"][0]["mean_reward"], 0.5, "{v}");
    let text = run(&["run", "aggregate", "out"]);
    assert!(
        text.contains("steps of harbor-steps-001 (2 trials)"),
        "{text}"
    );
    for (i, (name, reached, passed, stopped)) in want.iter().enumerate() {
        let row = format!(
            "| {}. {name} | {reached} | {passed} | {stopped} | 0 |",
            i + 1
        );
        assert!(text.contains(&row), "{row} not in\n{text}");
    }
    run(&["run", "report", "out", "--html", "report.html"]);
    let html = std::fs::read_to_string(tmp.join("report.html")).unwrap();
    assert!(html.contains("Steps of harbor-steps-001"), "{html}");
    let first = format!(
        "<tr><td>1. open</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
        want[0].1, want[0].2, want[0].3
    );
    assert!(html.contains(&first), "{first} not in the report");
}

/// The sweep's `--json` (`sweep`) and `run status` of its run, its database served again
/// (`akbench up` on the sweep's data folder): their steps (JSON `steps`, and the status
/// text's steps section) are `run aggregate`'s over the records the sweep exported under
/// `tmp/out`.
fn status_shows_the_steps_as_aggregate(tmp: &Path, sweep: &Value) {
    let key = sweep["run_key"].as_str().unwrap();
    let (_up, url) = akbench_up::up(tmp, &examples().join("agents"));
    let run = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_akbench"));
        for v in ["AKBENCH_COORDINATOR", "AKBENCH_TOKEN", "AKBENCH_STORE_ROOT"] {
            c.env_remove(v);
        }
        // `run aggregate` reads the records, never the coordinator.
        if args[1] == "status" {
            c.arg("--coordinator").arg(&url);
        }
        let out = c.args(args).current_dir(tmp).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let json = |args: &[&str]| -> Value { serde_json::from_str(&run(args)).unwrap() };
    let status = json(&["run", "status", key, "--json"]);
    let aggregate = json(&["run", "aggregate", "out", "--json"]);
    assert_eq!(status["finished"], 2, "{status}");
    assert!(status["steps"].is_array(), "{status}");
    assert_eq!(status["steps"], aggregate["steps"], "{status}\n{aggregate}");
    assert_eq!(sweep["steps"], aggregate["steps"], "{sweep}");
    // The text: the same section, from its first heading to the end of the last table.
    let section = |text: &str| -> String {
        let at = text
            .find("steps of ")
            .unwrap_or_else(|| panic!("no steps section in\n{text}"));
        let s = &text[at..];
        let end = s.rfind("|\n").map_or(s.len(), |i| i + 2);
        s[..end].to_string()
    };
    let (status, aggregate) = (
        run(&["run", "status", key]),
        run(&["run", "aggregate", "out"]),
    );
    assert_eq!(section(&status), section(&aggregate), "{status}");
    assert!(status.contains("| 1. open | 2 | 1 | 1 | 0 |"), "{status}");
}

/// Example `id` with its sidecar `services` under `tmp/tasks`, its images in a fresh
/// registry ([`registry::sidecar_example`]).
fn sidecar_task(tmp: &Path, id: &str, services: &[&str]) -> (registry::Registry, PathBuf) {
    let reg = registry::Registry::start();
    let dir = tmp.join("tasks").join(id);
    registry::sidecar_example(&reg, tmp, &dir, id, services);
    (reg, dir)
}

/// `task check` of a task with a sidecar starts the service for both sides: the reference
/// solution, which must use the service's API, is solved; the baseline is not. The check
/// lists the service (name, pinned image) and `main`'s wait for its health.
#[test]
fn a_task_with_a_sidecar_is_checked_valid_with_its_service_running() {
    const TEST: &str = "a_task_with_a_sidecar_is_checked_valid_with_its_service_running";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (reg, dir) = sidecar_task(tmp.path(), "harbor-sidecar-kv-001", &["kv"]);
    let (code, v, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    assert_eq!(code, 0, "{v}{stderr}");
    assert_eq!(v["valid"], true, "{v}");
    let services = v["services"].as_array().cloned().unwrap_or_default();
    assert_eq!(services[0]["name"], "kv", "{v}");
    assert!(
        services[0]["image"]
            .as_str()
            .is_some_and(|i| i.starts_with(&format!("{}/akbench/kv@sha256:", reg.addr))),
        "{v}"
    );
    assert_eq!(
        services[1],
        serde_json::json!({"name": "main", "depends_on": [{"service": "kv", "condition": "service_healthy"}]}),
        "{v}"
    );
}

/// `task check` of a multi-step task beside a sidecar (`harbor-steps-sidecar-001`): each
/// step's reference is solved with the service holding what the steps before it wrote (a
/// fresh service per check side, every earlier step replayed), each baseline is not; the
/// check lists the service.
#[test]
fn a_multi_step_task_with_a_sidecar_is_checked_valid_step_by_step() {
    const TEST: &str = "a_multi_step_task_with_a_sidecar_is_checked_valid_step_by_step";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (reg, dir) = sidecar_task(tmp.path(), "harbor-steps-sidecar-001", &["kv"]);
    let (code, v, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
    assert_eq!(code, 0, "{v}{stderr}");
    assert_eq!(v["valid"], true, "{v}");
    let steps = v["steps"].as_array().cloned().unwrap_or_default();
    let names: Vec<_> = steps.iter().map(|s| s["name"].clone()).collect();
    assert_eq!(names, ["approve", "ship"], "{v}");
    for s in &steps {
        assert_eq!(
            (&s["valid"], &s["reference"], &s["baseline"]),
            (
                &Value::Bool(true),
                &Value::from("solved"),
                &Value::from("not_solved")
            ),
            "{s}"
        );
    }
    assert_eq!(v["services"][0]["name"], "kv", "{v}");
}

/// `task check` of the MCP examples (an MCP-tools server; a simulated user) starts each
/// one's server: the reference solution, an MCP client, solves it; the baseline does not.
#[test]
fn the_mcp_examples_are_checked_valid_with_their_servers_running() {
    const TEST: &str = "the_mcp_examples_are_checked_valid_with_their_servers_running";
    if !runs_here(TEST) {
        return;
    }
    for (id, service) in [
        ("harbor-mcp-tools-001", "warehouse"),
        ("harbor-simulated-user-001", "user"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (reg, dir) = sidecar_task(tmp.path(), id, &[service]);
        let (code, v, stderr) = task_check(&dir, &tmp.path().join("cache"), &reg);
        assert_eq!(code, 0, "{id}: {v}{stderr}");
        assert_eq!(v["valid"], true, "{id}: {v}");
        assert_eq!(v["services"][0]["name"], service, "{id}: {v}");
    }
}

/// A worker killed with SIGKILL while an interactive world's agent runs (`akbench run
/// single`, the worker in-process) leaves nothing behind: its sidecar service dies with it
/// (each member of the world is a bwrap sandbox that dies with its parent), as do the
/// agent and its environment. Found by a marker the service's command carries and by the
/// trial's folder, which every sandbox's command line names. (Checked failing: without
/// `--die-with-parent` the service, the environment and the agent all survive.)
#[test]
fn a_worker_killed_during_a_world_attempt_leaves_no_service_running() {
    const TEST: &str = "a_worker_killed_during_a_world_attempt_leaves_no_service_running";
    if !runs_here(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (reg, dir) = sidecar_task(tmp.path(), "harbor-sidecar-kv-001", &["kv"]);
    let marker = format!("akbench-kill-marker-{}", std::process::id());
    let compose = dir.join("environment/docker-compose.yaml");
    let text = std::fs::read_to_string(&compose).unwrap();
    let from = "command: [\"python3\", \"/srv/kv.py\"]";
    assert!(text.contains(from), "{text}");
    std::fs::write(
        &compose,
        text.replace(
            from,
            &format!("command: [\"python3\", \"/srv/kv.py\", \"{marker}\"]"),
        ),
    )
    .unwrap();
    let pgrep = |pattern: &str| {
        let out = Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "single", "harbor-sidecar-kv-001", "--agent", "hang"])
        .args(["--runtime", "container", "--agent-timeout", "600"])
        .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--tasks-root")
        .arg(tmp.path().join("tasks"))
        .arg("--out")
        .arg(tmp.path().join("out"))
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    // The agent runs once its output says so; the service runs before it.
    let started = std::time::Instant::now();
    let agent_runs = || {
        walk_files(&tmp.path().join("out"), "agent.stdout.log")
            .iter()
            .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("hang: started")))
    };
    while !agent_runs() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(300),
            "the agent never started"
        );
        assert!(child.try_wait().unwrap().is_none(), "akbench ended early");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(!pgrep(&marker).is_empty(), "the service is not running");
    // SIGKILL to akbench alone: no handler runs, its sandboxes see their parent die.
    child.kill().unwrap();
    child.wait().unwrap();
    // Nothing of the attempt is left: every sandbox's command line names the trial's
    // folder (the environment's keeper, the agent, the service).
    let folder = tmp.path().display().to_string();
    let gone = std::time::Instant::now();
    while !pgrep(&marker).is_empty() || !pgrep(&folder).is_empty() {
        assert!(
            gone.elapsed() < std::time::Duration::from_secs(20),
            "the world outlived the killed worker: service {:?}, sandboxes {:?}",
            pgrep(&marker),
            pgrep(&folder)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
