//! The viewer over a real coordinator (in-process, on a fresh database of a private
//! PostgreSQL cluster, with operator, viewer and worker tokens) and a real worker running real
//! trials: the coordinator's own HTTP listener serves the pages to headless Chromium (a live
//! run whose progress moves without a reload, a trial page with its diff and test results),
//! `akbench view --coordinator` serves the same pages from the gRPC API, and a viewer token
//! cannot change anything through any route. Screenshots go to
//! `<target>/tmp/view-screenshots/`.

mod common;

use common::{examples, no_console_errors, screenshots, spawn_view};

#[path = "view/chromium.rs"]
mod chromium;

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve_with, Config, ServeHandle, Services};
use akbench_worker::daemon::{Daemon, WorkerConfig};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const OPERATOR: &str = "op-secret-1";
const VIEWER: &str = "viewer-secret-1";
const WORKER: &str = "worker-secret-1";

fn akbench(url: &str, token: &str, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_akbench"));
    for v in ["AKBENCH_COORDINATOR", "AKBENCH_TOKEN", "AKBENCH_STORE_ROOT"] {
        c.env_remove(v);
    }
    c.arg("--coordinator")
        .arg(url)
        .arg("--token")
        .arg(token)
        .args(args)
        .output()
        .unwrap()
}

/// A coordinator with the three tokens and `artifacts` as the workers' artifact folder.
struct Coord {
    rt: tokio::runtime::Runtime,
    handle: Option<ServeHandle>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Coord {
    fn start(tmp: &Path, artifacts: &Path) -> Coord {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let db = rt.block_on(test_support::fresh_database());
        Coord::start_on(rt, db, None, tmp, artifacts)
    }

    /// A coordinator on database `db`, on `addrs` (gRPC, HTTP) when given.
    fn start_on(
        rt: tokio::runtime::Runtime,
        db: String,
        addrs: Option<(SocketAddr, SocketAddr)>,
        tmp: &Path,
        artifacts: &Path,
    ) -> Coord {
        let tokens = tmp.join("tokens");
        std::fs::write(
            &tokens,
            format!("operator:{OPERATOR}\nviewer:{VIEWER}\nworker:{WORKER}\n"),
        )
        .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = rt.block_on(async {
            let mut config = Config::local(db);
            if let Some((grpc, http)) = addrs {
                config.grpc_listen = grpc;
                config.http_listen = http;
            }
            config.token_files = vec![tokens];
            config.artifacts = Some(artifacts.to_path_buf());
            serve_with(config, Services::default(), async move {
                let _ = stopped.await;
            })
            .await
            .expect("serves")
        });
        Coord {
            rt,
            handle: Some(handle),
            stop: Some(stop),
        }
    }

    fn grpc(&self) -> String {
        format!("http://{}", self.handle.as_ref().unwrap().grpc_addr)
    }

    fn http(&self) -> SocketAddr {
        self.handle.as_ref().unwrap().http_addr
    }
}

impl Coord {
    /// Stops the coordinator; hands back its runtime.
    fn stop(mut self) -> tokio::runtime::Runtime {
        self.shutdown();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        std::mem::replace(&mut self.rt, rt)
    }

