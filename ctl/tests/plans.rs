//! The real `akbench` binary: run plan / inspect / diff / reconcile, exit codes included.

use akbench_core::testkit::{write_agent, write_task};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn akbench(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .current_dir(cwd)
        .env_remove("AKBENCH_STORE_ROOT")
        .env_remove("AKBENCH_TASKS_ROOT")
        .env_remove("AKBENCH_AGENTS_ROOT")
        // Keys carry the planning date: fixed, so planning twice never straddles midnight.
        .env("AKBENCH_PLAN_TIME", "2026-03-04T05:06:07Z")
        .output()
        .expect("run akbench")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const MANIFEST: &str = "\
experiment: demo
tasks:
  root: tasks
  include: [\"wordcount-*\", \"pyslug-*\"]
  exclude: [\"broken-*\"]
agents:
  root: agents
  conditions:
    - descriptor: oracle
    - descriptor: fail
repetitions: 3
evaluation:
  grade: true
";

/// 3 good tasks (2 wordcount, 1 pyslug), one broken, agents oracle and fail.
fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = tmp.path().join("tasks");
    for id in ["wordcount-001", "wordcount-002", "pyslug-001"] {
        write_task(&tasks, id, "1.0");
    }
    std::fs::create_dir_all(tasks.join("broken-001")).unwrap();
    write_agent(&tmp.path().join("agents"), "oracle", "oracle");
    write_agent(&tmp.path().join("agents"), "fail", "scripted");
    std::fs::write(tmp.path().join("experiment.yaml"), MANIFEST).unwrap();
    tmp
}

fn plan_json(dir: &Path, config: &str) -> serde_json::Value {
    let o = akbench(&["run", "plan", "--config", config, "--json"], dir);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn store_file(dir: &Path, key: &str, file: &str) -> PathBuf {
    dir.join("runs").join(key).join(file)
}

#[test]
fn plan_prints_key_uuid_and_summary_and_stores_three_documents() {
    let tmp = fixture();
    let o = akbench(&["run", "plan", "--config", "experiment.yaml"], tmp.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("run      demo-20260304-"), "{t}");
    assert!(
        t.contains("trials   18 = 3 tasks x 2 agents x 3 repetitions"),
        "{t}"
    );
    assert!(t.contains("fail=9 oracle=9"), "{t}");
    let v = plan_json(tmp.path(), "experiment.yaml");
    let key = v["run_key"].as_str().unwrap();
    assert!(
        key.ends_with("-2"),
        "second plan of the same manifest gets a suffix: {key}"
    );
    for f in ["spec.json", "plan.draft.json", "plan.ready.json"] {
        assert!(store_file(tmp.path(), key, f).is_file(), "{f}");
    }
    let plan: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(store_file(tmp.path(), key, "plan.ready.json")).unwrap(),
    )
    .unwrap();
    let trials = plan["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 18);
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(t["ordinal"], i as u64);
    }
    assert_eq!(v["summary"]["by_task"]["pyslug-001"], 6);
}

#[test]
fn inspect_by_key_and_uuid() {
    let tmp = fixture();
    let v = plan_json(tmp.path(), "experiment.yaml");
    let key = v["run_key"].as_str().unwrap();
    let id = v["run_id"].as_str().unwrap();
    for run in [key, id] {
        let o = akbench(&["run", "inspect", run], tmp.path());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{t}");
        assert!(
            t.contains("state        ready") && t.contains("wordcount-002 1.0"),
            "{t}"
        );
    }
    let o = akbench(&["run", "inspect", key, "--json"], tmp.path());
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["summary"]["trials"], 18);
    assert_eq!(j["condition"]["execution"]["infrastructure_retries"], 0);
    let o = akbench(&["run", "inspect", "no-such-run"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn diff_identical_then_changed() {
    let tmp = fixture();
    let a = plan_json(tmp.path(), "experiment.yaml");
    let b = plan_json(tmp.path(), "experiment.yaml");
    let (ka, kb) = (
        a["run_key"].as_str().unwrap(),
        b["run_key"].as_str().unwrap(),
    );
    let o = akbench(&["run", "diff", ka, kb], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("identical"));

    // Change a task version, add an agent, change the repetitions.
    let tasks = tmp.path().join("tasks");
    write_task(&tasks, "wordcount-002", "1.1");
    write_agent(&tmp.path().join("agents"), "extra", "scripted");
    let m = MANIFEST
        .replace("repetitions: 3", "repetitions: 2")
        .replace(
            "    - descriptor: fail\n",
            "    - descriptor: fail\n    - descriptor: extra\n",
        );
    std::fs::write(tmp.path().join("changed.yaml"), m).unwrap();
    let c = plan_json(tmp.path(), "changed.yaml");
    let kc = c["run_key"].as_str().unwrap();
    let o = akbench(&["run", "diff", ka, kc], tmp.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines.contains(&"~ tasks.wordcount-002.release.version: \"1.0\" -> \"1.1\""),
        "{t}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("+ agents.extra: ")),
        "{t}"
    );
    assert!(lines.contains(&"~ repetitions: 3 -> 2"), "{t}");
    let o = akbench(&["run", "diff", ka, kc, "--json"], tmp.path());
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["identical"], false);
}

#[test]
fn malformed_or_broken_input_writes_nothing_and_exits_2() {
    let tmp = fixture();
    let cases = [
        MANIFEST.replace("repetitions: 3", "repetitions: 3\nrepetitons: 4"),
        MANIFEST.replace("  exclude: [\"broken-*\"]\n", "  ids: [broken-001]\n"),
        MANIFEST.replace("descriptor: fail", "descriptor: nobody"),
        "experiment: [".to_string(),
    ];
    for (i, m) in cases.iter().enumerate() {
        let f = format!("bad{i}.yaml");
        std::fs::write(tmp.path().join(&f), m).unwrap();
        let o = akbench(&["run", "plan", "--config", &f], tmp.path());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "case {i}: {t}");
        assert!(t.contains("failed to"), "{t}");
        assert!(
            !tmp.path().join("runs").exists(),
            "case {i} wrote something"
        );
    }
    let o = akbench(&["run", "plan", "--config", "bad0.yaml"], tmp.path());
    assert!(
        text(&o).contains("repetitons") && text(&o).contains("line 12"),
        "{}",
        text(&o)
    );
}

fn obs_line(id: &str, state: &str, ok: &str) -> String {
    format!(
        "{{\"trial_id\":\"{id}\",\"state\":\"{state}\",\"ok\":{ok},\"score\":null,\"attempt_id\":null,\"source\":\"test\"}}\n"
    )
}

#[test]
fn reconcile_valid_invalid_and_malformed() {
    let tmp = fixture();
    let v = plan_json(tmp.path(), "experiment.yaml");
    let key = v["run_key"].as_str().unwrap();
    let plan: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(store_file(tmp.path(), key, "plan.ready.json")).unwrap(),
    )
    .unwrap();
    let ids: Vec<String> = plan["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trial_id"].as_str().unwrap().to_string())
        .collect();
    let mut good = String::new();
    good += &obs_line(&ids[0], "completed", "true");
    good += &obs_line(&ids[0], "completed", "true"); // identical duplicate
    good += &obs_line(&ids[1], "completed", "false");
    good += &obs_line(&ids[2], "infrastructure_error", "null");
    std::fs::write(tmp.path().join("good.jsonl"), &good).unwrap();
    let o = akbench(
        &["run", "reconcile", key, "--observations", "good.jsonl"],
        tmp.path(),
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("valid and incomplete"), "{t}");
    assert!(t.contains("pass rate  50.0% (2 graded)"), "{t}");
    let o = akbench(
        &[
            "run",
            "reconcile",
            key,
            "--observations",
            "good.jsonl",
            "--json",
        ],
        tmp.path(),
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["counts"]["missing"], 15);
    assert_eq!(j["counts"]["infrastructure_error"], 1);
    assert_eq!(j["valid"], true);

    let bad = format!(
        "{good}{}{}",
        obs_line(&ids[1], "completed", "true"),
        obs_line("01890000-0000-7000-8000-000000000000", "failed", "null")
    );
    std::fs::write(tmp.path().join("bad.jsonl"), bad).unwrap();
    let o = akbench(
        &["run", "reconcile", key, "--observations", "bad.jsonl"],
        tmp.path(),
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("INVALID") && t.contains("conflicting_duplicate"),
        "{t}"
    );
    assert!(t.contains("unexpected_identity"), "{t}");

    std::fs::write(
        tmp.path().join("broken.jsonl"),
        format!("{good}{{\"trial_id\": 3}}\n"),
    )
    .unwrap();
    let o = akbench(
        &["run", "reconcile", key, "--observations", "broken.jsonl"],
        tmp.path(),
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("line 5"), "{t}");
}

