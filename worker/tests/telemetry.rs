//! Telemetry of a whole sweep across processes: a real coordinator (in this process) on a
//! private PostgreSQL, two `akbench-worker` processes with `--metrics-listen`, the example
//! corpus, real gRPC over loopback. After the sweep, the coordinator's and the workers'
//! `/metrics` agree with the run's accounting and pass `promtool check metrics`; with OTLP
//! export on (an in-process receiver), every attempt is one trace across the coordinator
//! and the worker, and a `ctl` command's trace continues into the coordinator.

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve, Config, ServeHandle};
mod e2e;
mod otlp;

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
                    "SELECT state::text FROM runs WHERE run_id = $1",
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
            return akbench_core::testkit::skip(
                &format!("promtool check of {what}"),
                "promtool is not installed (Debian package `prometheus`)",
            );
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

/// The stored lifecycle states of every attempt of the run, by attempt id, in seq order.
async fn attempt_paths(s: &Sweep) -> BTreeMap<String, Vec<String>> {
    let c = s.handle().store.client().await.unwrap();
    let rows = c
        .query(
            "SELECT a.attempt_id::text, t.state FROM attempts a \
             JOIN planned_trials p ON p.trial_id = a.trial_id \
             JOIN transitions t ON t.attempt_id = a.attempt_id \
             WHERE p.run_id = $1 ORDER BY a.attempt_id, t.seq",
            &[&s.spec.identity.run_id],
        )
        .await
        .unwrap();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in rows {
        out.entry(r.get(0)).or_default().push(r.get(1));
    }
    out
}

/// docs/observability.md's span attribute table: (attribute, type, span name patterns).
fn documented_attributes() -> Vec<(String, String, Vec<String>)> {
    let doc = include_str!("../../docs/observability.md");
    let start = doc
        .find("<!-- span-attributes -->")
        .expect("docs/observability.md has the span attribute table");
    doc[start..]
        .lines()
        .skip(3)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let ticked = |c: &str| -> Vec<String> {
                c.split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect()
            };
            (
                cells[1].trim_matches('`').to_string(),
                cells[2].to_string(),
                ticked(cells[3]),
            )
        })
        .collect()
}

/// Whether an exported span name matches a documented pattern (`<...>` is a variable part,
/// `*` any name).
fn name_matches(pattern: &str, name: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let mut literals = Vec::new();
    let mut rest = pattern;
    while let Some(open) = rest.find('<') {
        literals.push(&rest[..open]);
        let close = rest[open..].find('>').map_or(rest.len(), |c| open + c + 1);
        rest = &rest[close..];
    }
    if literals.is_empty() {
        return pattern == name;
    }
    literals.push(rest);
    let (first, last) = (literals[0], literals[literals.len() - 1]);
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) {
        return false;
    }
    let mut middle = &name[first.len()..name.len() - last.len()];
    for lit in &literals[1..literals.len() - 1] {
        match middle.find(lit) {
            Some(i) => middle = &middle[i + lit.len()..],
            None => return false,
        }
    }
    true
}

