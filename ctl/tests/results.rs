//! Results people compare: `run compare` over two real sweeps of the example corpus, its
//! statistics checked against an independent Python computation.

mod common;

use common::{examples, local_sweep};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Writes a scripted agent `name` that applies the reference fix of exactly the tasks in
/// `solves` (the fix is inlined into its script) and changes nothing elsewhere.
fn picky_agent(agents: &Path, name: &str, solves: &[&str]) {
    std::fs::create_dir_all(agents.join("scripts")).unwrap();
    let mut script =
        String::from("#!/usr/bin/env bash\nset -euo pipefail\ncase \"${AKBENCH_TASK_ID:?}\" in\n");
    for task in solves {
        let fix =
            std::fs::read_to_string(examples().join(format!("tasks/{task}/solution/fix.patch")))
                .unwrap();
        script.push_str(&format!(
            "{task})\n git apply <<'AKBENCH_PATCH'\n{fix}AKBENCH_PATCH\n;;\n"
        ));
    }
    script.push_str("*) echo \"{name}: leaves $AKBENCH_TASK_ID alone\";;\nesac\n");
    let path = agents.join(format!("scripts/{name}.sh"));
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        agents.join(format!("{name}.toml")),
        format!(
            "adapter = \"scripted\"\ndescription = \"solves {}\"\nscript = \"scripts/{name}.sh\"\n",
            solves.join(" ")
        ),
    )
    .unwrap();
}

/// Runs `akbench sweep --local` of `manifest` with the store, records and cache under `tmp`;
/// returns the run key.
fn sweep(tmp: &Path, agents: &Path, name: &str, manifest: &str) -> String {
    let m = tmp.join(format!("{name}.yaml"));
    std::fs::write(&m, manifest).unwrap();
    let out = local_sweep(&m, agents, tmp).arg("--json").output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "sweep {name} ended {:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["run_key"].as_str().unwrap().to_string()
}

fn akbench(tmp: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .arg("--store-root")
        .arg(tmp.join("runs"))
        .arg("--out")
        .arg(tmp.join("out"))
        .env_remove("AKBENCH_COORDINATOR")
        .output()
        .unwrap()
}