    fn shutdown(&mut self) {
        if let (Some(stop), Some(h)) = (self.stop.take(), self.handle.take()) {
            let _ = stop.send(());
            let _ = self.rt.block_on(h.wait());
        }
    }
}

impl Drop for Coord {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Plans oracle and fail over one task (two graded trials) on the coordinator and starts it.
fn plan_and_start(url: &str, tmp: &Path) -> String {
    let m = tmp.join("experiment.yaml");
    std::fs::write(
        &m,
        "experiment: viewer\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: fail\nrepetitions: 1\n",
    )
    .unwrap();
    let o = akbench(
        url,
        OPERATOR,
        &[
            "run",
            "plan",
            "--config",
            m.to_str().unwrap(),
            "--tasks-root",
            examples().join("tasks").to_str().unwrap(),
            "--agents-root",
            examples().join("agents").to_str().unwrap(),
            "--store-root",
            tmp.join("runs").to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let key = v["run_key"].as_str().unwrap().to_string();
    let o = akbench(url, OPERATOR, &["run", "start", &key]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    key
}

/// One HTTP/1.1 request over loopback: (status code, headers + body).
fn request(addr: SocketAddr, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    (text[9..12].parse().unwrap(), text)
}

/// Waits in the page until `expr` is truthy (or 120 s pass) and returns its last value.
fn wait_for(b: &mut chromium::Browser, expr: &str) -> serde_json::Value {
    b.eval(&format!(
        "new Promise(r => {{ const t0 = Date.now(); (function f() {{ \
           let v = null; try {{ v = ({expr}); }} catch (e) {{}} \
           if (v || Date.now() - t0 > 120000) r(v); else setTimeout(f, 50); }})(); }})"
    ))
}

#[test]
fn a_live_run_on_a_coordinator_moves_in_chromium_and_its_trial_shows_diff_and_tests() {
    let Some(bin) = chromium::binary() else {
        return akbench_core::testkit::skip(
            "a_live_run_on_a_coordinator_moves_in_chromium_and_its_trial_shows_diff_and_tests",
            "chromium is not installed (CI installs it in .ci/run)",
        );
    };
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let coord = Coord::start(tmp.path(), &artifacts);
    let key = plan_and_start(&coord.grpc(), tmp.path());
    let http = coord.http();
    let shots = screenshots();

    // A browser signs in once with the viewer token (a cookie), then opens the run: no
    // worker yet, so nothing has finished and the ETA cannot be measured.
    let mut b = chromium::Browser::start(&bin, &tmp.path().join("chromium"));
    b.navigate(&format!("http://{http}/login?token={VIEWER}"));
    b.navigate(&format!("http://{http}/runs/{key}"));
    b.eval("window.__samePage = 'yes'");
    let first = wait_for(
        &mut b,
        "document.getElementById('live').getAttribute('data-updates')",
    );
    assert_eq!(first, serde_json::json!("1"));
    assert_eq!(
        b.eval("document.getElementById('progress-label').textContent"),
        serde_json::json!("0 / 2 trials")
    );
    let eta = b.eval("document.getElementById('live-eta').textContent");
    assert!(
        eta.as_str().unwrap().starts_with("n/a"),
        "no trial finished: no ETA, got {eta}"
    );
    assert_eq!(
        b.eval("document.getElementById('live-workers').textContent"),
        serde_json::json!("0 connected")
    );
    b.screenshot(&shots.join("coordinator-live-before.png"));

    // A real worker runs the two trials; the open page follows.
    let mut wc = WorkerConfig::new(
        coord.grpc().parse().unwrap(),
        tmp.path().join("cache"),
        tmp.path().join("work"),
        examples().join("tasks"),
        examples().join("agents"),
    );
    wc.token = Some(WORKER.into());
    wc.artifacts = Some(artifacts.display().to_string());
    wc.worker_id = "viewer-test-worker".into();
    let daemon = Daemon::new(wc).unwrap();
    let worker = daemon.handle();
    let running = coord.rt.spawn(daemon.run());

    let done = wait_for(
        &mut b,
        "document.getElementById('progress').getAttribute('data-done') === '2' && \
         document.getElementById('live-state').textContent === 'finished' && 'done'",
    );
    assert_eq!(
        done,
        serde_json::json!("done"),
        "the open page followed the run to its end: {}",
        b.eval("document.body.innerText")
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
    for bucket in ["succeeded", "failed"] {
        assert_eq!(
            b.eval(&format!(
                "document.querySelector('[data-bucket={bucket}]').textContent"
            )),
            serde_json::json!("1"),
            "{bucket}"
        );
    }
    assert_eq!(
        b.eval("document.getElementById('live-eta').textContent"),
        serde_json::json!("none: the run is finished")
    );
    assert_eq!(
        b.eval("document.getElementById('console-errors').hidden"),
        serde_json::json!(true)
    );
    b.eval(
        "new Promise(r => { const t0 = Date.now(); (function f() { \
           const p = document.getElementById('progress'); \
           if (p.querySelector('.bar').getBoundingClientRect().width >= p.getBoundingClientRect().width - 1 \
               || Date.now() - t0 > 5000) r(true); else setTimeout(f, 20); })(); })",
    );
    b.screenshot(&shots.join("coordinator-live-after.png"));

    // The runs list and the trial page, served by the coordinator from its records and the
    // workers' artifact folder.
    b.navigate(&format!("http://{http}/"));
    let dom = b.eval("document.documentElement.outerHTML");
    let dom = dom.as_str().unwrap();
    assert!(dom.contains(&format!("data-key=\"{key}\"")), "{dom}");
    assert!(dom.contains("2 / 2 trials"), "{dom}");
    no_console_errors(dom);
    b.screenshot(&shots.join("coordinator-runs.png"));
    b.navigate(&format!("http://{http}/trials/{key}/pyslug-001/fail/r1"));
    let dom = b.eval("document.documentElement.outerHTML");
    let dom = dom.as_str().unwrap();
    for want in [
        "class=\"d-file\"",
        "class=\"d-add\"",
        "class=\"t-passed\"",
        "class=\"t-failed\"",
        "<svg class=\"timeline\"",
        "Agent stdout",
        "Digests",
    ] {
        assert!(dom.contains(want), "trial page lacks {want}: {dom}");
    }
    no_console_errors(dom);
    b.screenshot(&shots.join("coordinator-trial.png"));
    drop(b);

    // `akbench view --coordinator`: the same pages from the gRPC API, with the viewer token.
    let (mut child, url) = spawn_view(
        Command::new(env!("CARGO_BIN_EXE_akbench"))
            .env_remove("AKBENCH_TOKEN")
            .args(["view", "--coordinator", &coord.grpc(), "--token", VIEWER])
            .arg("--artifacts")
            .arg(&artifacts)
            .args(["--listen", "127.0.0.1:0"]),
    );
    // The coordinator aggregates compact rows from its database, `view --coordinator` the
    // same rows streamed by `ListTrialRows`: the same summary, causes and trials (buckets,
    // causes, attempts, durations, spend).
    let body = |text: String| -> serde_json::Value {
        serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap()
    };
    let here = body(request(http, "GET", &format!("/api/runs/{key}"), Some(VIEWER)).1);
    let addr: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let there = body(request(addr, "GET", &format!("/api/runs/{key}"), None).1);
    for field in ["summary", "causes", "rates"] {
        assert_eq!(here[field], there[field], "{field}: {here} vs {there}");
    }
    assert_eq!(here["summary"]["total"]["counts"]["succeeded"], 1, "{here}");
    // The runs list shows the measured solve rate from either source (the wire's `Rates`
    // carries it: issue 48, it was n/a through `view --coordinator`).
    let solve = |list: serde_json::Value| {
        list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key.as_str())
            .map(|r| r["solve_rate"].clone())
            .unwrap_or_else(|| panic!("{key} not listed: {list}"))
    };
    let solve_here = solve(body(request(http, "GET", "/api/runs", Some(VIEWER)).1));
    let solve_there = solve(body(request(addr, "GET", "/api/runs", None).1));
    assert_eq!(solve_there, serde_json::json!(0.5));
    assert_eq!(solve_here, solve_there);
    let rows_here = body(
        request(
            http,
            "GET",
            &format!("/api/runs/{key}/trials"),
            Some(VIEWER),
        )
        .1,
    );
    let rows_there = body(request(addr, "GET", &format!("/api/runs/{key}/trials"), None).1);
    assert_eq!(rows_here["total"], 2, "{rows_here}");
    assert_eq!(rows_here, rows_there, "the trial rows differ");
    let profile = tmp.path().join("chromium-2");
    let dom = chromium::dump_dom(&bin, &profile, &format!("{url}runs/{key}"));
    assert!(dom.contains("2 / 2 trials"), "{dom}");
    assert!(dom.contains("id=\"live-state\">finished<"), "{dom}");
    assert!(
        dom.contains("class=\"c-ok\"") && dom.contains("class=\"c-bad\""),
        "{dom}"
    );
    no_console_errors(&dom);
    let dom = chromium::dump_dom(
        &bin,
        &profile,
        &format!("{url}trials/{key}/pyslug-001/fail/r1"),
    );
    assert!(
        dom.contains("class=\"d-add\"") && dom.contains("class=\"t-failed\""),
        "{dom}"
    );
    no_console_errors(&dom);
    chromium::screenshot(
        &bin,
        &profile,
        &format!("{url}trials/{key}/pyslug-001/fail/r1"),
        &shots.join("view-coordinator-trial.png"),
    );
    let _ = child.kill();
    let _ = child.wait();

    worker.drain("the test is over");
    let _ = coord.rt.block_on(running);
}

#[test]
fn a_viewer_token_reads_every_page_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let coord = Coord::start(tmp.path(), &artifacts);
    let key = plan_and_start(&coord.grpc(), tmp.path());
    let http = coord.http();
    let trial = format!("/trials/{key}/pyslug-001/fail/r1");
    let reads = [
        "/".to_string(),
        format!("/runs/{key}"),
        format!("/runs/{key}/status"),
        "/api/runs".to_string(),
        format!("/api/runs/{key}"),
        format!("/api/runs/{key}/trials"),
        format!("/api/runs/{key}/status"),
        format!("/compare?left={key}&right={key}"),
    ];
    for path in &reads {
        assert_eq!(
            request(http, "GET", path, None).0,
            401,
            "{path} without a token"
        );
        assert_eq!(
            request(http, "GET", path, Some(WORKER)).0,
            401,
            "{path} with a worker token"
        );
        let (code, text) = request(http, "GET", path, Some(VIEWER));
        assert_eq!(code, 200, "{path} with the viewer token: {text}");
    }
    // The compare page over the coordinator's trial rows (a run with itself: nothing done
    // yet, so no pair), and an unknown run named on a 404 page.
    let (_, text) = request(
        http,
        "GET",
        &format!("/compare?left={key}&right={key}"),
        Some(VIEWER),
    );
    assert!(text.contains("data-pairs=\"0\""), "{text}");
    assert!(text.contains("Conditions not checked here"), "{text}");
    let (code, text) = request(
        http,
        "GET",
        &format!("/compare?left=nope&right={key}"),
        Some(VIEWER),
    );
    assert_eq!(code, 404, "{text}");
    assert!(text.contains("no run `nope`"), "{text}");
    // No trial has a record yet.
    assert_eq!(request(http, "GET", &trial, Some(VIEWER)).0, 404);
    // Nothing answers a write, whatever the token, on any route of the UI.
    let every = reads.iter().cloned().chain([
        trial.clone(),
        format!("/api/runs/{key}/events"),
        format!("/api/runs/{key}/cancel"),
        format!("/runs/{key}/cancel"),
        "/login".into(),
        "/compare".into(),
    ]);
    for path in every {
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            for token in [Some(VIEWER), Some(OPERATOR)] {
                let (code, text) = request(http, method, &path, token);
                assert!(
                    code == 405 || code == 404 || code == 401,
                    "{method} {path} answered {code}: {text}"
                );
            }
        }
    }
    // Through gRPC a viewer may not cancel or start either.
    let o = akbench(&coord.grpc(), VIEWER, &["run", "cancel", &key]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("operator"),
        "{o:?}"
    );
    // The compact trial rows of `view --coordinator` (`ListTrialRows`): a viewer token reads
    // them (none is done yet), a worker token or none is refused.
    let rows = |token: Option<&str>| -> Result<usize, tonic::Code> {
        coord.rt.block_on(async {
            let channel = tonic::transport::Endpoint::from_shared(coord.grpc())
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut c = akbench_proto::control_client::ControlClient::new(channel);
            let mut req = tonic::Request::new(akbench_proto::v1::ListTrialRowsRequest {
                run: key.clone(),
                ..Default::default()
            });
            if let Some(t) = token {
                req.metadata_mut()
                    .insert("authorization", format!("Bearer {t}").parse().unwrap());
            }
            let mut stream = c
                .list_trial_rows(req)
                .await
                .map_err(|s| s.code())?
                .into_inner();
            let mut n = 0;
            while let Some(b) = stream.message().await.map_err(|s| s.code())? {
                n += b.rows.len();
            }
            Ok(n)
        })
    };
    assert_eq!(rows(Some(VIEWER)), Ok(0));
    assert_eq!(rows(Some(WORKER)), Err(tonic::Code::PermissionDenied));
    assert_eq!(rows(None), Err(tonic::Code::Unauthenticated));
    // The run is as it was: running, both trials queued.
    let (_, text) = request(
        http,
        "GET",
        &format!("/api/runs/{key}/status"),
        Some(VIEWER),
    );
    let body = text.split_once("\r\n\r\n").unwrap().1;
    let s: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(s["run"]["state"], "running", "{s}");
    assert_eq!(s["queued"], 2, "{s}");
    // A browser's sign-in: a wrong token is refused, the viewer token is stored as a cookie
    // that then opens the pages.
    assert_eq!(request(http, "GET", "/login?token=nope", None).0, 401);
    assert_eq!(
        request(http, "GET", &format!("/login?token={WORKER}"), None).0,
        401
    );
    let (code, text) = request(http, "GET", &format!("/login?token={VIEWER}"), None);
    assert_eq!(code, 303, "{text}");
    assert!(
        text.contains(&format!(
            "akbench_token={VIEWER}; Path=/; HttpOnly; SameSite=Strict"
        )),
        "{text}"
    );
    let mut s = std::net::TcpStream::connect(http).unwrap();
    write!(
        s,
        "GET /runs/{key} HTTP/1.1\r\nHost: x\r\nCookie: a=1; akbench_token={VIEWER}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("id=\"live-eta\">n/a"), "{text}");
}

fn worker(
    coord: &Coord,
    tmp: &Path,
    artifacts: &Path,
) -> (
    akbench_worker::daemon::Handle,
    tokio::task::JoinHandle<akbench_worker::daemon::Exit>,
) {
    let mut wc = WorkerConfig::new(
        coord.grpc().parse().unwrap(),
        tmp.join("cache"),
        tmp.join("work"),
        examples().join("tasks"),
        examples().join("agents"),
    );
    wc.token = Some(WORKER.into());
    wc.artifacts = Some(artifacts.display().to_string());
    wc.worker_id = "watch-test-worker".into();
    let daemon = Daemon::new(wc).unwrap();
    let h = daemon.handle();
    (h, coord.rt.spawn(daemon.run()))
}

#[test]
fn a_watch_reconnects_when_the_coordinator_restarts_and_ends_with_the_final_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let db = rt.block_on(test_support::fresh_database());
    let coord = Coord::start_on(rt, db.clone(), None, tmp.path(), &artifacts);
    let addrs = (coord.handle.as_ref().unwrap().grpc_addr, coord.http());
    let url = coord.grpc();
    let key = plan_and_start(&url, tmp.path());

