//! The Harbor transport round trip: plan, export, Harbor results written by the test in
//! Harbor's documented `TrialResult` shape, import, reconcile, run records; and the export's
//! base image pinned through a real loopback registry.

#[path = "../../worker/tests/common/registry.rs"]
#[allow(dead_code)]
mod registry;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn akbench(tmp: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .arg("--store-root")
        .arg(tmp.join("runs"))
        .env_remove("AKBENCH_COORDINATOR")
        .env_remove("AKBENCH_TASKS_ROOT")
        .output()
        .unwrap()
}

/// Plans the experiment `yaml` over the example tasks and agents; its run key.
fn planned(t: &Path, yaml: &str) -> String {
    let manifest = t.join("experiment.yaml");
    std::fs::write(&manifest, yaml).unwrap();
    let plan = ok_json(
        &akbench(
            t,
            &[
                "run",
                "plan",
                "--json",
                "--config",
                manifest.to_str().unwrap(),
                "--tasks-root",
                examples().join("tasks").to_str().unwrap(),
                "--agents-root",
                examples().join("agents").to_str().unwrap(),
            ],
        ),
        0,
    );
    plan["run_key"].as_str().unwrap().to_string()
}

/// `run export-harbor` of run `key` into `out` over the example tasks, FROM `base`.
fn export(t: &Path, key: &str, out: &Path, base: &str, extra: &[&str]) -> Output {
    let cache = t.join("cache");
    let tasks = examples().join("tasks");
    let args = [
        "run",
        "export-harbor",
        key,
        "--out",
        out.to_str().unwrap(),
        "--tasks-root",
        tasks.to_str().unwrap(),
        "--base-image",
        base,
        "--cache",
        cache.to_str().unwrap(),
    ];
    akbench(t, &[&args[..], extra].concat())
}