/// `akbench <args> --store-root <tmp>/runs`.
fn akbench_store(tmp: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .arg("--store-root")
        .arg(tmp.join("runs"))
        .env_remove("AKBENCH_COORDINATOR")
        .output()
        .unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|_| {
        panic!(
            "exit {:?}\nstdout: {}\nstderr: {}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The headless Chromium binary, when installed (Debian's `chromium`).
fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// Runs headless Chromium on `html` with a fresh profile; returns (dumped DOM, its log).
fn chromium_run(browser: &Path, html: &Path, profile: &Path, extra: &[String]) -> (String, String) {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Renders `html` in headless Chromium: the page's script must run to its end (it marks the
/// page rendered) with no console message at all (script errors are logged there), and a
/// screenshot is saved beside the report in `dir`. Skips (printing so) without Chromium.
fn renders_in_chromium(html: &Path, dir: &Path, name: &str) {
    let Some(browser) = chromium() else {
        return akbench_core::testkit::skip(
            &format!("the browser check of {}", html.display()),
            "no chromium on PATH (apt-get install -y chromium)",
        );
    };
    let profile = tempfile::tempdir().unwrap();
    let (dom, log) = chromium_run(
        &browser,
        html,
        &profile.path().join("dom"),
        &["--dump-dom".to_string()],
    );
    assert!(
        dom.contains("data-akbench-rendered=\"1\""),
        "the page script did not finish:\n{dom}"
    );
    assert!(dom.contains("id=\"akbench-status\">rendered<"), "{dom}");
    assert!(
        dom.contains("<svg width=\"1000\""),
        "the timeline was drawn"
    );
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(
        console.is_empty(),
        "console messages (script errors): {console:#?}"
    );
    let shot = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&shot);
    chromium_run(
        &browser,
        html,
        &profile.path().join("shot"),
        &[
            "--window-size=1200,2400".to_string(),
            format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.len() > 1000 && png.starts_with(b"\x89PNG"),
        "a screenshot was written"
    );
    println!("screenshot: {}", shot.display());
}

/// The folder where the report tests leave their HTML and screenshots (kept after the test).
fn report_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_html_report_of_an_example_sweep_renders_in_headless_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let key = sweep(
        t,
        &examples().join("agents"),
        "r",
        "experiment: report\ntasks:\n  ids: [pyslug-001, pyslug-002, broken-missing-commit]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: crash\nrepetitions: 2\n",
    );
    let dir = report_dir();
    let html = dir.join("run.html");
    let o = akbench(
        t,
        &["run", "report", &key, "--html", html.to_str().unwrap()],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    // Self-contained: no fetch of anything at view time.
    assert!(page.contains("default-src 'none'"));
    for needle in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!page.contains(needle), "{needle}");
    }
    assert!(
        page.contains("Rates per agent") && page.contains("100.0% [51.0%, 100.0%]"),
        "oracle's rate with its interval"
    );
    assert!(
        page.contains("Infrastructure errors by cause") && page.contains("failed to find commit")
    );
    assert!(
        page.contains("absent (0 of 6 attempts reported it)"),
        "no cost reported: absent, never 0"
    );
    // Where verdicts were graded (core::report::network): the oracle's 4, in a clean room.
    assert!(
        page.contains("Grading place and network")
            && page.contains("<tr><td>oracle</td><td class=\"n\">0</td><td class=\"n\">4</td>"),
        "grading place per agent"
    );
    renders_in_chromium(&html, &dir, "run");
}

const TASKS: &str = "[pyslug-001, pyslug-002, pyslug-003, pyslug-004, broken-missing-commit]";

fn manifest(experiment: &str, descriptor: &str, tasks: &str, reps: u32) -> String {
    format!(
        "experiment: {experiment}\ntasks:\n  ids: {tasks}\nagents:\n  conditions:\n    - descriptor: {descriptor}\n      name: candidate\nrepetitions: {reps}\n"
    )
}

#[test]
fn compare_two_sweeps_prints_the_expected_flips_and_matching_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let agents = t.join("agents");
    // The agent changes between the runs: A solves 001 and 002, B solves 002, 003 and 004.
    picky_agent(&agents, "picky-a", &["pyslug-001", "pyslug-002"]);
    picky_agent(
        &agents,
        "picky-b",
        &["pyslug-002", "pyslug-003", "pyslug-004"],
    );
    let a = sweep(t, &agents, "a", &manifest("base", "picky-a", TASKS, 2));
    let b = sweep(t, &agents, "b", &manifest("cand", "picky-b", TASKS, 2));
    let left_dir = t.join("out").join(&a);
    let right_dir = t.join("out").join(&b);

    // By folder (the specs are found in the store by the records' run UUIDs).
    let o = akbench(
        t,
        &[
            "run",
            "compare",
            left_dir.to_str().unwrap(),
            right_dir.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(v["conditions"]["checked_from"], "spec");
    assert_eq!(v["conditions"]["blocking"], serde_json::json!([]));
    let c = &v["comparison"];
    // Every graded verdict of each side was graded in a clean room (core::report::network).
    let pair = &c["pairing"][0];
    for (side, agent) in [("left", &pair[0]), ("right", &pair[1])] {
        let agent = agent.as_str().unwrap();
        let graded = &c[side]["by_agent"][agent]["rates"]["graded"];
        assert!(graded.as_u64().unwrap() > 0, "{v}");
        assert_eq!(
            &v["network"][side][agent]["graded_clean_room"], graded,
            "{side} {agent}: {v}"
        );
        assert_eq!(v["network"][side][agent]["graded_shared"], 0, "{v}");
    }
    let flips: Vec<(String, String, u64)> = c["flips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["direction"].as_str().unwrap().to_string(),
                f["task"].as_str().unwrap().to_string(),
                f["repetition"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, String, u64)> = [
        ("lost", "pyslug-001", 1),
        ("lost", "pyslug-001", 2),
        ("gained", "pyslug-003", 1),
        ("gained", "pyslug-003", 2),
        ("gained", "pyslug-004", 1),
        ("gained", "pyslug-004", 2),
    ]
    .iter()
    .map(|(d, t, r)| (d.to_string(), t.to_string(), *r))
    .collect();
    assert_eq!(flips, want, "{c}");
    let p = &c["paired"];
    assert_eq!(p["pairs"], 8);
    assert_eq!(
        (p["both_solved"].as_u64(), p["neither_solved"].as_u64()),
        (Some(2), Some(0))
    );
    // The broken task's infrastructure errors are listed, excluded, and not failures.
    let unpaired = c["unpaired"].as_array().unwrap();
    assert_eq!(unpaired.len(), 2, "{c}");
    for u in unpaired {
        assert_eq!(u["task"], "broken-missing-commit");
        assert_eq!(u["reason"], "excluded");
        assert_eq!(u["left"], "infrastructure_error");
    }
    assert_eq!(c["left"]["total"]["counts"]["infrastructure_error"], 2);
    assert_eq!(c["left"]["total"]["rates"]["graded"], 8);
    assert_eq!(c["left"]["total"]["rates"]["pass_rate"], 0.5);

    // The statistics, recomputed independently.
    let input = t.join("pairs.json");
    std::fs::write(
        &input,
        serde_json::json!({
            "pairs": c["pairs"],
            "seed": p["bootstrap"]["seed"],
            "resamples": p["bootstrap"]["resamples"],
        })
        .to_string(),
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/results/compare_check.py");
    match Command::new("python3").arg(&script).arg(&input).output() {
        Err(e) => akbench_core::testkit::skip(
            "the Python cross-check",
            &format!("python3 cannot run ({e})"),
        ),
        Ok(py) => {
            assert!(
                py.status.success(),
                "{}",
                String::from_utf8_lossy(&py.stderr)
            );
            let want: Value = serde_json::from_slice(&py.stdout).unwrap();
            assert_eq!(want["lost"], p["lost"]);
            assert_eq!(want["gained"], p["gained"]);
            let close =
                |x: &Value, y: &Value| (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() < 1e-12;
            assert!(close(&want["mcnemar_p"], &p["mcnemar_p"]), "{want} vs {p}");
            assert!(
                close(&want["difference"], &p["difference"]),
                "{want} vs {p}"
            );
            assert!(
                close(&want["low"], &p["bootstrap"]["interval"]["low"]),
                "{want} vs {p}"
            );
            assert!(
                close(&want["high"], &p["bootstrap"]["interval"]["high"]),
                "{want} vs {p}"
            );
            assert!(
                close(&want["mean"], &p["bootstrap"]["mean"]),
                "{want} vs {p}"
            );
        }
    }

    // By run key, human output: names every flip.
    let o = akbench(t, &["run", "compare", &a, &b]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("solved -> not  pyslug-001 r1"), "{text}");
    assert!(text.contains("not -> solved  pyslug-003 r2"), "{text}");
    assert!(
        text.contains("grading place and network (per compared agent):")
            && text.contains(": graded in the agent's environment 0, clean room "),
        "{text}"
    );
    assert!(
        text.contains("excluded    broken-missing-commit r1"),
        "{text}"
    );

    // Without the store, the records' own task releases are checked.
    let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "compare", "--json", "--store-root"])
        .arg(t.join("no-store"))
        .arg(&left_dir)
        .arg(&right_dir)
        .output()
        .unwrap();
    let v2 = json(&o);
    assert_eq!(v2["conditions"]["checked_from"], "records");
    assert_eq!(v2["comparison"]["paired"], v["comparison"]["paired"]);

    // A run of other tasks is refused (exit 2) unless --allow-different, which warns.
    let c3 = sweep(
        t,
        &agents,
        "c",
        &manifest("other", "picky-b", "[pyslug-002]", 1),
    );
    let o = akbench(t, &["run", "compare", &a, &c3]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--allow-different") && err.contains("tasks.pyslug-001"),
        "{err}"
    );
    let o = akbench(
        t,
        &["run", "compare", &a, &c3, "--allow-different", "--json"],
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("WARNING"));
    assert_eq!(json(&o)["conditions"]["compared_anyway"], true);
    // `run list` of the local store: newest first, with filters.
    let list = |extra: &[&str]| {
        let mut args = vec!["run", "list", "--json"];
        args.extend_from_slice(extra);
        let o = akbench_store(t, &args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        json(&o)["runs"].as_array().unwrap().clone()
    };
    let all = list(&[]);
    assert_eq!(all.len(), 3, "{all:?}");
    let base = list(&["--experiment", "base"]);
    assert_eq!(base.len(), 1);
    assert_eq!(base[0]["key"], a.as_str());
    assert_eq!(base[0]["state"], "finished");
    assert_eq!(
        (base[0]["trials"].as_u64(), base[0]["finished"].as_u64()),
        (Some(10), Some(10))
    );
    assert_eq!(list(&["--state", "finished", "--since", "1d"]).len(), 3);
    assert_eq!(list(&["--state", "ready"]).len(), 0);
    assert_eq!(list(&["--since", "2999-01-01"]).len(), 0);
    let o = akbench_store(t, &["run", "list", "--since", "last tuesday"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = akbench_store(t, &["run", "list"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&a) && text.contains("10/10"), "{text}");

    // The comparison as an HTML report, rendered in a real browser.
    let dir = report_dir();
    let html = dir.join("compare.html");
    let o = akbench(
        t,
        &[
            "run",
            "report",
            "--compare",
            &a,
            &b,
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Flips (6)") && page.contains("Not paired (2)"),
        "flips and unpaired listed"
    );
    renders_in_chromium(&html, &dir, "compare");

    // Unknown agents named: exit 2.
    let o = akbench(
        t,
        &[
            "run",
            "compare",
            &a,
            &b,
            "--left-agent",
            "nope",
            "--right-agent",
            "candidate",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// One rule for agent labels: as written in the manifest, in trial keys, records and
/// `run compare --left-agent`, with or without the plans at hand.
#[test]
fn agent_labels_are_used_as_written_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let agents = examples().join("agents");
    let one = |experiment: &str, descriptor: &str, label: &str| {
        format!(
            "experiment: {experiment}\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: {descriptor}\n      name: {label}\nrepetitions: 1\n"
        )
    };
    let a = sweep(t, &agents, "a", &one("left", "oracle", "partA"));
    let b = sweep(t, &agents, "b", &one("right", "fail", "PartB"));
    for (run, label) in [(&a, "partA"), (&b, "PartB")] {
        let dir = t.join("out").join(run);
        let keys: Vec<String> = std::fs::read_dir(dir.join("pyslug-001"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            keys,
            [label],
            "the trial key's agent is the label as written"
        );
    }
    // Records only (no plans at hand: an empty store), labels as the manifest wrote them.
    let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "compare"])
        .arg(t.join("out").join(&a))
        .arg(t.join("out").join(&b))
        .args(["--left-agent", "partA", "--right-agent", "PartB", "--json"])
        .arg("--store-root")
        .arg(t.join("empty-store"))
        .env_remove("AKBENCH_COORDINATOR")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    let by: Vec<&str> = v["comparison"]["left"]["by_agent"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(by, ["partA"]);
    assert_eq!(v["comparison"]["paired"]["pairs"], 1);
}
