//! `akbench view` over a real sweep's records, driven in real headless Chromium: the runs
//! list, a trial page with its diff and test results, and a live run whose progress moves
//! without a reload. Screenshots go to `<target>/tmp/view-screenshots/`.

mod common;

use common::{examples, local_sweep, no_console_errors, screenshots, spawn_view};

#[path = "view/chromium.rs"]
mod chromium;

use akbench::view::index::Index;
use akbench::view::server::{serve, Viewer};
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

/// `akbench sweep --local` of oracle and fail over one task: two graded trials, each with a
/// diff and per-test results. Returns the run key.
fn sweep(tmp: &Path) -> String {
    let m = tmp.join("experiment.yaml");
    std::fs::write(
        &m,
        "experiment: viewer\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: fail\nrepetitions: 1\n",
    )
    .unwrap();
    let out = local_sweep(&m, &examples().join("agents"), tmp)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "sweep: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut keys: Vec<String> = std::fs::read_dir(tmp.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys.pop().unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// One GET over loopback: (status line, body).
fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
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

/// Serves `viewer` in a background runtime; returns its address.
fn start(viewer: Viewer) -> std::net::SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            serve(l, viewer, std::future::pending()).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

#[test]
fn the_runs_list_and_a_trial_page_render_in_chromium() {
    let Some(bin) = chromium::binary() else {
        return akbench_core::testkit::skip(
            "the_runs_list_and_a_trial_page_render_in_chromium",
            "chromium is not installed (CI installs it in .ci/run)",
        );
    };
    let tmp = tempfile::tempdir().unwrap();
    let key = sweep(tmp.path());
    // The command itself, as a user starts it.
    let (mut child, url) = spawn_view(
        Command::new(env!("CARGO_BIN_EXE_akbench"))
            .arg("view")
            .arg(tmp.path().join("out"))
            .arg("--store-root")
            .arg(tmp.path().join("runs"))
            .args(["--listen", "127.0.0.1:0"]),
    );
    let profile = tmp.path().join("chromium");
    let shots = screenshots();

    let dom = chromium::dump_dom(&bin, &profile, &url);
    assert!(dom.contains(&format!("data-key=\"{key}\"")), "{dom}");
    assert!(dom.contains("2 / 2 trials"), "{dom}");
    assert!(dom.contains("fail, oracle"), "{dom}");
    no_console_errors(&dom);
    chromium::screenshot(&bin, &profile, &url, &shots.join("runs.png"));

    let run_url = format!("{url}runs/{key}");
    let dom = chromium::dump_dom(&bin, &profile, &run_url);
    assert!(
        dom.contains("class=\"c-ok\""),
        "the oracle's cell is solved: {dom}"
    );
    assert!(
        dom.contains("class=\"c-bad\""),
        "the fail agent's cell is graded, unsolved: {dom}"
    );
    no_console_errors(&dom);
    chromium::screenshot(&bin, &profile, &run_url, &shots.join("run.png"));

    let trial_url = format!("{url}trials/{key}/pyslug-001/fail/r1");
    let dom = chromium::dump_dom(&bin, &profile, &trial_url);
    for want in [
        "class=\"d-file\"",
        "class=\"d-hunk\"",
        "class=\"d-add\"",
        "class=\"t-passed\"",
        "class=\"t-failed\"",
        "<svg class=\"timeline\"",
        "Digests",
    ] {
        assert!(dom.contains(want), "trial page lacks {want}: {dom}");
    }
    no_console_errors(&dom);
    chromium::screenshot(&bin, &profile, &trial_url, &shots.join("trial.png"));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn hostile_records_are_escaped_and_cannot_point_outside_their_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let key = sweep(tmp.path());
    let root = tmp.path().join("hostile");
    let trial = root.join("t");
    copy_dir(
        &tmp.path().join("out").join(&key).join("pyslug-001/fail/r1"),
        &trial,
    );
    let f = trial.join("run_record.json");
    let mut r: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    r["agent"]["name"] = "<b id=\"pwn\">x</b>".into();
    r["attempts"][0]["agent_process"]["stdout_path"] = "../../../../../../../../etc/passwd".into();
    r["attempts"][0]["workspace"]["diff_path"] = "/etc/passwd".into();
    std::fs::write(&f, serde_json::to_vec(&r).unwrap()).unwrap();
    let mut ix = Index::new(root.canonicalize().unwrap(), None);
    assert!(ix.refresh());
    let addr = start(Viewer::new(ix));

    let (status, body) = get(addr, "/");
    assert!(status.contains("200"), "{status}");
    assert!(
        body.contains("&lt;b id=&quot;pwn&quot;&gt;x&lt;/b&gt;"),
        "{body}"
    );
    assert!(!body.contains("<b id=\"pwn\">"), "{body}");
    let (status, body) = get(addr, &format!("/trials/{key}/pyslug-001/fail/r1"));
    assert!(status.contains("200"), "{status}");
    assert!(
        !body.contains("root:x:0:0"),
        "a path out of the folder was read: {body}"
    );
    assert_eq!(body.matches("class=\"refused\"").count(), 2, "{body}");
    let (status, _) = get(addr, "/trials/nope/nothing");
    assert!(status.contains("404"), "{status}");
}

#[test]
fn a_live_run_moves_without_a_reload() {
    let Some(bin) = chromium::binary() else {
        return akbench_core::testkit::skip(
            "a_live_run_moves_without_a_reload",
            "chromium is not installed (CI installs it in .ci/run)",
        );
    };
    let tmp = tempfile::tempdir().unwrap();
    let key = sweep(tmp.path());
    // The folder starts with one of the two planned trials; the other arrives later.
    let live = tmp.path().join("live");
    let task = Path::new(&key).join("pyslug-001");
    copy_dir(
        &tmp.path().join("out").join(&task).join("oracle"),
        &live.join(&task).join("oracle"),
    );
    let stage = tmp.path().join("stage");
    copy_dir(&tmp.path().join("out").join(&task).join("fail"), &stage);
    let mut ix = Index::new(live.canonicalize().unwrap(), Some(tmp.path().join("runs")));
    assert!(ix.refresh());
    let viewer = Viewer::new(ix);
    let addr = start(viewer.clone());

    let mut b = chromium::Browser::start(&bin, &tmp.path().join("chromium"));
    b.navigate(&format!("http://{addr}/runs/{key}"));
    b.eval("window.__samePage = 'yes'");
    // Wait (in the page) for the stream's first event.
    let first = b.eval(
        "new Promise(r => { const t0 = Date.now(); (function f() { \
           const u = document.getElementById('live').getAttribute('data-updates'); \
           if (u) r(u); else if (Date.now() - t0 > 30000) r(null); else setTimeout(f, 20); })(); })",
    );
    assert_eq!(first, serde_json::json!("1"));
    assert_eq!(
        b.eval("document.getElementById('progress-label').textContent"),
        serde_json::json!("1 / 2 trials")
    );
    b.screenshot(&screenshots().join("live-before.png"));

    std::fs::rename(&stage, live.join(&task).join("fail")).unwrap();
    assert!(viewer.refresh(), "the new record was found");
    let done = b.eval(
        "new Promise(r => { const t0 = Date.now(); (function f() { \
           const d = document.getElementById('progress').getAttribute('data-done'); \
           if (d === '2') r(d); else if (Date.now() - t0 > 30000) r(d); else setTimeout(f, 20); })(); })",
    );
    assert_eq!(
        done,
        serde_json::json!("2"),
        "progress moved in the open page"
    );
    assert_eq!(
        b.eval("document.getElementById('progress-label').textContent"),
        serde_json::json!("2 / 2 trials")
    );
    assert_eq!(
        b.eval("window.__samePage"),
        serde_json::json!("yes"),
        "the page was not reloaded"
    );
    assert_eq!(
        b.eval("performance.getEntriesByType('navigation').length"),
        serde_json::json!(1)
    );
    assert_eq!(
        b.eval("document.querySelector('[data-bucket=failed]').textContent"),
        serde_json::json!("1")
    );
    assert_eq!(
        b.eval("document.getElementById('console-errors').hidden"),
        serde_json::json!(true)
    );
    // Let the bar's width transition end before the picture.
    b.eval(
        "new Promise(r => { const t0 = Date.now(); (function f() { \
           const p = document.getElementById('progress'); \
           if (p.querySelector('.bar').getBoundingClientRect().width >= p.getBoundingClientRect().width - 1 \
               || Date.now() - t0 > 5000) r(true); else setTimeout(f, 20); })(); })",
    );
    b.screenshot(&screenshots().join("live-after.png"));
}

#[test]
fn a_folder_that_is_not_there_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .arg("view")
        .arg(tmp.path().join("missing"))
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a folder") && err.contains("missing"),
        "{err}"
    );
}
