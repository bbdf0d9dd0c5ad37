//! `akbench view` in real headless Chromium: the compare page over two real sweeps (the paired
//! view of `run compare`, the same numbers, links into both trials of each flip, bad run names
//! refused with a page that says why), and a plain `akbench sweep` (the embedded coordinator,
//! not `--local`) appearing in the runs list while it runs. Screenshots go to
//! `<target>/tmp/view-screenshots/`.

mod common;

use common::{examples, local_sweep, no_console_errors, screenshots, spawn_view};

#[path = "view/chromium.rs"]
mod chromium;

use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `akbench sweep --local` of `experiment` (YAML) into `tmp/out` and `tmp/runs`; returns the
/// run key (the run folder created by this sweep).
fn sweep_local(tmp: &Path, name: &str, experiment: &str) -> String {
    let m = tmp.join(format!("{name}.yaml"));
    std::fs::write(&m, experiment).unwrap();
    let before: Vec<String> = keys(&tmp.join("out"));
    let out = local_sweep(&m, &examples().join("agents"), tmp)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "sweep: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut new: Vec<String> = keys(&tmp.join("out"))
        .into_iter()
        .filter(|k| !before.contains(k))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    new.pop().unwrap()
}

fn keys(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `akbench view tmp/out --store-root tmp/runs` on any free port; killed when dropped.
struct View(Child, String);

impl Drop for View {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn view(tmp: &Path) -> View {
    let (child, url) = spawn_view(
        Command::new(env!("CARGO_BIN_EXE_akbench"))
            .arg("view")
            .arg(tmp.join("out"))
            .arg("--store-root")
            .arg(tmp.join("runs"))
            .args(["--listen", "127.0.0.1:0", "--poll-ms", "100"]),
    );
    let url = url.trim_end_matches('/').to_string();
    View(child, url)
}

/// One GET over loopback: (status line, body).
fn get(base: &str, path: &str) -> (String, String) {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn the_compare_page_shows_run_compares_paired_view_in_chromium() {
    let Some(bin) = chromium::binary() else {
        return akbench_core::testkit::skip(
            "the_compare_page_shows_run_compares_paired_view_in_chromium",
            "chromium is not installed (CI installs it in .ci/run)",
        );
    };
    let tmp = tempfile::tempdir().unwrap();
    // The same labels over the same task, the agents behind them swapped: `x` is solved on
    // the left and not on the right (lost), `y` the other way round (gained).
    let experiment = |name: &str, x: &str, y: &str| {
        format!(
            "experiment: {name}\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    \
             - descriptor: {x}\n      name: x\n    - descriptor: {y}\n      name: y\nrepetitions: 1\n"
        )
    };
    let left = sweep_local(tmp.path(), "left", &experiment("before", "oracle", "fail"));
    let right = sweep_local(tmp.path(), "right", &experiment("after", "fail", "oracle"));
    // What `run compare` prints for the same two folders.
    let cli = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "compare", "--json", "--store-root"])
        .arg(tmp.path().join("runs"))
        .arg(tmp.path().join("out").join(&left))
        .arg(tmp.path().join("out").join(&right))
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(0), "{cli:?}");
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    let paired = &cli["comparison"]["paired"];
    assert_eq!(paired["lost"], 1, "{cli}");
    assert_eq!(paired["gained"], 1, "{cli}");

    let v = view(tmp.path());
    let url = format!("{}/compare?left={left}&right={right}", v.1);
    let profile = tmp.path().join("chromium");
    let dom = chromium::dump_dom(&bin, &profile, &url);
    no_console_errors(&dom);
    // The agents differ (that is the comparison), the tasks and evaluation do not: every
    // difference `run compare` found is listed, none refuses.
    assert!(
        dom.contains("Conditions differ (checked from the spec): ")
            && dom.contains("differences, none in the tasks or the evaluation"),
        "{dom}"
    );
    let changes = cli["conditions"]["changes"].as_array().unwrap().len();
    assert!(changes > 0, "{cli}");
    assert_eq!(
        dom.split("id=\"conditions\"")
            .nth(1)
            .unwrap()
            .split("</div>")
            .next()
            .unwrap()
            .matches("<li>")
            .count(),
        changes,
        "{dom}"
    );
    assert!(!dom.contains("compared anyway"), "{dom}");
    assert!(
        dom.contains(&format!(
            "data-pairs=\"{}\" data-lost=\"1\" data-gained=\"1\"",
            paired["pairs"]
        )),
        "{dom}"
    );
    let p = paired["mcnemar_p"].as_f64().unwrap();
    assert!(
        dom.contains(&format!(
            "exact two-sided p = {p:.4} over 2 discordant pairs"
        )),
        "the page's McNemar is run compare's ({p}): {dom}"
    );
    let boot = &paired["bootstrap"]["interval"];
    let pts = |x: &Value| format!("{:+.1}", x.as_f64().unwrap() * 100.0);
    assert!(
        dom.contains(&format!(
            "95% paired bootstrap [{}, {}]",
            pts(&boot["low"]),
            pts(&boot["high"])
        )),
        "the page's interval is run compare's ({boot}): {dom}"
    );
    assert!(
        dom.contains(&format!("<b>{} points</b>", pts(&paired["difference"]))),
        "{dom}"
    );
    assert_eq!(dom.matches("class=\"flip\"").count(), 2, "{dom}");
    for (dir, run, agent) in [
        ("lost", &left, "x"),
        ("lost", &right, "x"),
        ("gained", &left, "y"),
        ("gained", &right, "y"),
    ] {
        let link = format!("href=\"/trials/{run}/pyslug-001/{agent}/r1\"");
        let row = dom
            .split("<tr class=\"flip\"")
            .find(|r| r.contains(&format!("data-direction=\"{dir}\"")))
            .unwrap_or_else(|| panic!("no {dir} flip: {dom}"));
        assert!(row.contains(&link), "the {dir} flip links {link}: {row}");
    }
    chromium::screenshot(&bin, &profile, &url, &screenshots().join("compare.png"));
    // A link of a flip opens that trial.
    let (status, body) = get(&v.1, &format!("/trials/{right}/pyslug-001/x/r1"));
    assert!(status.contains("200"), "{status}: {body}");

    // The runs list offers the comparison.
    let (_, body) = get(&v.1, "/");
    assert!(body.contains("action=\"/compare\""), "{body}");
    assert!(
        body.contains(&format!("<option value=\"{left}\">")),
        "{body}"
    );

    // Bad input: a page that says why, never a crash.
    for (path, code, says) in [
        (
            format!("/compare?left=nope&right={right}"),
            "404",
            "no run `nope` (the left run)".to_string(),
        ),
        (
            format!("/compare?left={left}"),
            "400",
            "Pick two runs".into(),
        ),
        (
            format!("/compare?left={left}&right={right}&left_agent=zz&right_agent=x"),
            "422",
            "the left run has no agent `zz`".into(),
        ),
        (
            format!("/compare?left=%3Cb%3E&right={right}"),
            "404",
            "no run `&lt;b&gt;`".into(),
        ),
    ] {
        let (status, body) = get(&v.1, &path);
        assert!(status.contains(code), "{path}: {status}");
        assert!(body.contains(&says), "{path}: {body}");
        assert!(
            body.contains("id=\"pick-left\""),
            "{path}: the picker stays"
        );
    }
    // The picker alone.
    let (status, body) = get(&v.1, "/compare");
    assert!(status.contains("200"), "{status}");
    assert!(!body.contains("compare-error"), "{body}");
}