/// `run import-harbor` of run `key` from the Harbor jobs folder `jobs`, exported to `out`.
fn import(t: &Path, key: &str, jobs: &Path, out: &Path, extra: &[&str]) -> Output {
    let (jobs, out) = (jobs.to_str().unwrap(), out.to_str().unwrap());
    let args = ["run", "import-harbor", key, jobs, "--export", out];
    akbench(t, &[&args[..], extra].concat())
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The command exited with `code` (else its stderr is shown).
fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn ok_json(o: &Output, code: i32) -> Value {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A Harbor trial result (`src/harbor/models/trial/result.py`) for the exported task folder
/// `task_path`, ending with `exception` (a type name) and/or `rewards`.
fn harbor_result(
    task_path: &str,
    name: &str,
    exception: Option<&str>,
    rewards: Option<Value>,
) -> Value {
    json!({
        "id": format!("{name}-id"),
        "task_name": "akbench/pyslug",
        "trial_name": format!("{name}__Ab3dE9x"),
        "trial_uri": format!("file:///jobs/{name}"),
        "task_id": {"path": task_path},
        "source": null,
        "task_checksum": "sha256:0",
        "config": {
            "task": {"path": task_path, "git_url": null, "git_commit_id": null, "overwrite": false, "download_dir": null, "source": null},
            "trial_name": format!("{name}__Ab3dE9x"),
            "trials_dir": "jobs-out/job",
            "timeout_multiplier": 1.0,
            "agent": {"name": "oracle", "import_path": null, "model_name": null, "override_timeout_sec": null, "kwargs": {}},
            "environment": {"type": "docker", "force_build": false, "delete": true, "kwargs": {}},
            "verifier": {"override_timeout_sec": null, "disable": false},
            "job_id": "00000000-0000-0000-0000-000000000000"
        },
        "agent_info": {"name": "oracle", "version": "1.0.0", "model_info": null},
        "agent_result": {"n_input_tokens": 1000, "n_cache_tokens": 400, "n_output_tokens": 50, "cost_usd": 0.5, "rollout_details": null, "metadata": null},
        "verifier_result": rewards.map(|r| json!({"rewards": r})),
        "exception_info": exception.map(|t| json!({
            "exception_type": t,
            "exception_message": "from the test",
            "exception_traceback": "Traceback (most recent call last): ...",
            "occurred_at": "2026-11-30T12:00:00Z"
        })),
        "started_at": "2026-11-30T11:59:00Z",
        "finished_at": "2026-11-30T12:00:00Z",
        "environment_setup": null,
        "agent_setup": null,
        "agent_execution": null,
        "verifier": null
    })
}

fn write(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// A pinned base image (the export writes it into every Dockerfile; nothing here pulls it).
const BASE: &str = "127.0.0.1:5000/akbench/harbor-base@sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap()
}

fn git_ok(dir: &Path, args: &[&str]) -> String {
    let o = git(dir, args);
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The exported environment of one trial holds the task's baseline and nothing that leads
/// to the fix: the build context is the Dockerfile and the baseline repository only (no
/// bundle, no patch); the workspace built as the Dockerfile builds it (the repository copied
/// to /app/.git, `git reset --hard`) has one parentless commit, no other ref, no stash, no
/// uncommitted change, the mutation applied, and neither the pinned commit nor the original
/// content of any file the mutation changed.
fn baseline_gives_nothing_away(trial: &Path, task: &Path) {
    let mut context: Vec<String> = std::fs::read_dir(trial.join("environment"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    context.sort();
    assert_eq!(
        context,
        ["Dockerfile", "baseline.git"],
        "{}",
        trial.display()
    );
    let scratch = tempfile::tempdir().unwrap();
    let app = scratch.path().join("app");
    std::fs::create_dir_all(&app).unwrap();
    let cp = Command::new("cp")
        .arg("-r")
        .arg(trial.join("environment/baseline.git"))
        .arg(app.join(".git"))
        .status()
        .unwrap();
    assert!(cp.success());
    git_ok(&app, &["reset", "--quiet", "--hard"]);
    let log = git_ok(&app, &["log", "--format=%H %P", "--all", "HEAD"]);
    let commits: Vec<&str> = log.lines().collect();
    assert_eq!(commits.len(), 1, "one commit: {log}");
    assert_eq!(commits[0].split(' ').nth(1), Some(""), "parentless: {log}");
    assert_eq!(git_ok(&app, &["stash", "list"]), "");
    assert_eq!(git_ok(&app, &["status", "--porcelain"]), "");
    assert_eq!(git_ok(&app, &["for-each-ref"]), "", "no refs");
    // The mutation is applied: it reverses cleanly.
    let patch = task.join("mutation.patch");
    git_ok(&app, &["apply", "--check", "-R", patch.to_str().unwrap()]);
    // The pinned commit and the pre-mutation content of each changed file are absent.
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    let commit = toml
        .lines()
        .find_map(|l| l.strip_prefix("commit = \""))
        .unwrap()
        .trim_end_matches('"');
    assert!(
        !git(&app, &["cat-file", "-e", commit]).status.success(),
        "pinned commit {commit} absent"
    );
    let source = Command::new("git")
        .arg("clone")
        .arg("--quiet")
        .arg(examples().join("repos/pyslug.bundle"))
        .arg(scratch.path().join("source"))
        .status()
        .unwrap();
    assert!(source.success());
    let src = scratch.path().join("source");
    git_ok(&src, &["checkout", "--quiet", commit]);
    let text = std::fs::read_to_string(&patch).unwrap();
    let changed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("--- a/"))
        .collect();
    assert!(!changed.is_empty());
    for f in changed {
        let blob = git_ok(&src, &["rev-parse", &format!("{commit}:{f}")]);
        let blob = blob.trim();
        assert!(
            !git(&app, &["cat-file", "-e", blob]).status.success(),
            "the original {f} ({blob}) is not in the exported repository"
        );
    }
}

#[test]
fn export_harbor_results_import_and_reconcile() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let key = planned(
        t,
        "experiment: hb\ntasks:\n  ids: [pyslug-001, pyslug-002, pyslug-003]\nagents:\n  conditions:\n    - descriptor: oracle\nrepetitions: 2\n",
    );
    let tasks = examples().join("tasks");

    // Export.
    let out = t.join("harbor");
    let v = ok_json(&export(t, &key, &out, BASE, &["--json"]), 0);
    assert_eq!(v["trials"], 6);
    let m: Value = read_json(&out.join("akbench-harbor.json"));
    let trials = m["trials"].as_array().unwrap().clone();
    assert_eq!(trials.len(), 6);
    let job: Value = read_json(&out.join("jobs/oracle.json"));
    assert_eq!(job["n_attempts"], 1);
    assert_eq!(job["agents"][0]["name"], "oracle");
    let paths: Vec<&str> = job["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap())
        .collect();
    for tr in &trials {
        let id = tr["trial_id"].as_str().unwrap();
        let path = format!("trials/{id}");
        assert!(paths.contains(&path.as_str()), "the job carries trial {id}");
        let dir = out.join(&path);
        let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
        assert!(
            toml.contains(&format!("akbench_trial_id = \"{id}\"")),
            "{toml}"
        );
        assert!(toml.contains("schema_version = \"1.4\""), "{toml}");
        assert!(dir.join("instruction.md").is_file());
        assert!(dir.join("solution/solve.sh").is_file());
        assert!(dir.join("tests/akbench/test_hidden.py").is_file());
        baseline_gives_nothing_away(&dir, &tasks.join(tr["task"].as_str().unwrap()));
        let docker = std::fs::read_to_string(dir.join("environment/Dockerfile")).unwrap();
        assert!(docker.contains(&format!("FROM {BASE}\n")), "{docker}");
        assert!(
            toml.contains("user = \"agent\"")
                && toml.contains("environment_mode = \"separate\"")
                && toml.contains("AKBENCH_SOLUTION_DIR = \"/solution\""),
            "{toml}"
        );
        let sh = Command::new("bash")
            .arg("-n")
            .arg(dir.join("tests/test.sh"))
            .status()
            .unwrap();
        assert!(sh.success(), "tests/test.sh parses");
    }
    // A base image that is not a reference, or a tag that cannot be pinned (no registry
    // answers on this port), is refused before anything is written.
    for bad in ["Not An Image!", "127.0.0.1:9/akbench/nowhere:latest"] {
        let elsewhere = t.join("harbor-bad");
        let o = export(t, &key, &elsewhere, bad, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--base-image"), "{bad}: {err}");
        assert!(!elsewhere.exists(), "{bad}: nothing written");
    }
    // Without a base image, a run with tasks exported from their baseline is refused,
    // naming them and the flag, and writes nothing.
    let elsewhere = t.join("harbor-no-base");
    let tasks_root = examples().join("tasks");
    let args = [
        "run",
        "export-harbor",
        key.as_str(),
        "--out",
        elsewhere.to_str().unwrap(),
        "--tasks-root",
        tasks_root.to_str().unwrap(),
    ];
    let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .arg("--store-root")
        .arg(t.join("runs"))
        .env_remove("AKBENCH_HARBOR_BASE_IMAGE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--base-image")
            && err.contains("fix:")
            && err.contains("exported from their baseline"),
        "{err}"
    );
    assert!(!elsewhere.exists(), "nothing written");
    // Exporting over a non-empty folder is refused and changes nothing.
    assert_exit(&export(t, &key, &out, BASE, &[]), 2);

    // Harbor ran: one result per trial but the last (never run), in Harbor's layout, and the
    // job's own statistics file.
    let jobs = out.join("jobs-out");
    let job_dir = jobs.join(format!("{key}-oracle"));
    write(
        &job_dir.join("result.json"),
        &json!({"id": "job", "n_total_trials": 6, "stats": {"n_trials": 5, "n_errors": 3}}),
    );
    let cases: [(Option<&str>, Option<Value>, &str); 6] = [
        (None, Some(json!({"reward": 1.0})), "succeeded"),
        // Harbor's error policy: the agent's outcome (its budget spent), graded by the reward.
        (
            Some("ContextLengthExceededError"),
            Some(json!({"reward": 0.0})),
            "failed",
        ),
        (
            Some("AgentTimeoutError"),
            Some(json!({"reward": 0.0})),
            "timed_out",
        ),
        (
            Some("EnvironmentStartTimeoutError"),
            None,
            "infrastructure_error",
        ),
        (Some("RewardFileNotFoundError"), None, "evaluation_error"),
        (None, None, "missing"),
    ];
    for (i, (exception, rewards, _)) in cases.iter().enumerate().take(5) {
        let path = trials[i]["path"].as_str().unwrap();
        let name = format!("pyslug-{i}");
        let mut result = harbor_result(path, &name, *exception, rewards.clone());
        if i == 0 {
            // Step results (a multi-step trial's) become the imported attempt's steps.
            result["step_results"] = json!([
                {"step_name": "first", "agent_result": {"n_input_tokens": 100, "n_cache_tokens": 40, "n_output_tokens": 5, "cost_usd": 0.1},
                 "verifier_result": {"rewards": {"reward": 1.0}},
                 "agent_execution": {"started_at": "2026-11-30T11:59:00Z", "finished_at": "2026-11-30T11:59:30Z"},
                 "verifier": {"started_at": "2026-11-30T11:59:30Z", "finished_at": "2026-11-30T11:59:40Z"}},
                {"step_name": "second", "verifier_result": {"rewards": {"reward": 0.0}}}
            ]);
        }
        write(
            &job_dir.join(format!("{name}__Ab3dE9x/result.json")),
            &result,
        );
    }
    let obs = t.join("observations.jsonl");
    let o = import(
        t,
        &key,
        &jobs,
        &out,
        &["--observations", obs.to_str().unwrap(), "--json"],
    );
    let v = ok_json(&o, 0);
    let a = &v["accounting"];
    assert_eq!(a["valid"], true, "{a}");
    assert_eq!(a["complete"], false);
    for (i, (_, _, bucket)) in cases.iter().enumerate() {
        assert_eq!(a["trials"][i]["trial_id"], trials[i]["trial_id"]);
        assert_eq!(a["trials"][i]["bucket"], *bucket, "trial {i}: {a}");
    }
    assert_eq!(v["results"], 5);
    // Tokens and cost are kept: in each observation line and summed in the import's report
    // (Harbor's n_input_tokens includes the cached ones; akbench's input_tokens does not).
    assert_eq!(
        v["spend"],
        json!({"input_tokens": 3000, "cached_input_tokens": 2000, "output_tokens": 250, "cost_usd": 2.5}),
        "{v}"
    );
    let lines = std::fs::read_to_string(&obs).unwrap();
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["spend"]["input_tokens"], 600, "{first}");
    assert_eq!(first["spend"]["cost_usd"], 0.5, "{first}");
    // With --out, each imported trial becomes a run record that `run report`, `run compare`
    // and `run aggregate` (the readers `view` shares) open: the same buckets, and the tokens
    // and cost Harbor reported.
    let records = t.join("out");
    let o = import(
        t,
        &key,
        &jobs,
        &out,
        &[
            "--observations",
            obs.to_str().unwrap(),
            "--out",
            records.to_str().unwrap(),
            "--json",
        ],
    );
    let w = ok_json(&o, 0);
    assert_eq!(w["records"].as_array().unwrap().len(), 5, "{w}");
    // A one-step task's manifest entry names no steps; the step results Harbor wrote are
    // the attempt's steps, in Harbor's order, judged by the task's threshold.
    assert!(trials[0].get("steps").is_none(), "{}", trials[0]);
    let key0 = trials[0]["key"].as_str().unwrap();
    let rec: Value = read_json(&records.join(key0).join("run_record.json"));
    let steps = &rec["attempts"][0]["steps"];
    assert_eq!(steps[0]["name"], "first", "{steps}");
    assert_eq!(steps[0]["verdict"], "solved", "{steps}");
    assert_eq!(steps[0]["input_tokens"], 60, "{steps}");
    assert_eq!(steps[0]["ended_at"], "2026-11-30T11:59:40Z", "{steps}");
    assert_eq!(steps[1]["verdict"], "failed", "{steps}");
    assert_eq!(steps.as_array().unwrap().len(), 2, "{steps}");
    let html = t.join("report.html");
    let o = akbench(
        t,
        &[
            "run",
            "report",
            &key,
            "--html",
            html.to_str().unwrap(),
            "--out",
            records.to_str().unwrap(),
        ],
    );
    assert_exit(&o, 0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("2.5000")
            && page.contains("3000")
            && page.contains("harbor: EnvironmentStartTimeoutError"),
        "the report shows the imported cost, tokens and infrastructure cause"
    );
    let cmp = ok_json(
        &akbench(
            t,
            &[
                "run",
                "compare",
                &key,
                &key,
                "--out",
                records.to_str().unwrap(),
                "--json",
            ],
        ),
        0,
    );
    assert!(cmp.to_string().contains("succeeded"), "{cmp}");
    let agg = ok_json(
        &Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(["run", "aggregate", "--json"])
            .arg(&records)
            .output()
            .unwrap(),
        0,
    );
    assert!(agg.to_string().contains("\"cost_usd\":2.5"), "{agg}");

    // `view`'s index opens the records: one run, nothing refused.
    let mut index =
        akbench::view::index::Index::new(records.canonicalize().unwrap(), Some(t.join("runs")));
    index.refresh();
    assert!(index.refused.is_empty(), "{:?}", index.refused);
    assert_eq!(index.runs.len(), 1);
    assert_eq!(index.runs[&key].trials.len(), 5);

    // `run reconcile` accepts the file and agrees.
    let r = ok_json(
        &akbench(
            t,
            &[
                "run",
                "reconcile",
                &key,
                "--observations",
                obs.to_str().unwrap(),
                "--json",
            ],
        ),
        0,
    );
    assert_eq!(r["counts"], a["counts"]);
    // ... and shows the tokens and cost the imported job carries, as the import summed them.
    for k in [
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "cost_usd",
    ] {
        assert_eq!(r["spend"][k], v["spend"][k], "{k}: {r}");
    }
    assert_eq!(r["counts"]["timed_out"], 1);
    assert_eq!(r["counts"]["infrastructure_error"], 1);
    assert_eq!(r["counts"]["evaluation_error"], 1);

    // A conflicting duplicate, a result of a trial not in the plan, and one not exported by
    // akbench: reported as reconcile does, exit 1.
    let p0 = trials[0]["path"].as_str().unwrap();
    write(
        &jobs.join("again/pyslug-0__Zz9/result.json"),
        &harbor_result(p0, "pyslug-0b", None, Some(json!({"reward": 0.0}))),
    );
    let stranger = format!("trials/{}", uuid::Uuid::now_v7());
    write(
        &jobs.join("again/other__Yy8/result.json"),
        &harbor_result(&stranger, "other", None, Some(json!({"reward": 1.0}))),
    );
    write(
        &jobs.join("again/foreign__Xx7/result.json"),
        &harbor_result(
            "tasks/hello-world",
            "foreign",
            None,
            Some(json!({"reward": 1.0})),
        ),
    );
    let o = import(t, &key, &jobs, &out, &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("accounting INVALID"), "{text}");
    assert!(text.contains("1 conflicting"), "{text}");
    assert!(text.contains("unexpected 1"), "{text}");
    assert!(
        text.contains("unidentified") && text.contains("hello-world"),
        "{text}"
    );
}

/// `--base-image` given as a tag is pinned to the digest the registry serves for it (a real
/// `docker-registry` on loopback): every Dockerfile starts FROM `tag@digest`, and the
/// manifest records it.
#[test]
fn export_pins_a_base_image_tag_to_the_registrys_digest() {
    const TEST: &str = "export_pins_a_base_image_tag_to_the_registrys_digest";
    if !Path::new(registry::REGISTRY).is_file() {
        akbench_core::testkit::skip(
            TEST,
            "`docker-registry` is not installed (apt-get install docker-registry)",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let reg = registry::Registry::start();
    let layer = registry::layer(t, "base", &[("etc/akbench-base", "base\n")], "gzip");
    let digest = reg.push(
        "akbench/harbor-base:bookworm",
        &[(&layer, "gzip")],
        &[],
        None,
        None,
    );
    assert!(digest.starts_with("sha256:"), "{digest}");
    let key = planned(
        t,
        "experiment: hbi\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: oracle\nrepetitions: 1\n",
    );
    let tasks = examples().join("tasks");
    let tag = format!("{}/akbench/harbor-base:bookworm", reg.addr);
    let out = t.join("harbor");
    let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "export-harbor", &key, "--out"])
        .arg(&out)
        .arg("--tasks-root")
        .arg(&tasks)
        .args(["--base-image", &tag, "--cache"])
        .arg(t.join("cache"))
        .arg("--store-root")
        .arg(t.join("runs"))
        .env("AKBENCH_INSECURE_REGISTRIES", &reg.addr)
        .env_remove("AKBENCH_COORDINATOR")
        .output()
        .unwrap();
    assert_exit(&o, 0);
    let pinned = format!("{tag}@{digest}");
    let m: Value = read_json(&out.join("akbench-harbor.json"));
    assert_eq!(m["base_image"], pinned.as_str());
    let id = m["trials"][0]["trial_id"].as_str().unwrap();
    let docker =
        std::fs::read_to_string(out.join("trials").join(id).join("environment/Dockerfile"))
            .unwrap();
    assert!(docker.contains(&format!("FROM {pinned}\n")), "{docker}");
}
