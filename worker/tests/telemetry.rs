//! Telemetry of a whole sweep across processes: a real coordinator (in this process) on a
//! private PostgreSQL, two `akbench-worker` processes with `--metrics-listen`, the example
//! corpus, real gRPC over loopback. After the sweep, the coordinator's and the workers'
//! `/metrics` agree with the run's accounting and pass `promtool check metrics`.

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve, Config, ServeHandle};
mod e2e;

use akbench_core::digest::canonical_json;
use akbench_core::spec::ResolvedRunSpec;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use e2e::examples;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tonic::transport::Channel;

struct Sweep {
    tmp: tempfile::TempDir,
    handle: Option<ServeHandle>,
    stop: Option<oneshot::Sender<()>>,
    client: ControlClient<Channel>,
    spec: ResolvedRunSpec,
    planned: usize,
    workers: Vec<Child>,
}

impl Sweep {
    /// A coordinator and a started run of `agents` on the python example tasks.
    async fn start(agents: &[&str], reps: u32) -> Sweep {
        let tmp = tempfile::tempdir().unwrap();
        let url = test_support::fresh_database().await;
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = serve(Config::local(url), async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
        let channel = Channel::from_shared(format!("http://{}", handle.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = ControlClient::new(channel)
            .max_encoding_message_size(64 << 20)
            .max_decoding_message_size(64 << 20);
        let (spec, plan) = e2e::plan_run(
            tmp.path(),
            &format!(
                "experiment: telemetry\ntasks:\n  include: [\"pyslug-*\"]\nagents:\n  conditions:\n{}\
                 repetitions: {reps}\nexecution:\n  infrastructure_retries: 0\n",
                agents
                    .iter()
                    .map(|a| format!("    - descriptor: {a}\n"))
                    .collect::<String>()
            ),
        );
        client
            .submit_plan(pb::SubmitPlanRequest {
                spec_json: canonical_json(&spec),
                spec_digest: spec.digest.clone(),
                plan_json: canonical_json(&plan),
                plan_digest: plan.digest.clone(),
            })
            .await
            .unwrap();
        client
            .start_run(pb::StartRunRequest {
                run: spec.identity.run_key.clone(),
            })
            .await
            .unwrap();
        Sweep {
            tmp,
            handle: Some(handle),
            stop: Some(stop),
            client,
            spec,
            planned: plan.trials.len(),
            workers: Vec::new(),
        }
    }

    fn handle(&self) -> &ServeHandle {
        self.handle.as_ref().unwrap()
    }

    /// Starts worker `n` with `slots`, its metrics on `metrics`, and `env`.
    fn spawn_worker(&mut self, n: usize, slots: u32, metrics: SocketAddr, env: &[(&str, &str)]) {
        let dir = self.tmp.path().join(format!("w{n}"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_akbench-worker"));
        cmd.arg("--coordinator")
            .arg(format!("http://{}", self.handle().grpc_addr))
            .args([
                "--slots",
                &slots.to_string(),
                "--worker-id",
                &format!("w{n}"),
            ])
            .arg("--metrics-listen")
            .arg(metrics.to_string())
            .arg("--cache")
            .arg(dir.join("cache"))
            .arg("--out")
            .arg(dir.join("out"))
            .arg("--artifacts")
            .arg(self.tmp.path().join("artifacts"))
            .env_remove("ANTHROPIC_API_KEY")
            .arg("--tasks-root")
            .arg(examples().join("tasks"))
            .arg("--agents-root")
            .arg(examples().join("agents"))
            .args(["--grace", "5"])
            .env("AKBENCH_LOG", "warn");
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.workers.push(cmd.spawn().unwrap());
    }

    async fn wait_finished(&self, limit: Duration) {
        let until = Instant::now() + limit;
        loop {
            let c = self.handle().store.client().await.unwrap();
            let state: String = c
                .query_one(
                    "SELECT state FROM runs WHERE run_id = $1",
                    &[&self.spec.identity.run_id],
                )
                .await
                .unwrap()
                .get(0);
            if state == "finished" {
                return;
            }
            assert!(
                Instant::now() < until,
                "the run did not finish in {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn reconcile(&mut self) -> serde_json::Value {
        let r = self
            .client
            .reconcile(pb::ReconcileRequest {
                run: self.spec.identity.run_key.clone(),
                observations_json: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.valid, "{}", r.report_json);
        serde_json::from_str(&r.report_json).unwrap()
    }

    async fn stop(mut self) {
        for w in &mut self.workers {
            // SAFETY: signalling a child we spawned.
            unsafe {
                libc::kill(w.id() as i32, libc::SIGTERM);
            }
        }
        for w in &mut self.workers {
            let _ = w.wait();
        }
        let _ = self.stop.take().unwrap().send(());
        self.handle.take().unwrap().wait().await.unwrap();
    }
}

impl Drop for Sweep {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// A free loopback port (bound, read, released).
fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// `GET http://addr/metrics` (HTTP/1.0); `None` while nothing listens there yet.
async fn scrape(addr: SocketAddr) -> Option<String> {
    let mut conn = tokio::net::TcpStream::connect(addr).await.ok()?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    assert!(head.contains(" 200 "), "{head}");
    Some(body.to_string())
}

/// The samples of `name` as (labels, value), e.g. (`state="completed",cause="none"`, 3).
fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let labels = match series.split_once('{') {
                Some((n, rest)) if n == name => rest.trim_end_matches('}').to_string(),
                None if series == name => String::new(),
                _ => return None,
            };
            Some((labels, value.parse().ok()?))
        })
        .collect()
}

/// Sums of `name`'s samples by the value of `label`.
fn by_label(text: &str, name: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (labels, v) in samples(text, name) {
        let key = labels
            .split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{label}=\"")))
            .map(|v| v.trim_end_matches('"').to_string())
            .unwrap_or_default();
        *out.entry(key).or_insert(0.0) += v;
    }
    out
}

/// `promtool check metrics` on `text`; skipped with a notice when promtool is absent.
fn promtool_check(what: &str, text: &str) {
    use std::io::Write as _;
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED promtool check of {what}: promtool is not installed (Debian package `prometheus`)");
            return;
        }
        Err(e) => panic!("failed to run promtool: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics of {what}: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The accounting bucket each terminal state lands in (`completed` splits by verdict).
fn buckets_of(state: &str) -> &'static [&'static str] {
    match state {
        "completed" => &["succeeded", "failed"],
        "failed" => &["agent_failed"],
        "cancelled" => &["cancelled"],
        "timeout" => &["timed_out"],
        "invalid_configuration" => &["invalid"],
        "not_graded" => &["not_graded"],
        "infrastructure_error" => &["infrastructure_error"],
        "evaluation_error" => &["evaluation_error"],
        other => panic!("unknown terminal state {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sweep_metrics_agree_with_the_accounting_and_pass_promtool() {
    let mut s = Sweep::start(&["oracle", "fail", "crash", "claude-code"], 1).await;
    let metrics = [free_addr(), free_addr()];
    for (n, addr) in metrics.iter().enumerate() {
        s.spawn_worker(n, 2, *addr, &[]);
    }
    s.wait_finished(Duration::from_secs(600)).await;
    let report = s.reconcile().await;
    assert_eq!(report["complete"], true, "{report}");
    let http = s.handle().http_addr;
    // The coordinator counts a finish once its transaction committed, just after the run
    // can be seen finished: wait for every planned trial's attempt to be counted.
    let until = Instant::now() + Duration::from_secs(30);
    let coordinator = loop {
        let text = scrape(http).await.expect("the coordinator's /metrics");
        let total: f64 = samples(&text, "akbench_attempts_finished_total")
            .iter()
            .map(|s| s.1)
            .sum();
        if total as usize >= s.planned || Instant::now() > until {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let by_state = by_label(&coordinator, "akbench_attempts_finished_total", "state");
    let counts = &report["counts"];
    let mut seen = 0.0;
    for (state, n) in &by_state {
        let expected: u64 = buckets_of(state)
            .iter()
            .map(|b| counts[*b].as_u64().unwrap())
            .sum();
        assert_eq!(*n as u64, expected, "{state}: {coordinator}\n{report}");
        seen += n;
    }
    assert_eq!(seen as usize, s.planned, "{coordinator}");
    assert!(by_state.len() >= 2, "several final states: {by_state:?}");
    // Nothing re-queued, nothing expired; every attempt was assigned with a latency.
    assert_eq!(samples(&coordinator, "akbench_retries_total")[0].1, 0.0);
    assert_eq!(
        samples(&coordinator, "akbench_lease_expiries_total")[0].1,
        0.0
    );
    assert_eq!(
        samples(&coordinator, "akbench_assignments_total")[0].1 as usize,
        s.planned
    );
    assert_eq!(
        samples(&coordinator, "akbench_dispatch_latency_seconds_count")[0].1 as usize,
        s.planned
    );
    // State read from the database: both workers connected with every slot free.
    assert_eq!(samples(&coordinator, "akbench_workers_connected")[0].1, 2.0);
    assert_eq!(samples(&coordinator, "akbench_free_slots")[0].1, 4.0);
    assert_eq!(samples(&coordinator, "akbench_live_leases")[0].1, 0.0);
    assert!(samples(&coordinator, "akbench_queue_depth").is_empty());
    promtool_check("the coordinator's /metrics", &coordinator);

    // The workers: between them, the same attempts by state; phases observed.
    let mut worker_states: BTreeMap<String, f64> = BTreeMap::new();
    let mut workspaces = 0.0;
    for addr in metrics {
        let text = scrape(addr).await.expect("a worker's /metrics");
        for (state, n) in by_label(&text, "akbench_worker_attempts_finished_total", "state") {
            *worker_states.entry(state).or_insert(0.0) += n;
        }
        workspaces += samples(&text, "akbench_worker_workspace_seconds_count")
            .first()
            .map_or(0.0, |s| s.1);
        assert_eq!(samples(&text, "akbench_worker_attempts_running")[0].1, 0.0);
        assert_eq!(samples(&text, "akbench_worker_slots")[0].1, 2.0);
        promtool_check("a worker's /metrics", &text);
    }
    assert_eq!(worker_states, by_state);
    assert!(workspaces >= 1.0, "some attempt created a workspace");
    s.stop().await;
}