/// Every exported span's attributes against the documented table: each is listed, with
/// its type, for a span of that name. Returns the mismatches.
fn undocumented(spans: &[otlp::Span]) -> std::collections::BTreeSet<String> {
    let table = documented_attributes();
    let mut out = std::collections::BTreeSet::new();
    for span in spans {
        for (key, kind) in &span.types {
            match table.iter().find(|(a, _, _)| a == key) {
                None => {
                    out.insert(format!(
                        "{key} ({kind}) on {:?} is not documented",
                        span.name
                    ));
                }
                Some((_, want, names)) => {
                    if want != kind {
                        out.insert(format!(
                            "{key} on {:?} is {kind}, documented {want}",
                            span.name
                        ));
                    }
                    if !names.iter().any(|p| name_matches(p, &span.name)) {
                        out.insert(format!(
                            "{key} on {:?}, documented only on {names:?}",
                            span.name
                        ));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn span_name_patterns_match() {
    for (pattern, name, matches) in [
        ("attempt.assign", "attempt.assign", true),
        ("attempt.assign", "attempt.assigned", false),
        ("attempt.run", "attempt.run", true),
        ("attempt.run", "attempt r/t/a/r1", false),
        ("<op> postgresql", "claim postgresql", true),
        ("<service>/<method>", "akbench.v1.Workers/Session", true),
        ("<service>/<method>", "executing", false),
        ("*", "anything", true),
    ] {
        assert_eq!(name_matches(pattern, name), matches, "{pattern} {name}");
    }
    assert!(documented_attributes().len() > 10);
}

const TERMINAL: [&str; 8] = [
    "completed",
    "failed",
    "timeout",
    "cancelled",
    "infrastructure_error",
    "invalid_configuration",
    "evaluation_error",
    "not_graded",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attempt_is_one_trace_across_processes_and_ctl_continues_into_the_coordinator() {
    let receiver = otlp::Receiver::start().await;
    let endpoint = format!("http://{}", receiver.addr);
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    // This process is the coordinator's (each nextest test is its own process).
    for (k, v) in otel {
        std::env::set_var(k, v);
    }
    let telemetry = akbench_telemetry::init(akbench_telemetry::Logs {
        service_name: "akbench-coordinator",
        json: false,
        filter: tracing_subscriber::EnvFilter::new("warn"),
        ansi: false,
        stderr: true,
        capture: None,
    });
    assert!(telemetry.exporting());
    let mut s = Sweep::start(&["oracle", "fail"], 1).await;
    for n in 0..2 {
        s.spawn_worker(n, 2, free_addr(), &otel);
    }
    s.wait_finished(Duration::from_secs(600)).await;
    // Idle now: both sessions keep polling for work (and heartbeating, and the reaper
    // ticks). Let a few claim polls pass: none may be exported as a trace of its own.
    let http = s.handle().http_addr;
    let claims = |text: &str| {
        by_label(text, "akbench_scheduler_db_seconds_count", "op")
            .get("claim")
            .copied()
            .unwrap_or(0.0)
    };
    let idle_from = claims(&scrape(http).await.expect("the coordinator's /metrics"));
    let until = Instant::now() + Duration::from_secs(60);
    while claims(&scrape(http).await.unwrap()) < idle_from + 6.0 {
        assert!(Instant::now() < until, "the idle sessions did not poll");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A ctl command against the coordinator, exporting too.
    let ctl = e2e::workspace_bin("akbench");
    let out = Command::new(&ctl)
        .args(["run", "status", &s.spec.identity.run_key, "--coordinator"])
        .arg(format!("http://{}", s.handle().grpc_addr))
        .envs(otel)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let paths = attempt_paths(&s).await;
    assert_eq!(paths.len(), s.planned);
    let run_id = s.spec.identity.run_id.to_string();
    // Workers flush their spans when they drain; the coordinator when telemetry shuts down.
    s.stop().await;
    telemetry.shutdown();
    let until = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let spans = receiver.spans();
        let finished = spans
            .iter()
            .filter(|s| s.name == "attempt.report finished")
            .count();
        let ctl_seen = spans.iter().any(|s| s.service == "akbench");
        if (finished >= paths.len() && ctl_seen) || Instant::now() > until {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let by_id: BTreeMap<&str, &otlp::Span> =
        spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    // No poll is a trace of its own: every database span belongs to an attempt's trace.
    let attempt_traces: std::collections::BTreeSet<&str> = spans
        .iter()
        .filter(|s| s.name == "attempt.assign")
        .map(|s| s.trace_id.as_str())
        .collect();
    let polls: Vec<&otlp::Span> = spans
        .iter()
        .filter(|s| {
            !s.attr("db.operation.name").is_empty() && !attempt_traces.contains(s.trace_id.as_str())
        })
        .collect();
    assert!(
        polls.is_empty(),
        "{} database spans outside any attempt's trace, e.g. {:#?}",
        polls.len(),
        &polls[..polls.len().min(3)]
    );
    let mut traces = std::collections::BTreeSet::new();
    for (attempt, states) in &paths {
        let of_attempt: Vec<&otlp::Span> = spans
            .iter()
            .filter(|s| s.attr("akbench.attempt.id") == attempt)
            .collect();
        let assign = of_attempt
            .iter()
            .find(|s| s.name == "attempt.assign")
            .unwrap_or_else(|| panic!("no attempt.assign span for {attempt}: {of_attempt:#?}"));
        assert_eq!(assign.service, "akbench-coordinator");
        assert_eq!(
            assign.parent_span_id, "",
            "the assignment is the trace's root"
        );
        assert!(
            !assign.attr("akbench.trial.key").is_empty(),
            "the assignment names its trial: {assign:#?}"
        );
        // It links to its trial's and its run's contexts, derived from their keys alone, so
        // the retries of one trial share the same trial link.
        let trial = akbench_core::telemetry::trial_context(assign.attr("akbench.trial.key"));
        let run = akbench_core::telemetry::run_context(&run_id);
        assert_eq!(assign.attr("akbench.trial.trace_id"), trial.trace_hex());
        assert_eq!(assign.attr("akbench.run.trace_id"), run.trace_hex());
        for ctx in [trial, run] {
            assert!(
                assign
                    .links
                    .contains(&(ctx.trace_hex(), hex::encode(ctx.span_id))),
                "{assign:#?}"
            );
        }
        // One trace per attempt, holding both processes' spans.
        assert!(
            traces.insert(assign.trace_id.clone()),
            "a trace shared by two attempts"
        );
        assert!(
            of_attempt.iter().all(|s| s.trace_id == assign.trace_id),
            "{of_attempt:#?}"
        );
        let worker = of_attempt
            .iter()
            .find(|s| s.name == "attempt.run" && s.service == "akbench-worker")
            .unwrap_or_else(|| panic!("no worker attempt span for {attempt}: {of_attempt:#?}"));
        // Parents intact across the gRPC boundary, both ways.
        assert_eq!(worker.parent_span_id, assign.span_id);
        assert_eq!(
            worker.attr("akbench.trial.key"),
            assign.attr("akbench.trial.key")
        );
        let reports: Vec<&&otlp::Span> = of_attempt
            .iter()
            .filter(|s| s.name.starts_with("attempt.report"))
            .collect();
        assert!(
            reports.iter().any(|r| r.name == "attempt.report finished"),
            "{reports:#?}"
        );
        for r in &reports {
            assert_eq!(r.service, "akbench-coordinator");
            assert_eq!(r.parent_span_id, worker.span_id, "{r:#?}");
        }
        let state = states.last().unwrap();
        assert_eq!(worker.attr("akbench.attempt.state"), state);
        for key in [
            "akbench.trial.key",
            "akbench.agent",
            "akbench.task.release",
            "akbench.worker.id",
        ] {
            assert!(!worker.attr(key).is_empty(), "{key} on {worker:#?}");
        }
        // Every lifecycle phase is a child span of the worker's attempt, in order.
        let mut phases: Vec<&otlp::Span> = spans
            .iter()
            .filter(|s| s.parent_span_id == worker.span_id && !s.attr("akbench.phase").is_empty())
            .collect();
        phases.sort_by_key(|s| s.start);
        let names: Vec<&str> = phases.iter().map(|s| s.name.as_str()).collect();
        let expected: Vec<&str> = states
            .iter()
            .map(String::as_str)
            .filter(|s| !TERMINAL.contains(s))
            .collect();
        assert_eq!(names, expected, "{attempt}");
        // The agent's process is a span of the executing phase.
        if expected.contains(&"executing") {
            let process = spans
                .iter()
                .find(|s| s.name == "agent.process" && s.trace_id == assign.trace_id)
                .unwrap_or_else(|| panic!("no agent.process span in {}", assign.trace_id));
            let parent = by_id[process.parent_span_id.as_str()];
            assert_eq!(parent.name, "executing");
        }
    }
    // The ctl command's trace continues into the coordinator.
    let command = spans
        .iter()
        .find(|s| s.service == "akbench" && s.name == "akbench run status")
        .unwrap_or_else(|| panic!("no ctl span"));
    let server: Vec<&otlp::Span> = spans
        .iter()
        .filter(|s| s.parent_span_id == command.span_id)
        .collect();
    assert!(
        server.iter().any(|s| s.service == "akbench-coordinator"
            && s.trace_id == command.trace_id
            && s.attr("rpc.system") == "grpc"),
        "{server:#?}"
    );
    // Span names and attribute types as docs/observability.md says.
    let wrong = undocumented(&spans);
    assert!(
        wrong.is_empty(),
        "spans differ from docs/observability.md: {wrong:#?}"
    );
}
