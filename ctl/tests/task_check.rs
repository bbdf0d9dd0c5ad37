//! `akbench task check DIR` through the real binary, over copies of an example task: a
//! valid task passes (exit 0) and its result is reused from the cache by the task's digest;
//! a task whose starting point already passes, or whose reference solution does not solve,
//! is not valid (exit 1, the problem named); a folder without a reference solution or
//! without task.toml is bad input (exit 2).

mod common;

use common::examples;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of `pyslug-001` as `tasks/<name>` under `tmp` (the repositories beside them).
fn task(tmp: &Path, name: &str) -> PathBuf {
    let tasks = tmp.join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    if !tmp.join("repos").exists() {
        std::os::unix::fs::symlink(examples().join("repos"), tmp.join("repos")).unwrap();
    }
    let dir = tasks.join(name);
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks/pyslug-001"))
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    dir
}

fn check(tmp: &Path, dir: &Path, extra: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["task", "check"])
        .arg(dir)
        .arg("--json")
        .args(extra)
        .arg("--cache")
        .arg(tmp.join("cache"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// True when one of the check's problems contains `needle`.
fn names(v: &Value, needle: &str) -> bool {
    v["problems"].as_array().is_some_and(|p| {
        p.iter()
            .any(|p| p.as_str().is_some_and(|p| p.contains(needle)))
    })
}

#[test]
fn a_valid_task_passes_and_its_result_is_cached_by_its_digest() {
    if let Err(e) = akbench_worker::runtime::sandbox_available() {
        akbench_core::testkit::skip(
            "a_valid_task_passes_and_its_result_is_cached_by_its_digest",
            &e,
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = task(tmp.path(), "valid");
    let (code, first, stderr) = check(tmp.path(), &dir, &[]);
    assert_eq!(code, 0, "{first} {stderr}");
    assert_eq!(first["valid"], true, "{first}");
    assert_eq!(first["reference"], "solved");
    assert_eq!(first["baseline"], "not_solved");
    assert_eq!(first["runtime"], "sandbox");
    assert_eq!(first["cached"], false);
    // Graded as a trial is: the reference's tripwire twin failed as it must.
    assert_eq!(first["tripwire"], "failed as it must", "{first}");
    let cache_file = PathBuf::from(first["cache_file"].as_str().unwrap());
    assert!(cache_file.starts_with(tmp.path().join("cache/task-checks")));
    // Again: read from the cache, the same check.
    let (code, again, _) = check(tmp.path(), &dir, &[]);
    assert_eq!(code, 0);
    assert_eq!(again["cached"], true, "{again}");
    assert_eq!(again["checked_at"], first["checked_at"]);
    // --recheck runs it anew.
    let (code, fresh, _) = check(tmp.path(), &dir, &["--recheck"]);
    assert_eq!(
        (code, &fresh["cached"]),
        (0, &Value::Bool(false)),
        "{fresh}"
    );
    // A changed task is another release: checked anew, never the old result.
    std::fs::write(dir.join("instruction.md"), "Fix the slug bug (reworded).\n").unwrap();
    let (code, changed, _) = check(tmp.path(), &dir, &[]);
    assert_eq!(code, 0);
    assert_eq!(changed["cached"], false, "{changed}");
    assert_ne!(changed["digest"], first["digest"]);
}

#[test]
fn a_task_the_unchanged_start_passes_or_the_reference_fails_is_not_valid() {
    if let Err(e) = akbench_worker::runtime::sandbox_available() {
        akbench_core::testkit::skip(
            "a_task_the_unchanged_start_passes_or_the_reference_fails_is_not_valid",
            &e,
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Without the mutation, the starting point already passes the tests.
    let no_bug = task(tmp.path(), "no-bug");
    let toml = std::fs::read_to_string(no_bug.join("task.toml")).unwrap();
    let cut = toml.find("[mutation]").unwrap();
    std::fs::write(no_bug.join("task.toml"), &toml[..cut]).unwrap();
    let (code, v, stderr) = check(tmp.path(), &no_bug, &[]);
    assert_eq!(code, 1, "{v} {stderr}");
    assert_eq!(v["valid"], false);
    assert_eq!(v["baseline"], "solved");
    assert!(names(&v, "already solves"), "{v}");
    // A reference solution that changes nothing does not solve.
    let lazy = task(tmp.path(), "lazy-solution");
    std::fs::write(
        lazy.join("solution/solve.sh"),
        "#!/usr/bin/env bash\nexit 0\n",
    )
    .unwrap();
    let (code, v, _) = check(tmp.path(), &lazy, &[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["reference"], "not_solved", "{v}");
    assert!(names(&v, "reference solution does not solve"), "{v}");
    assert!(!names(&v, "already solves"), "{v}");
}

/// `task check` grades the reference as a trial's grade is made, tampering checks included:
/// a task whose own test script leaves what grading reads as tampering (here it makes the
/// verifier folder read-only after writing its reward) could never have an honest solution
/// graded solved, and is not valid, naming why. A task whose test script runs quietly
/// (`unittest` without `-v`, through `tail`: no test name in the output) is valid, its twin
/// failing as it must.
#[test]
fn a_task_whose_grading_flags_its_reference_is_not_valid_and_a_quiet_one_is_valid() {
    if let Err(e) = akbench_worker::runtime::sandbox_available() {
        akbench_core::testkit::skip(
            "a_task_whose_grading_flags_its_reference_is_not_valid_and_a_quiet_one_is_valid",
            &e,
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let flagged = task(tmp.path(), "read-only-verifier");
    let sh = std::fs::read_to_string(flagged.join("tests/test.sh")).unwrap();
    let sh = sh.replace(
        "exec \"$PY\" \"$AKBENCH_TESTS_DIR/run_tests.py\"",
        "\"$PY\" \"$AKBENCH_TESTS_DIR/run_tests.py\"\nchmod a-w \"$AKBENCH_VERIFIER_DIR\"",
    );
    assert!(sh.contains("chmod a-w"), "{sh}");
    std::fs::write(flagged.join("tests/test.sh"), sh).unwrap();
    let (code, v, stderr) = check(tmp.path(), &flagged, &[]);
    assert_eq!(code, 1, "{v} {stderr}");
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(v["reference"], "tampered", "{v}");
    assert!(names(&v, "flags the reference solution"), "{v}");
    assert!(names(&v, "read-only"), "the grader's cause is named: {v}");

    let quiet = task(tmp.path(), "quiet");
    std::fs::write(
        quiet.join("tests/test.sh"),
        "set -uo pipefail\nexport PYTHONDONTWRITEBYTECODE=1\ncd \"$AKBENCH_WORKSPACE\"\n\
         python3 -m unittest discover -s \"$AKBENCH_TESTS_DIR\" -p 'test_hidden.py' -t \"$AKBENCH_TESTS_DIR\" 2>&1 | tail -3\n\
         if [ \"${PIPESTATUS[0]}\" -eq 0 ]; then echo 1 > \"$AKBENCH_VERIFIER_DIR/reward.txt\"; else echo 0 > \"$AKBENCH_VERIFIER_DIR/reward.txt\"; fi\n",
    )
    .unwrap();
    let (code, v, stderr) = check(tmp.path(), &quiet, &[]);
    assert_eq!(code, 0, "{v} {stderr}");
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["tripwire"], "failed as it must", "{v}");
}

#[test]
fn a_folder_without_a_solution_or_a_task_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = task(tmp.path(), "no-solution");
    std::fs::remove_dir_all(bare.join("solution")).unwrap();
    let (code, _, stderr) = check(tmp.path(), &bare, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no reference solution") && stderr.contains("solution/solve.sh"),
        "{stderr}"
    );
    let (code, _, stderr) = check(tmp.path(), tmp.path(), &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no task.toml"), "{stderr}");
    assert!(!tmp.path().join("cache/task-checks").exists());
}

/// `run plan` in `tmp` over its `tasks/` folder (the examples' agents), with `extra` flags;
/// the cache is the one the checks above write.
fn plan(tmp: &Path, include: &str, extra: &[&str]) -> (i32, Value, String) {
    let manifest = tmp.join(format!("experiment-{include}.yaml"));
    std::fs::write(
        &manifest,
        format!(
            "experiment: checks\ntasks:\n  root: tasks\n  include: [\"{include}\"]\nagents:\n  root: {}\n  conditions:\n    - descriptor: noop\nrepetitions: 1\nexecution:\n  runtime: sandbox\n",
            examples().join("agents").display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "plan", "--json", "--config"])
        .arg(&manifest)
        .arg("--store-root")
        .arg(tmp.join("runs"))
        .arg("--cache")
        .arg(tmp.join("cache"))
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The spec a plan stored (its provenance holds the task checks).
fn stored_spec(tmp: &Path, run_key: &str) -> Value {
    let bytes = std::fs::read(tmp.join("runs").join(run_key).join("spec.json")).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A plan records the check of each task release that has one (cached by `task check`, or
/// run by `--check-tasks`) in its spec, says which tasks were not checked, and refuses a
/// task whose check is not valid, writing nothing.
#[test]
fn a_plan_records_the_task_checks_and_refuses_an_invalid_task() {
    let test = "a_plan_records_the_task_checks_and_refuses_an_invalid_task";
    if let Err(e) = akbench_worker::runtime::sandbox_available() {
        akbench_core::testkit::skip(test, &e);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let valid = task(tmp.path(), "valid-a");
    // Not checked yet: planned, and said so.
    let (code, v, stderr) = plan(tmp.path(), "valid-a", &[]);
    assert_eq!(code, 0, "{v} {stderr}");
    assert_eq!(v["task_checks"]["valid"], 0, "{v}");
    assert_eq!(
        v["task_checks"]["unchecked"],
        serde_json::json!(["valid-a"])
    );
    let spec = stored_spec(tmp.path(), v["run_key"].as_str().unwrap());
    assert!(spec["provenance"].get("task_checks").is_none(), "{spec}");
    // Checked by `task check`: the plan records that check.
    let (code, checked, _) = check(tmp.path(), &valid, &[]);
    assert_eq!(code, 0, "{checked}");
    let (code, v, stderr) = plan(tmp.path(), "valid-a", &[]);
    assert_eq!(code, 0, "{v} {stderr}");
    assert_eq!(v["task_checks"]["valid"], 1, "{v}");
    assert_eq!(v["task_checks"]["run_now"], 0, "{v}");
    let spec = stored_spec(tmp.path(), v["run_key"].as_str().unwrap());
    let recorded = &spec["provenance"]["task_checks"];
    assert_eq!(recorded.as_array().map(Vec::len), Some(1), "{spec}");
    assert_eq!(recorded[0]["digest"], checked["digest"]);
    assert_eq!(recorded[0]["checked_at"], checked["checked_at"]);
    assert_eq!(recorded[0]["valid"], true);
    assert_eq!(
        v["spec_digest"], spec["digest"],
        "the recorded checks are sealed"
    );
    // A task whose unchanged start already passes: --check-tasks finds it, the plan is
    // refused (exit 2) naming it, and nothing is stored.
    let no_bug = task(tmp.path(), "no-bug");
    let toml = std::fs::read_to_string(no_bug.join("task.toml")).unwrap();
    let cut = toml.find("[mutation]").unwrap();
    std::fs::write(no_bug.join("task.toml"), &toml[..cut]).unwrap();
    let runs_before = std::fs::read_dir(tmp.path().join("runs")).unwrap().count();
    let (code, v, stderr) = plan(tmp.path(), "no-bug", &["--check-tasks"]);
    assert_eq!(code, 2, "{v} {stderr}");
    assert!(
        stderr.contains("task `no-bug`")
            && stderr.contains("already solves")
            && stderr.contains("--recheck"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(tmp.path().join("runs")).unwrap().count(),
        runs_before,
        "nothing stored"
    );
    // The failed check is cached: refused again without --check-tasks.
    let (code, _, stderr) = plan(tmp.path(), "no-bug", &[]);
    assert_eq!(code, 2, "{stderr}");
    // --check-tasks checks what has no check yet, and records it.
    let b = task(tmp.path(), "valid-b");
    // Another release (a copy with the same files has the same digest, and the same check).
    std::fs::write(b.join("instruction.md"), "Fix the slug bug (task b).\n").unwrap();
    let (code, v, stderr) = plan(tmp.path(), "valid-*", &["--check-tasks"]);
    assert_eq!(code, 0, "{v} {stderr}");
    assert_eq!(v["task_checks"]["valid"], 2, "{v}");
    assert_eq!(v["task_checks"]["run_now"], 1, "{v}");
    assert_eq!(v["task_checks"]["unchecked"], serde_json::json!([]), "{v}");
}

/// A copy of `examples/tasks/<example>` as `tasks/<name>`, its task.toml edited by `edit`.
fn copy_edited(tmp: &Path, example: &str, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let dir = task(tmp, name);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks").join(example))
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    let toml = dir.join("task.toml");
    std::fs::write(&toml, edit(std::fs::read_to_string(&toml).unwrap())).unwrap();
    dir
}

#[test]
fn harbor_keys_harbor_ignores_are_listed_by_task_check_with_why() {
    const TEST: &str = "harbor_keys_harbor_ignores_are_listed_by_task_check_with_why";
    if let Err(e) = akbench_worker::runtime::sandbox_available() {
        akbench_core::testkit::skip(TEST, &e);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // pyslug-001 with Terminal-Bench 2.1's Harbor keys beside akbench's.
    let dir = copy_edited(tmp.path(), "pyslug-001", "harbor-keys", |t| {
        format!(
            "schema_version = \"1.1\"\nartifacts = []\ncolour = \"red\"\n{}\n[task]\nname = \"terminal-bench/harbor-keys\"\ndescription = \"d\"\nkeywords = [\"k\"]\n\n[environment]\ngpus = 0\nmcp_servers = []\nallow_internet = false\nstorage_mb = 10240\n\n[environment.env]\n\n[solution.env]\n",
            t.trim_end()
        )
    });
    let (code, v, stderr) = check(tmp.path(), &dir, &[]);
    assert_eq!(code, 0, "{v} {stderr}");
    let fields = v["fields"].as_array().cloned().unwrap_or_default();
    let handling = |f: &str| {
        fields.iter().find(|u| u["field"] == f).map(|u| {
            (
                u["handling"].as_str().unwrap_or_default().to_string(),
                u["why"].as_str().unwrap_or_default().to_string(),
            )
        })
    };
    for (field, want) in [
        ("schema_version", "applied"),
        ("artifacts", "applied"),
        ("task.name", "applied"),
        ("environment.gpus", "applied"),
        ("environment.storage_mb", "applied"),
        ("task.description", "ignored"),
        ("task.keywords", "ignored"),
        ("colour", "ignored"),
    ] {
        let (got, why) = handling(field).unwrap_or_else(|| panic!("{field} not listed: {v}"));
        assert_eq!(got, want, "{field}: {v}");
        assert!(!why.is_empty(), "{field}: {v}");
    }
    assert_eq!(v["network"]["agent"]["mode"], "no-network", "{v}");
    assert_eq!(v["harbor_name"], "terminal-bench/harbor-keys", "{v}");
    // The text output lists what is ignored, with why.
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["task", "check"])
        .arg(&dir)
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ignored: colour: not a field of Harbor 0.25")
            && text.contains("ignored: task.description: registry information")
            && text.contains("network: agent no-network, verifier no-network"),
        "{text}"
    );
}

#[test]
fn a_dockerfile_only_task_loads_and_is_told_to_build_its_image() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_edited(tmp.path(), "tb-wordfreq-001", "dockerfile-only", |t| {
        t.lines()
            .filter(|l| !l.starts_with("docker_image"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    // No --runtime: the task is image-only, so `container` is picked; its image is unbuilt.
    let (code, v, stderr) = check(tmp.path(), &dir, &[]);
    assert_eq!(code, 2, "{v} {stderr}");
    assert!(
        stderr.contains("has no image yet") && stderr.contains("akbench image build"),
        "{stderr}"
    );
    // A key a task cannot have here is refused naming the file, the key and the fix.
    let dir = copy_edited(tmp.path(), "tb-wordfreq-001", "gpu", |t| {
        format!("{t}gpus = 2\n")
    });
    let (code, v, stderr) = check(tmp.path(), &dir, &[]);
    assert_eq!(code, 2, "{v} {stderr}");
    assert!(
        stderr.contains("task.toml")
            && stderr.contains("field `environment.gpus`")
            && stderr.contains("fix: remove it (or set 0)"),
        "{stderr}"
    );
}

/// A task with sidecar services (environment/docker-compose.yaml, issue 46) loads; under
/// `container` its check starts them (here their images cannot be pulled: not checked,
/// exit 3, naming the image; the example is checked valid with its service in
/// `ctl/tests/container.rs`); under another runtime it is bad input naming the fix; a
/// compose file it cannot run is bad input naming the file, the service, the key and the
/// fix.
#[test]
fn a_task_with_sidecars_is_checked_only_with_its_services() {
    let tmp = tempfile::tempdir().unwrap();
    let hex = "c".repeat(64);
    let dir = copy_edited(tmp.path(), "tb-wordfreq-001", "compose", |t| {
        t.replace(
            "docker_image = \"127.0.0.1:5000/akbench/tb-wordfreq-001:1.0\"",
            &format!("docker_image = \"127.0.0.1:5000/akbench/tb-wordfreq-001@sha256:{hex}\""),
        )
    });
    let compose = dir.join("environment/docker-compose.yaml");
    std::fs::write(
        &compose,
        format!(
            "services:\n  main:\n    depends_on:\n      api: {{condition: service_healthy}}\n  db:\n    image: reg.example/db@sha256:{hex}\n  api:\n    image: reg.example/api@sha256:{hex}\n    depends_on: [db]\n    healthcheck:\n      test: [\"CMD\", \"true\"]\n"
        ),
    )
    .unwrap();
    let (code, v, stderr) = check(tmp.path(), &dir, &[]);
    assert_eq!(code, 3, "{v} {stderr}");
    assert!(
        stderr.contains("failed to check task") && stderr.contains("127.0.0.1:5000"),
        "{stderr}"
    );
    // Not under another runtime: bad input naming the runtime and the fix.
    let (code, _, stderr) = check(tmp.path(), &dir, &["--runtime", "sandbox"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("only the `container` runtime starts"),
        "{stderr}"
    );
    // A key that cannot take effect: refused naming the file, the service and the key.
    std::fs::write(
        &compose,
        format!(
            "services:\n  db:\n    image: reg.example/db@sha256:{hex}\n    volumes: [\"./d:/d\"]\n"
        ),
    )
    .unwrap();
    let (code, _, stderr) = check(tmp.path(), &dir, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("environment/docker-compose.yaml")
            && stderr.contains("service `db`: `volumes` cannot take effect")
            && stderr.contains("fix:"),
        "{stderr}"
    );
}

/// A multi-step task (`[[steps]]`, issue 46) loads; `task check` under another runtime than
/// `container` is bad input naming the fix; a plan holding it is made under the
/// `container` runtime (its family counted) and refused under another, writing nothing; its
/// run exports to Harbor with its steps.
#[test]
fn a_multi_step_task_is_checked_and_planned_only_under_container() {
    planned_only_under_container("harbor-steps-001", "steps", "lifecycle", &[]);
}

/// A task with sidecar services (issue 46) is checked and planned only under `container`
/// (its family counted); its run exports to Harbor with its compose file and services.
#[test]
fn a_task_with_sidecars_is_planned_only_under_container_and_exported() {
    planned_only_under_container("harbor-sidecar-kv-001", "sidecar", "interactive", &["kv"]);
}

/// A multi-step task with a sidecar (`harbor-steps-sidecar-001`) is a lifecycle: checked and
/// planned only under `container` once its service is built, exported with its steps,
/// compose file and the service's folder.
#[test]
fn a_multi_step_task_with_a_sidecar_is_planned_only_under_container_and_exported() {
    planned_only_under_container("harbor-steps-sidecar-001", "stepkv", "lifecycle", &["kv"]);
}

/// The MCP examples (an MCP-tools sidecar; a simulated user, issue 46) are sidecar tasks
/// like the kv example: checked and planned only under `container`, exported with them.
#[test]
fn the_mcp_examples_are_planned_only_under_container_and_exported() {
    for (example, service) in [
        ("harbor-mcp-tools-001", "warehouse"),
        ("harbor-simulated-user-001", "user"),
    ] {
        planned_only_under_container(example, service, "interactive", &[service]);
    }
}

/// A multi-step task export-harbor cannot write faithfully (an akbench `[verifier] command`,
/// which Harbor would not run) is refused naming the task, the key and the fix, writing
/// nothing.
#[test]
fn a_multi_step_task_harbor_would_grade_otherwise_is_not_exported() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = tmp.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let dir = tasks.join("harbor-steps-001");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks/harbor-steps-001"))
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    let toml = toml
        .replacen(
            "workdir = \"/app\"",
            &format!(
                "workdir = \"/app\"\ndocker_image = \"reg.example/s@sha256:{}\"",
                "a".repeat(64)
            ),
            1,
        )
        .replacen(
            "[verifier]\n",
            "[verifier]\ncommand = [\"bash\", \"{tests_dir}/test.sh\"]\n",
            1,
        );
    std::fs::write(dir.join("task.toml"), toml).unwrap();
    let manifest = tmp.path().join("e.yaml");
    std::fs::write(
        &manifest,
        format!(
            "experiment: steps\ntasks:\n  root: tasks\n  include: [\"harbor-steps-001\"]\nagents:\n  root: {}\n  conditions:\n    - descriptor: oracle\nrepetitions: 1\nexecution:\n  runtime: container\n",
            examples().join("agents").display()
        ),
    )
    .unwrap();
    let akbench = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(args)
            .arg("--store-root")
            .arg(tmp.path().join("runs"))
            .arg("--cache")
            .arg(tmp.path().join("cache"))
            .output()
            .unwrap()
    };
    let out = akbench(&[
        "run",
        "plan",
        "--json",
        "--config",
        manifest.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let harbor = tmp.path().join("harbor");
    let out = akbench(&[
        "run",
        "export-harbor",
        plan["run_key"].as_str().unwrap(),
        "--out",
        harbor.to_str().unwrap(),
        "--base-image",
        &format!("reg.example/base@sha256:{}", "b".repeat(64)),
        "--tasks-root",
        tasks.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("task harbor-steps-001 is a multi-step task (3 `[[steps]]`) with a `[verifier] command`")
            && stderr.contains("fix:"),
        "{stderr}"
    );
    assert!(!harbor.exists());
}

/// The example `example` copied with a pinned image: `task check` and a plan under `sandbox`
/// are bad input naming `container`; planned under `container` as experiment `experiment`
/// its family is counted; `run export-harbor` of that run writes the task in Harbor's
/// layout ([`exported_as_harbor_reads_it`]).
fn planned_only_under_container(example: &str, experiment: &str, family: &str, built: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tasks").join(example);
    std::fs::create_dir_all(tmp.path().join("tasks")).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks").join(example))
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    // A pinned image (planning pulls nothing).
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    let pinned = format!(
        "workdir = \"/app\"\ndocker_image = \"reg.example/{experiment}@sha256:{}\"",
        "a".repeat(64)
    );
    std::fs::write(
        dir.join("task.toml"),
        toml.replacen("workdir = \"/app\"", &pinned, 1),
    )
    .unwrap();
    let plan = |runtime: &str, store: &str| {
        let manifest = tmp.path().join(format!("{runtime}.yaml"));
        std::fs::write(
            &manifest,
            format!(
                "experiment: {experiment}\ntasks:\n  root: tasks\n  include: [\"{example}\"]\nagents:\n  root: {}\n  conditions:\n    - descriptor: oracle\nrepetitions: 1\nexecution:\n  runtime: {runtime}\n",
                examples().join("agents").display()
            ),
        )
        .unwrap();
        Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(["run", "plan", "--config"])
            .arg(&manifest)
            .arg("--store-root")
            .arg(tmp.path().join(store))
            .arg("--cache")
            .arg(tmp.path().join("cache"))
            .output()
            .unwrap()
    };
    // Services built from `build:` (the examples, as Harbor authors write them): refused
    // by `task check` and plans until `akbench image build` has pinned them in task.toml.
    if !built.is_empty() {
        let (code, _, stderr) = check(tmp.path(), &dir, &["--runtime", "container"]);
        assert_eq!(code, 2, "{stderr}");
        let out = plan("container", "runs-unbuilt");
        let planned = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{planned}");
        for stderr in [stderr.as_str(), &planned] {
            assert!(
                stderr.contains(&format!("no image yet ({})", built.join(", ")))
                    && stderr.contains("fix: run `akbench image build"),
                "{stderr}"
            );
        }
        assert!(!tmp.path().join("runs-unbuilt").exists());
        let mut toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
        toml.push_str("\n[environment.service_images]\n");
        for s in built {
            toml.push_str(&format!(
                "{s} = \"reg.example/{s}@sha256:{}\"\n",
                "c".repeat(64)
            ));
        }
        std::fs::write(dir.join("task.toml"), toml).unwrap();
    }
    // It runs only under `container` (checked there: ctl/tests/container.rs).
    let (code, _, stderr) = check(tmp.path(), &dir, &["--runtime", "sandbox"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(example) && stderr.contains("container") && stderr.contains("fix:"),
        "{stderr}"
    );
    assert!(!tmp.path().join("cache/task-checks").exists());
    let out = plan("sandbox", "runs-sandbox");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(example) && stderr.contains("runtime: container"),
        "{stderr}"
    );
    assert!(!tmp.path().join("runs-sandbox").exists());
    let out = plan("container", "runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("families {family}=1")), "{stdout}");
    // Its run exports to Harbor in Harbor's layout.
    let key = stdout
        .lines()
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with(&format!("{experiment}-")))
        })
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '-')
                .to_string()
        });
    let key = key.unwrap_or_else(|| panic!("no run key in {stdout}"));
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "export-harbor", &key, "--out"])
        .arg(tmp.path().join("harbor"))
        // No base image: a task in Harbor's layout is exported from its own image.
        .env_remove("AKBENCH_HARBOR_BASE_IMAGE")
        .arg("--store-root")
        .arg(tmp.path().join("runs"))
        .arg("--tasks-root")
        .arg(tmp.path().join("tasks"))
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let image = format!("reg.example/{experiment}@sha256:{}", "a".repeat(64));
    exported_as_harbor_reads_it(&dir, &tmp.path().join("harbor"), &key, &image);
}

/// The export `out` of run `key` holds one trial of the task `task` (its image pinned as
/// `image`) in Harbor's layout: every file of the task copied byte for byte (its steps'
/// instructions, tests, solutions, workdirs and setup scripts; its compose file and each
/// service's build folder) but task.toml and environment/Dockerfile; the Dockerfile
/// `FROM` the pinned image; task.toml the task's own (its `[[steps]]`, strategy, artifacts
/// and network as written) with what the plan fixed written over it and the image key
/// dropped; the manifest names the steps.
fn exported_as_harbor_reads_it(task: &Path, out: &Path, key: &str, image: &str) {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("akbench-harbor.json")).unwrap()).unwrap();
    let trials = manifest["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 1, "{manifest}");
    let trial = out.join(trials[0]["path"].as_str().unwrap());
    fn files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let (mut want, mut got) = (Vec::new(), Vec::new());
    files(task, task, &mut want);
    files(&trial, &trial, &mut got);
    want.sort();
    got.sort();
    assert_eq!(got, want, "the same files");
    for f in &want {
        let p = f.to_str().unwrap();
        if p == "task.toml" || p == "environment/Dockerfile" {
            continue;
        }
        assert_eq!(
            std::fs::read(trial.join(f)).unwrap(),
            std::fs::read(task.join(f)).unwrap(),
            "{p} copied as it is"
        );
    }
    let mode =
        |p: &Path| std::os::unix::fs::PermissionsExt::mode(&p.metadata().unwrap().permissions());
    for f in want
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "sh"))
    {
        assert_eq!(mode(&trial.join(f)), mode(&task.join(f)), "{}", f.display());
    }
    let docker = std::fs::read_to_string(trial.join("environment/Dockerfile")).unwrap();
    assert!(docker.contains(&format!("\nFROM {image}\n")), "{docker}");
    let read =
        |p: &Path| -> toml::Table { toml::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (mut original, mut exported) = (
        read(&task.join("task.toml")),
        read(&trial.join("task.toml")),
    );
    assert_eq!(
        exported["metadata"]["akbench_run_key"].as_str(),
        Some(key),
        "{exported}"
    );
    assert_eq!(
        exported["metadata"]["akbench_trial_id"].as_str(),
        trials[0]["trial_id"].as_str()
    );
    assert!(exported["task"]["name"]
        .as_str()
        .unwrap()
        .starts_with("akbench/"));
    // Apart from what the plan fixed (the same values here), the task's own task.toml.
    for t in [&mut original, &mut exported] {
        t.remove("task");
        t.remove("version");
        let meta = t
            .get_mut("metadata")
            .and_then(|m| m.as_table_mut())
            .unwrap();
        meta.retain(|k, _| !k.starts_with("akbench_"));
        let env = t["environment"].as_table_mut().unwrap();
        env.remove("docker_image");
        env.remove("cpus");
        env.remove("memory_mb");
    }
    assert_eq!(exported, original);
    let steps: Vec<&str> = original
        .get("steps")
        .and_then(|s| s.as_array())
        .map(|s| s.iter().map(|s| s["name"].as_str().unwrap()).collect())
        .unwrap_or_default();
    let listed: Vec<&str> = trials[0]
        .get("steps")
        .and_then(|s| s.as_array())
        .map(|s| s.iter().map(|s| s.as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(listed, steps);
}