/// `run reconcile --observations` shows what the lines say the planned trials spent (tokens
/// and cost, as an imported Harbor job carries them), in text and in --json: an identical
/// duplicate once, a trial outside the plan left out, lines without spend counted.
#[test]
fn reconcile_shows_what_the_observations_spent() {
    let tmp = fixture();
    let v = plan_json(tmp.path(), "experiment.yaml");
    let key = v["run_key"].as_str().unwrap();
    let plan: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(store_file(tmp.path(), key, "plan.ready.json")).unwrap(),
    )
    .unwrap();
    let id = |i: usize| plan["trials"][i]["trial_id"].as_str().unwrap().to_string();
    let with_spend = |line: String, input: u64, cost: &str| {
        format!(
            "{},\"spend\":{{\"input_tokens\":{input},\"cached_input_tokens\":null,\"output_tokens\":10,\"cost_usd\":{cost}}}}}\n",
            line.trim_end().trim_end_matches('}')
        )
    };
    let mut lines = String::new();
    lines += &with_spend(obs_line(&id(0), "completed", "true"), 100, "0.5");
    lines += &with_spend(obs_line(&id(0), "completed", "true"), 100, "0.5"); // read twice
    lines += &with_spend(obs_line(&id(1), "failed", "null"), 50, "null");
    lines += &obs_line(&id(2), "completed", "false");
    std::fs::write(tmp.path().join("spent.jsonl"), &lines).unwrap();
    let o = akbench(
        &["run", "reconcile", key, "--observations", "spent.jsonl"],
        tmp.path(),
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains(
            "spend      tokens: input 150 (cached n/a), output 20; cost $0.5000 \
             (1 of 3 observations without spend)"
        ),
        "{t}"
    );
    let o = akbench(
        &[
            "run",
            "reconcile",
            key,
            "--observations",
            "spent.jsonl",
            "--json",
        ],
        tmp.path(),
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        j["spend"],
        serde_json::json!({
            "input_tokens": 150,
            "cached_input_tokens": null,
            "output_tokens": 20,
            "cost_usd": 0.5,
            "lines": 3,
            "lines_without_spend": 1
        })
    );
    assert_eq!(j["counts"]["succeeded"], 1, "{j}");

    // A trial the plan does not hold adds nothing (the accounting reports it as unexpected).
    lines += &with_spend(
        obs_line("01890000-0000-7000-8000-000000000000", "failed", "null"),
        999,
        "9.0",
    );
    std::fs::write(tmp.path().join("stranger.jsonl"), &lines).unwrap();
    let o = akbench(
        &[
            "run",
            "reconcile",
            key,
            "--observations",
            "stranger.jsonl",
            "--json",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["spend"]["input_tokens"], 150);
    assert_eq!(j["spend"]["lines"], 3);
}