    // The watch, as a user runs it with a viewer token, output to a pipe (plain lines).
    let mut child = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .env_remove("AKBENCH_TOKEN")
        .env_remove("AKBENCH_COORDINATOR")
        .args(["--coordinator", &url, "--token", VIEWER])
        .args(["run", "status", &key, "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.contains(" running: 0/2 finished"), "{first}");

    // The coordinator restarts on the same addresses and database, then a worker runs the
    // trials: the watch reconnects and follows the run to its end.
    // A restart is a new process: the old runtime goes, with every task it still ran.
    coord.stop().shutdown_background();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let coord = Coord::start_on(rt, db, Some(addrs), tmp.path(), &artifacts);
    let (w, running) = worker(&coord, tmp.path(), &artifacts);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{rest}\n{err}");
    assert!(
        err.contains("reconnecting"),
        "the watch lost its stream: {err}"
    );
    assert!(err.contains("accounting valid"), "{err}");
    let last = rest
        .lines()
        .rev()
        .find(|l| l.contains(&key) && !l.starts_with("failure"))
        .unwrap_or_else(|| panic!("no status line after the restart: {rest}"));
    assert!(
        last.contains(" finished: 2/2 finished, 0 queued, 0 running"),
        "{last}"
    );
    assert!(last.contains("pass rate 50.0% (2 graded)"), "{last}");
    assert!(
        rest.contains(&format!(
            "failure {key}/pyslug-001/fail/r1 failed: graded: the tests failed"
        )),
        "{rest}"
    );
    w.drain("the test is over");
    let _ = coord.rt.block_on(running);
}