/// A running sweep, stopped (SIGTERM: the run is cancelled, PostgreSQL stops) when dropped.
struct Sweep(Child);

impl Drop for Sweep {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: signals our own child by its pid.
            unsafe {
                libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM);
            }
            let _ = self.0.wait();
        }
    }
}

/// Starts a plain `akbench sweep` (embedded PostgreSQL, coordinator and worker) of `noop` and
/// `hang` on one task with two slots: the noop trial ends, the hang trial runs until the sweep
/// is stopped.
fn plain_sweep(tmp: &Path) -> Sweep {
    let manifest = tmp.join("live.yaml");
    std::fs::write(
        &manifest,
        "experiment: aa-live\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    \
         - descriptor: noop\n    - descriptor: hang\nrepetitions: 1\nexecution:\n  runtime: direct\n",
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_akbench"))
        .arg("sweep")
        .arg(&manifest)
        .arg("--data-dir")
        .arg(tmp.join("data/postgres"))
        .args(["--workers", "1", "--slots", "2"])
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--store-root")
        .arg(tmp.join("runs"))
        .arg("--out")
        .arg(tmp.join("out"))
        .arg("--cache")
        .arg(tmp.join("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Sweep)
        .unwrap()
}

/// Waits in the page (at most `secs`) until the run `prefix*` of `/api/runs` satisfies
/// `cond` (a JS expression over `r`); returns that run as the page saw it, or `null`.
fn wait_for_run(b: &mut chromium::Browser, prefix: &str, cond: &str, secs: u64) -> Value {
    b.eval(&format!(
        "new Promise(done => {{ const t0 = Date.now(); (async function f() {{ \
           const runs = (await (await fetch('/api/runs')).json()).runs; \
           const r = runs.find(r => r.key.startsWith('{prefix}')); \
           if (r && ({cond})) done(r); \
           else if (Date.now() - t0 > {ms}) done(null); else setTimeout(f, 100); }})(); }})",
        ms = secs * 1000
    ))
}

#[test]
fn a_plain_sweep_appears_in_the_runs_list_while_it_runs() {
    let Some(bin) = chromium::binary() else {
        return akbench_core::testkit::skip(
            "a_plain_sweep_appears_in_the_runs_list_while_it_runs",
            "chromium is not installed (CI installs it in .ci/run)",
        );
    };
    let tmp = tempfile::tempdir().unwrap();
    // The PostgreSQL account (as root: `postgres`) must reach the data folder.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // An older run whose key sorts after the live one: newest first is by time, not by key.
    let older = sweep_local(
        tmp.path(),
        "older",
        "experiment: zz-older\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    \
         - descriptor: noop\nrepetitions: 1\n",
    );
    let v = view(tmp.path());
    let mut sweep = plain_sweep(tmp.path());
    let mut b = chromium::Browser::start(&bin, &tmp.path().join("chromium"));
    b.navigate(&format!("{}/", v.1));
    let seen = wait_for_run(
        &mut b,
        "aa-live",
        "r.done === 1 && r.state === 'running'",
        240,
    );
    assert!(
        seen.is_object(),
        "the plain sweep's ended trial never showed while it ran: {}",
        get(&v.1, "/api/runs").1
    );
    assert_eq!(seen["planned"], 2, "{seen}");
    assert!(seen["created"].is_string(), "{seen}");
    assert!(
        sweep.0.try_wait().unwrap().is_none(),
        "the sweep still runs (its hang trial)"
    );
    b.navigate(&format!("{}/", v.1));
    let rows = b.eval(
        "Array.from(document.querySelectorAll('tr.run-row')).map(r => \
           [r.dataset.key, r.querySelector('.state').textContent, \
            r.querySelector('.created').textContent, r.querySelector('.label').textContent])",
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows[0][0].as_str().unwrap().starts_with("aa-live"),
        "newest first: {rows:?}"
    );
    assert_eq!(rows[0][1], "running", "{rows:?}");
    assert_eq!(rows[0][3], "1 / 2 trials", "{rows:?}");
    assert!(rows[0][2].as_str().unwrap().ends_with("UTC"), "{rows:?}");
    assert_eq!(rows[1][0], older.as_str(), "{rows:?}");
    assert_eq!(rows[1][1], "finished", "{rows:?}");
    assert_eq!(
        b.eval("document.getElementById('console-errors').hidden"),
        serde_json::json!(true)
    );
    b.screenshot(&screenshots().join("sweep-live.png"));
    // The live trial's page opens while the sweep runs.
    let live_key = rows[0][0].as_str().unwrap().to_string();
    let (status, _) = get(&v.1, &format!("/trials/{live_key}/pyslug-001/noop/r1"));
    assert!(status.contains("200"), "{status}");

    // Stopped (SIGTERM cancels the run): the state follows.
    // SAFETY: signals our own child by its pid.
    assert_eq!(
        unsafe { libc::kill(sweep.0.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    assert_eq!(sweep.0.wait().unwrap().code(), Some(1));
    let ended = wait_for_run(
        &mut b,
        "aa-live",
        "r.state === 'interrupted' && r.done === 2",
        60,
    );
    assert!(ended.is_object(), "{}", get(&v.1, "/api/runs").1);
}