#[test]
fn a_field_akbench_would_ignore_is_refused_with_exit_2_and_nothing_written() {
    let tmp = fixture();
    for (field, yaml) in [
        ("execution.runtime", "execution:\n  runtime: container\n"),
        (
            "execution.selection",
            "execution:\n  candidates: 3\n  selection: majority\n",
        ),
        ("evaluation.profile", "evaluation:\n  profile: strict\n"),
        ("credentials", "credentials: [NOT_DECLARED_BY_ANY_AGENT]\n"),
    ] {
        // Replace the manifest's own `evaluation:` block so the field is set once.
        let base = MANIFEST.replace("evaluation:\n  grade: true\n", "");
        std::fs::write(tmp.path().join("bad.yaml"), format!("{base}{yaml}")).unwrap();
        let o = akbench(&["run", "plan", "--config", "bad.yaml"], tmp.path());
        assert_eq!(o.status.code(), Some(2), "{field}: {}", text(&o));
        let t = text(&o);
        assert!(
            t.contains(field) && t.contains("not supported"),
            "{field}: {t}"
        );
        assert!(
            !tmp.path().join("runs").exists(),
            "{field}: something was written"
        );
    }
}

#[test]
fn a_bad_plan_time_is_refused_naming_the_variable() {
    let tmp = fixture();
    let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "plan", "--config", "experiment.yaml"])
        .current_dir(tmp.path())
        .env("AKBENCH_PLAN_TIME", "yesterday")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("AKBENCH_PLAN_TIME"), "{}", text(&o));
    assert!(!tmp.path().join("runs").exists());
}

