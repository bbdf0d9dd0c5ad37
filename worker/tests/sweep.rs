//! A whole sweep across processes: a real coordinator (in this process) on a private
//! PostgreSQL, three `akbench-worker` processes, the example corpus, real gRPC over loopback.
//! Ends with valid accounting and exactly one accepted record per planned trial, also when a
//! worker is killed with SIGKILL mid-attempt.

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve, Config, ServeHandle};
mod e2e;

use akbench_core::digest::canonical_json;
use akbench_core::plan::RunPlan;
use akbench_core::spec::ResolvedRunSpec;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use e2e::examples;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tonic::transport::Channel;

struct Sweep {
    tmp: tempfile::TempDir,
    handle: Option<ServeHandle>,
    stop: Option<oneshot::Sender<()>>,
    client: ControlClient<Channel>,
    spec: ResolvedRunSpec,
    plan: RunPlan,
    workers: Vec<Child>,
}

impl Sweep {
    /// A coordinator with `lease_ttl_ms`, and a run of the python example tasks, oracle and
    /// fail, `reps` repetitions, `retries` infrastructure retries; submitted and started.
    async fn start(lease_ttl_ms: u64, reps: u32, retries: u32) -> Sweep {
        Self::start_with(lease_ttl_ms, reps, retries, "pyslug-*", &["oracle", "fail"]).await
    }

    /// Like [`Sweep::start`] for the tasks matching `include` and the given agents.
    async fn start_with(
        lease_ttl_ms: u64,
        reps: u32,
        retries: u32,
        include: &str,
        agents: &[&str],
    ) -> Sweep {
        let tmp = tempfile::tempdir().unwrap();
        let url = test_support::fresh_database().await;
        let mut config = Config::local(url);
        config.lease_ttl_ms = lease_ttl_ms;
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = serve(config, async move {
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
                "experiment: e2e\ntasks:\n  include: [\"{include}\"]\nagents:\n  conditions:\n{}\
                 repetitions: {reps}\nexecution:\n  infrastructure_retries: {retries}\n",
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
        let started = client
            .start_run(pb::StartRunRequest {
                run: spec.identity.run_key.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(started.work_items_created, plan.trials.len() as u64);
        Sweep {
            tmp,
            handle: Some(handle),
            stop: Some(stop),
            client,
            spec,
            plan,
            workers: Vec::new(),
        }
    }

    fn spawn_worker(&mut self, n: usize, slots: u32) {
        let dir = self.tmp.path().join(format!("w{n}"));
        let child = Command::new(env!("CARGO_BIN_EXE_akbench-worker"))
            .arg("--coordinator")
            .arg(format!(
                "http://{}",
                self.handle.as_ref().unwrap().grpc_addr
            ))
            .args([
                "--slots",
                &slots.to_string(),
                "--worker-id",
                &format!("w{n}"),
            ])
            .arg("--cache")
            .arg(dir.join("cache"))
            .arg("--out")
            .arg(dir.join("out"))
            .arg("--tasks-root")
            .arg(examples().join("tasks"))
            .arg("--agents-root")
            .arg(examples().join("agents"))
            .args(["--grace", "5"])
            .env("AKBENCH_LOG", "warn")
            .spawn()
            .unwrap();
        self.workers.push(child);
    }

    async fn status(&mut self) -> pb::RunStatus {
        self.client
            .get_status(pb::GetStatusRequest {
                run: self.spec.identity.run_key.clone(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn run_state(&self) -> String {
        let c = self.handle.as_ref().unwrap().store.client().await.unwrap();
        c.query_one(
            "SELECT state FROM runs WHERE run_id = $1",
            &[&self.spec.identity.run_id],
        )
        .await
        .unwrap()
        .get(0)
    }

    async fn wait_finished(&mut self, limit: Duration) {
        let until = Instant::now() + limit;
        loop {
            let state = self.run_state().await;
            if state == "finished" || state == "cancelled" {
                return;
            }
            assert!(
                Instant::now() < until,
                "the run did not finish in {limit:?}: {:?}",
                self.status().await
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn reconcile(&mut self) -> (pb::ReconcileResponse, serde_json::Value) {
        let r = self
            .client
            .reconcile(pb::ReconcileRequest {
                run: self.spec.identity.run_key.clone(),
                observations_json: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let report = serde_json::from_str(&r.report_json).unwrap();
        (r, report)
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

/// Every attempt's (trial key, number, terminal state, cause, has record), for failures.
async fn history(s: &Sweep) -> String {
    let c = s.handle.as_ref().unwrap().store.client().await.unwrap();
    let rows = c
        .query(
            "SELECT p.key, a.number, a.terminal_state, a.cause, sub.attempt_id IS NOT NULL \
             FROM attempts a JOIN planned_trials p ON p.trial_id = a.trial_id \
             LEFT JOIN submissions sub ON sub.attempt_id = a.attempt_id \
             WHERE p.run_id = $1 ORDER BY p.ordinal, a.number",
            &[&s.spec.identity.run_id],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| {
            format!(
                "{} a{} {:?} {:?} record={}",
                r.get::<_, String>(0),
                r.get::<_, i32>(1),
                r.get::<_, Option<String>>(2),
                r.get::<_, Option<String>>(3),
                r.get::<_, bool>(4)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn accepted_records_per_trial(s: &Sweep) -> Vec<i64> {
    let c = s.handle.as_ref().unwrap().store.client().await.unwrap();
    e2e::accepted_records_per_trial(&c, s.spec.identity.run_id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_worker_processes_run_a_sweep_to_valid_accounting() {
    let mut s = Sweep::start(10_000, 4, 0).await;
    assert_eq!(s.plan.trials.len(), 32);
    for n in 0..3 {
        s.spawn_worker(n, 2);
    }
    s.wait_finished(Duration::from_secs(600)).await;
    let (r, report) = s.reconcile().await;
    assert!(r.valid, "{report}");
    assert_eq!(report["complete"], true, "{}", history(&s).await);
    assert_eq!(report["counts"]["succeeded"], 16);
    assert_eq!(report["counts"]["failed"], 16);
    let per_trial = accepted_records_per_trial(&s).await;
    assert_eq!(per_trial.len(), 32);
    assert!(per_trial.iter().all(|n| *n == 1), "{per_trial:?}");
    let st = s.status().await;
    assert_eq!(
        st.run.as_ref().unwrap().state,
        pb::RunState::Finished as i32
    );
    // The CLI against the same coordinator: reconcile and export every record.
    let url = format!("http://{}", s.handle.as_ref().unwrap().grpc_addr);
    let key = s.spec.identity.run_key.clone();
    let out = s.tmp.path().join("exported");
    let ctl = e2e::workspace_bin("akbench", "akbench");
    let rec = Command::new(&ctl)
        .args(["run", "reconcile", &key, "--json", "--coordinator", &url])
        .output()
        .unwrap();
    assert_eq!(
        rec.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&rec.stdout).unwrap();
    assert_eq!(v["valid"], true, "{v}");
    let exp = Command::new(&ctl)
        .args([
            "run",
            "records",
            &key,
            "--json",
            "--coordinator",
            &url,
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        exp.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&exp.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&exp.stdout).unwrap();
    assert_eq!(v["records"], 32, "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_attempt_is_rescued_and_counted_as_infrastructure() {
    let mut s = Sweep::start(2_000, 2, 2).await;
    s.spawn_worker(0, 2);
    // Wait until worker 0 holds a live lease, then kill it without warning.
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let c = s.handle.as_ref().unwrap().store.client().await.unwrap();
        let live: i64 = c
            .query_one("SELECT count(*) FROM leases WHERE worker_id = 'w0'", &[])
            .await
            .unwrap()
            .get(0);
        if live > 0 {
            break;
        }
        assert!(Instant::now() < until, "worker 0 never took work");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.workers[0].kill().unwrap();
    s.workers[0].wait().unwrap();
    for n in 1..3 {
        s.spawn_worker(n, 2);
    }
    s.wait_finished(Duration::from_secs(600)).await;
    let (r, report) = s.reconcile().await;
    assert!(r.valid, "{report}");
    assert_eq!(report["complete"], true, "{}", history(&s).await);
    assert_eq!(
        report["counts"]["infrastructure_error"], 0,
        "rescued within the budget"
    );
    assert_eq!(report["counts"]["succeeded"], 8);
    assert_eq!(report["counts"]["failed"], 8);
    // The killed attempts are in the history as infrastructure errors, never agent failures.
    let c = s.handle.as_ref().unwrap().store.client().await.unwrap();
    let killed: Vec<(String, Option<String>)> = c
        .query(
            "SELECT terminal_state, cause FROM attempts WHERE worker_id = 'w0' AND fenced",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(!killed.is_empty());
    for (state, cause) in &killed {
        assert_eq!(state, "infrastructure_error");
        assert!(
            cause.as_deref().unwrap_or("").contains("lease expired"),
            "{cause:?}"
        );
    }
    let per_trial = accepted_records_per_trial(&s).await;
    assert!(per_trial.iter().all(|n| *n == 1), "{per_trial:?}");
    s.stop().await;
}

/// Processes on this host still carrying the tag of one of `attempts` (the orchestrator tags
/// every process of an attempt).
fn surviving_processes(attempts: &[uuid::Uuid]) -> Vec<i32> {
    attempts
        .iter()
        .flat_map(|a| akbench_worker::process::processes_tagged(&a.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_sweep_ends_every_trial_cancelled_and_leaves_no_agent_process() {
    let mut s = Sweep::start_with(10_000, 6, 0, "pyslug-001", &["hang"]).await;
    for n in 0..2 {
        s.spawn_worker(n, 1);
    }
    // Wait until both workers run a hanging agent, then cancel the run.
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let c = s.handle.as_ref().unwrap().store.client().await.unwrap();
        let executing: i64 = c
            .query_one(
                "SELECT count(*) FROM attempts WHERE state = 'executing' AND finished_at IS NULL",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if executing == 2 {
            break;
        }
        assert!(Instant::now() < until, "the agents never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancelled = s
        .client
        .cancel_run(pb::CancelRunRequest {
            run: s.spec.identity.run_key.clone(),
            reason: "test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.attempts_cancelling, 2);
    s.wait_finished(Duration::from_secs(120)).await;
    assert_eq!(s.run_state().await, "cancelled");
    let (r, report) = s.reconcile().await;
    assert!(r.valid, "{report}");
    assert_eq!(report["complete"], true, "{}", history(&s).await);
    assert_eq!(report["counts"]["cancelled"], 6, "{report}");
    let c = s.handle.as_ref().unwrap().store.client().await.unwrap();
    let attempts: Vec<uuid::Uuid> = c
        .query("SELECT attempt_id FROM attempts", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(attempts.len(), 2, "queued trials never started");
    assert!(surviving_processes(&attempts).is_empty());
    s.stop().await;
}