#[test]
fn an_adapter_that_cannot_run_is_refused_at_plan_time_with_exit_2_and_nothing_written() {
    let tmp = fixture();
    let agents = tmp.path().join("agents");
    // (descriptor, manifest condition extras, what the error names)
    let cases = [
        (
            "adapter = \"telepathy\"\n",
            "",
            "unknown adapter `telepathy`",
        ),
        (
            "adapter = \"command\"\ncommand = []\n",
            "",
            "field `command`",
        ),
        (
            "adapter = \"command\"\ncommand = [\"a\", \"{prompt}\"]\n",
            "",
            "`{prompt}`",
        ),
        ("adapter = \"scripted\"\n", "", "field `script`"),
        (
            "adapter = \"claude-code\"\n[parameters]\nmax_turnz = 3\n",
            "",
            "`max_turnz`",
        ),
        (
            "adapter = \"claude-code\"\n[parameters]\nmax_turns = \"many\"\n",
            "",
            "`max_turns`",
        ),
        (
            "adapter = \"claude-code\"\n",
            "      parameters: {max_turns: -1}\n",
            "`max_turns`",
        ),
        (
            "adapter = \"codex\"\n",
            "      parameters: {sandbox: 3}\n",
            "`sandbox`",
        ),
        (
            "adapter = \"command\"\ncommand = [\"a\"]\n",
            "      parameters: {x: 1}\n",
            "takes no parameters",
        ),
    ];
    for (descriptor, extras, names) in cases {
        std::fs::write(agents.join("bad.toml"), descriptor).unwrap();
        let manifest = MANIFEST.replace(
            "    - descriptor: fail\n",
            &format!("    - descriptor: fail\n    - descriptor: bad\n{extras}"),
        );
        std::fs::write(tmp.path().join("bad.yaml"), manifest).unwrap();
        for args in [
            &["run", "plan", "--config", "bad.yaml"][..],
            &["sweep", "bad.yaml", "--local", "--out", "out"][..],
        ] {
            let o = akbench(args, tmp.path());
            let t = text(&o);
            assert_eq!(o.status.code(), Some(2), "{descriptor} {args:?}: {t}");
            assert!(
                t.contains(names) && t.contains("bad.toml") && t.contains("fix:"),
                "{descriptor} {args:?}: {t}"
            );
            for written in ["runs", "out"] {
                assert!(
                    !tmp.path().join(written).exists(),
                    "{descriptor} {args:?}: {written} was written"
                );
            }
        }
    }
}

/// A task that needs the network (its agent or grading phase is `public` or an allowlist)
/// makes the plan require workers that give it (`akbench.egress`), and a sweep whose own
/// workers give none (`AKBENCH_EGRESS=off`) is refused before anything runs, naming the
/// task and the fix (core::egress::offer).
#[test]
fn a_task_needing_the_network_requires_workers_that_give_it_and_is_refused_where_none_do() {
    let tmp = fixture();
    let toml = tmp.path().join("tasks/pyslug-001/task.toml");
    let mut written = std::fs::read_to_string(&toml).unwrap();
    written.push_str("\n[environment]\nnetwork_mode = \"public\"\n");
    std::fs::write(&toml, written).unwrap();

    let v = plan_json(tmp.path(), "experiment.yaml");
    let key = v["run_key"].as_str().unwrap().to_string();
    let spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store_file(tmp.path(), &key, "spec.json")).unwrap())
            .unwrap();
    let labels = &spec["condition"]["execution"]["worker_labels"];
    assert_eq!(labels, &serde_json::json!(["akbench.egress"]), "{spec}");
    let needing: Vec<&str> = spec["condition"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["needs_egress"] == true)
        .map(|t| t["release"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(needing, ["pyslug-001"], "{spec}");

    // Without that task, nothing is required (and the spec is written as before: no field).
    let only_wordcount = MANIFEST.replace(", \"pyslug-*\"", "");
    std::fs::write(tmp.path().join("wc.yaml"), only_wordcount).unwrap();
    let v = plan_json(tmp.path(), "wc.yaml");
    let key = v["run_key"].as_str().unwrap().to_string();
    let spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store_file(tmp.path(), &key, "spec.json")).unwrap())
            .unwrap();
    assert!(
        spec["condition"]["execution"]
            .get("worker_labels")
            .is_none(),
        "{spec}"
    );

    // A sweep whose workers give no network: refused, nothing run or written.
    let sweep_dir = tmp.path().join("sweep-off");
    for (value, code, names) in [
        ("off", 2, "pyslug-001 need the network"),
        ("maybe", 2, "AKBENCH_EGRESS: `maybe` is not `on` or `off`"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(["sweep", "experiment.yaml", "--local", "--json"])
            .arg("--store-root")
            .arg(&sweep_dir)
            .current_dir(tmp.path())
            .env("AKBENCH_EGRESS", value)
            .env("AKBENCH_PLAN_TIME", "2026-03-04T05:06:07Z")
            .output()
            .unwrap();
        let all = text(&o);
        assert_eq!(o.status.code(), Some(code), "{value}: {all}");
        assert!(all.contains(names), "{value}: {all}");
        assert!(all.contains("fix:"), "{value}: {all}");
        assert!(
            !sweep_dir.exists(),
            "{value}: the refused sweep wrote its store"
        );
        assert!(
            !tmp.path().join("out").exists(),
            "{value}: the refused sweep ran"
        );
    }
}
