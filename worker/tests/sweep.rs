//! A whole sweep across processes: a real coordinator (in this process) on a private
//! PostgreSQL, three `akbench-worker` processes, the example corpus, real gRPC over loopback.
//! Ends with valid accounting and exactly one accepted record per planned trial, also when a
//! worker is killed with SIGKILL mid-attempt.

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve, Config, ServeHandle};
mod e2e;
#[path = "common/registry.rs"]
#[allow(dead_code)]
mod registry;

use akbench_core::clock::SystemClock;
use akbench_core::digest::canonical_json;
use akbench_core::plan::{plan, RunPlan};
use akbench_core::record::AttemptRecord;
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
    /// The tasks the workers read.
    tasks_root: std::path::PathBuf,
    /// Extra environment of the workers.
    worker_env: Vec<(String, String)>,
}

/// The manifest of a run of the tasks matching `include` with `agents`.
fn manifest(include: &str, agents: &[&str], reps: u32, retries: u32, extra: &str) -> String {
    format!(
        "experiment: e2e\ntasks:\n  include: [\"{include}\"]\nagents:\n  conditions:\n{}\
         repetitions: {reps}\nexecution:\n  infrastructure_retries: {retries}\n{extra}",
        agents
            .iter()
            .map(|a| format!("    - descriptor: {a}\n"))
            .collect::<String>()
    )
}

impl Sweep {
    /// A coordinator with `lease_ttl_ms`, and a run of the python example tasks, oracle and
    /// fail, `reps` repetitions, `retries` infrastructure retries; submitted and started.
    async fn start(lease_ttl_ms: u64, reps: u32, retries: u32) -> Sweep {
        Self::start_with(
            lease_ttl_ms,
            reps,
            retries,
            "pyslug-*",
            &["oracle", "fail"],
            "",
        )
        .await
    }

    /// Like [`Sweep::start`] for the tasks matching `include` and the given agents.
    async fn start_with(
        lease_ttl_ms: u64,
        reps: u32,
        retries: u32,
        include: &str,
        agents: &[&str],
        extra_manifest: &str,
    ) -> Sweep {
        let tmp = tempfile::tempdir().unwrap();
        let (spec, plan) = e2e::plan_run(
            tmp.path(),
            &manifest(include, agents, reps, retries, extra_manifest),
        );
        Self::launch(
            tmp,
            examples().join("tasks"),
            Vec::new(),
            lease_ttl_ms,
            (spec, plan),
        )
        .await
    }

    /// A coordinator with `lease_ttl_ms`, `spec` and its `plan` submitted and started;
    /// workers will read tasks from `tasks_root` and get `worker_env`.
    async fn launch(
        tmp: tempfile::TempDir,
        tasks_root: std::path::PathBuf,
        worker_env: Vec<(String, String)>,
        lease_ttl_ms: u64,
        (spec, plan): (ResolvedRunSpec, RunPlan),
    ) -> Sweep {
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
            tasks_root,
            worker_env,
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
            // One artifact store for all workers: a grading worker fetches the agent's diff
            // that another worker stored.
            .arg("--artifacts")
            .arg(self.tmp.path().join("artifacts"))
            // The claude-code agent's credential is absent: its trials never start.
            .env_remove("ANTHROPIC_API_KEY")
            .arg("--tasks-root")
            .arg(&self.tasks_root)
            .arg("--agents-root")
            .arg(examples().join("agents"))
            .args(["--grace", "5"])
            .env("AKBENCH_LOG", "warn")
            .envs(self.worker_env.iter().cloned())
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
            "SELECT state::text FROM runs WHERE run_id = $1",
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
    let ctl = e2e::workspace_bin("akbench");
    let v = akbench_json(&ctl, &["run", "reconcile", &key, "--coordinator", &url]);
    assert_eq!(v["valid"], true, "{v}");
    let v = akbench_json(
        &ctl,
        &[
            "run",
            "records",
            &key,
            "--coordinator",
            &url,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(v["records"], 32, "{v}");
    // The export is a folder of trial records `run aggregate` reads like local ones.
    let agg = aggregate(&ctl, &out);
    assert_eq!(agg["records"], 32, "{agg}");
    assert_eq!(agg["summary"]["total"]["counts"]["succeeded"], 16, "{agg}");
    assert_eq!(agg["summary"]["total"]["counts"]["failed"], 16, "{agg}");
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
    // Lost with its worker: the lease expired (the worker went silent) or was released
    // when its broken session did not come back within the grace (core::dispatch::Loss),
    // whichever the coordinator noticed first.
    for (state, cause) in &killed {
        assert_eq!(state, "infrastructure_error");
        let cause = cause.as_deref().unwrap_or("");
        assert!(
            cause.starts_with("lease expired: worker w0 went silent")
                || cause.starts_with("lease released: the session of worker w0 broke"),
            "{cause:?}"
        );
    }
    let per_trial = accepted_records_per_trial(&s).await;
    assert!(per_trial.iter().all(|n| *n == 1), "{per_trial:?}");
    // Exported, a killed attempt (no record ever arrived) is reconstructed from what the
    // coordinator stored, and every trial record validates.
    let url = format!("http://{}", s.handle.as_ref().unwrap().grpc_addr);
    let out = s.tmp.path().join("exported");
    let ctl = e2e::workspace_bin("akbench");
    akbench_json(
        &ctl,
        &[
            "run",
            "records",
            &s.spec.identity.run_key,
            "--coordinator",
            &url,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let agg = aggregate(&ctl, &out);
    assert_eq!(agg["records"], 16, "{agg}");
    assert_eq!(agg["refused"].as_array().unwrap().len(), 0, "{agg}");
    let mut reconstructed = 0;
    for t in &s.plan.trials {
        let bytes = std::fs::read(out.join(&t.key).join("run_record.json")).unwrap();
        let r: akbench_core::record::RunRecord = serde_json::from_slice(&bytes).unwrap();
        for a in &r.attempts[..r.attempts.len() - 1] {
            assert_eq!(a.state, akbench_core::lifecycle::State::InfrastructureError);
            let last = a
                .transitions
                .last()
                .unwrap()
                .note
                .clone()
                .unwrap_or_default();
            reconstructed += usize::from(last.contains("record never arrived"));
        }
    }
    assert!(
        reconstructed >= 1,
        "the killed attempt is in its trial's record"
    );
    s.stop().await;
}

/// `akbench run aggregate DIR --json`, which must succeed.
fn aggregate(ctl: &std::path::Path, dir: &std::path::Path) -> serde_json::Value {
    akbench_json(ctl, &["run", "aggregate", dir.to_str().unwrap()])
}

/// `akbench ARGS --json`: must exit 0; its JSON output.
fn akbench_json(ctl: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let o = Command::new(ctl).args(args).arg("--json").output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "akbench {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
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
    let mut s = Sweep::start_with(10_000, 6, 0, "pyslug-001", &["hang"], "").await;
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

/// The deciding attempt of each trial of `s`'s run, by (task id, agent label): its number,
/// its kind and its accepted record.
async fn deciding_records(
    s: &Sweep,
) -> std::collections::BTreeMap<(String, String), (i32, String, Option<AttemptRecord>)> {
    let c = s.handle.as_ref().unwrap().store.client().await.unwrap();
    c.query(
        "SELECT p.task_id, p.agent, a.number, a.kind, sub.record::text \
         FROM work_items w JOIN planned_trials p ON p.trial_id = w.trial_id \
         JOIN attempts a ON a.trial_id = w.trial_id AND a.number = w.attempts_used \
         LEFT JOIN submissions sub ON sub.attempt_id = a.attempt_id \
         WHERE w.run_id = $1",
        &[&s.spec.identity.run_id],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| {
        let record: Option<String> = r.get(4);
        (
            (r.get(0), r.get(1)),
            (
                r.get(2),
                r.get(3),
                record.map(|j| serde_json::from_str(&j).unwrap()),
            ),
        )
    })
    .collect()
}

/// What a verdict is made of: terminal state, solved, score, source, exit code, tests digest
/// and every test's name and outcome.
fn verdict(r: &AttemptRecord) -> serde_json::Value {
    serde_json::json!({
        "state": r.state,
        "ok": r.grade.as_ref().map(|g| g.ok),
        "score": r.grade.as_ref().map(|g| g.score),
        "source": r.grade.as_ref().map(|g| g.source.clone()),
        "exit_code": r.grade.as_ref().map(|g| g.exit_code),
        "tests_digest": r.grade.as_ref().map(|g| g.tests_digest.clone()),
        "tests": r.grade.as_ref().map(|g| g.tests.iter().map(|t| (t.name.clone(), t.outcome)).collect::<Vec<_>>()),
    })
}

/// The differential test of distributed grading: a `grade: false` sweep followed by `run
/// grade` gives each trial the verdict a grading sweep of the same plan gives it; trials
/// whose agent failed or never ran are never graded, and the agent never runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execute_only_sweep_graded_later_matches_a_grading_sweep() {
    let agents = ["oracle", "fail", "crash", "claude-code"];
    // Two globs in the manifest's include list.
    let tasks = r#"pyslug-001", "pyslug-002"#;
    // Execute only.
    let mut a = Sweep::start_with(
        10_000,
        1,
        1,
        tasks,
        &agents,
        "evaluation:\n  grade: false\n",
    )
    .await;
    for n in 0..2 {
        a.spawn_worker(n, 2);
    }
    a.wait_finished(Duration::from_secs(600)).await;
    let (r, report) = a.reconcile().await;
    assert!(r.valid, "{report}");
    let counts = &report["counts"];
    assert_eq!(counts["not_graded"], 4, "{report}\n{}", history(&a).await);
    assert_eq!(counts["agent_failed"], 2, "{report}");
    assert_eq!(counts["invalid"], 2, "{report}");
    let st = a.status().await;
    let rates = st.rates.as_ref().expect("rates");
    assert_eq!(
        rates.pass_rate, None,
        "nothing graded: the pass rate is absent, not 0"
    );
    let executed = deciding_records(&a).await;

    // `akbench run grade` through the CLI against the same coordinator.
    let url = format!("http://{}", a.handle.as_ref().unwrap().grpc_addr);
    let key = a.spec.identity.run_key.clone();
    let ctl = e2e::workspace_bin("akbench");
    let v = akbench_json(&ctl, &["run", "grade", &key, "--coordinator", &url]);
    assert_eq!(v["grading"], 4, "{v}");
    assert_eq!(v["not_gradable"], 0, "{v}");
    a.wait_finished(Duration::from_secs(600)).await;
    let (r, report) = a.reconcile().await;
    assert!(r.valid, "{report}");
    assert_eq!(report["complete"], true, "{}", history(&a).await);
    let counts = &report["counts"];
    assert_eq!(counts["succeeded"], 2, "{report}\n{}", history(&a).await);
    assert_eq!(counts["failed"], 2, "{report}");
    assert_eq!(counts["agent_failed"], 2, "{report}");
    assert_eq!(counts["invalid"], 2, "{report}");
    assert_eq!(counts["not_graded"], 0, "{report}");
    let graded = deciding_records(&a).await;
    for (k, (number, kind, record)) in &graded {
        let (before_n, before_kind, before) = &executed[k];
        let before = before.as_ref().unwrap();
        let record = record.as_ref().unwrap();
        if k.1 == "oracle" || k.1 == "fail" {
            // Graded by a new attempt of its own, from the executed attempt's record.
            assert_eq!((*number, kind.as_str()), (before_n + 1, "grade"), "{k:?}");
            assert_eq!(record.graded_from.as_ref(), Some(&before.attempt), "{k:?}");
            assert_eq!(
                record.timings_ms, before.timings_ms,
                "the agent's timings stay"
            );
            assert_eq!(record.agent_process, before.agent_process);
            assert_eq!(record.observations, before.observations);
            assert_eq!(
                record.transitions[..before.transitions.len()],
                before.transitions[..],
                "the agent run's log is kept as it was"
            );
            assert!(record.grade.is_some(), "{k:?}");
        } else {
            // Never touched: the agent failed (crash) or never ran (missing credential).
            assert_eq!((number, kind), (before_n, before_kind), "{k:?}");
            assert_eq!(record, before, "{k:?}");
            assert_eq!(*number, 1, "{k:?}");
        }
    }
    // No agent ran again: every execute attempt of the run is still the first one.
    let c = a.handle.as_ref().unwrap().store.client().await.unwrap();
    let executes: i64 = c
        .query_one(
            "SELECT count(*) FROM attempts a JOIN work_items w ON w.trial_id = a.trial_id \
             WHERE w.run_id = $1 AND a.kind = 'execute'",
            &[&a.spec.identity.run_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(executes, 8);
    // Grading again finds nothing owed.
    let again = a
        .client
        .resume_run(pb::ResumeRunRequest {
            run: key.clone(),
            grade: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((again.grading, again.not_gradable), (0, 0));
    a.stop().await;

    // The same plan, grading as it goes.
    let mut b = Sweep::start_with(10_000, 1, 1, tasks, &agents, "").await;
    for n in 0..2 {
        b.spawn_worker(n, 2);
    }
    b.wait_finished(Duration::from_secs(600)).await;
    let direct = deciding_records(&b).await;
    assert_eq!(direct.len(), graded.len());
    for (k, (_, _, record)) in &direct {
        let later = graded[k].2.as_ref().unwrap();
        assert_eq!(
            verdict(later),
            verdict(record.as_ref().unwrap()),
            "{k:?}: graded later vs graded at once"
        );
    }
    b.stop().await;
}

/// A run of the image-based example task under `container` on a fresh coordinator and one
/// worker, its image tag pinned at plan time to the digest pushed to the loopback registry
/// `reg`; `extra` is appended to the manifest.
async fn container_sweep(reg: &registry::Registry, digest: &str, extra: &str) -> Sweep {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = tmp.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let task = "image-pyslug-001";
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks").join(task))
        .arg(tasks.join(task))
        .status()
        .unwrap()
        .success());
    let toml = tasks.join(task).join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(
        text.contains("127.0.0.1:5000/akbench/base:bookworm"),
        "{text}"
    );
    std::fs::write(&toml, text.replace("127.0.0.1:5000", &reg.addr)).unwrap();
    std::os::unix::fs::symlink(examples().join("repos"), tmp.path().join("repos")).unwrap();
    let manifest = manifest(
        task,
        &["oracle", "fail"],
        1,
        1,
        &format!("  runtime: container\n{extra}"),
    );
    let spec = e2e::resolve_run(tmp.path(), &manifest, &tasks)
        .pin_images(|_| Ok::<_, String>(digest.to_string()), &SystemClock)
        .unwrap();
    let ready = plan(&spec, &SystemClock).ready();
    let env = vec![(
        akbench_core::image::registry::INSECURE_VAR.to_string(),
        reg.addr.clone(),
    )];
    Sweep::launch(tmp, tasks, env, 10_000, (spec, ready)).await
}

/// Distributed grading of a `container` run: a `grade: false` sweep under `container`,
/// then `run grade`: each executed trial is graded by a grade attempt in the image its plan
/// pinned (the grade's runtime is `container`, never the sandbox over the host's
/// toolchain), with the verdict a grading sweep of the same tasks gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_run_graded_later_is_graded_in_its_image_with_the_same_verdict() {
    const TEST: &str = "a_container_run_graded_later_is_graded_in_its_image_with_the_same_verdict";
    if let Some(why) = registry::missing() {
        akbench_core::testkit::skip(TEST, &why);
        return;
    }
    let reg = registry::Registry::start();
    let digest = reg.push(
        "akbench/base:bookworm",
        &[(&registry::base_tar(), "tar")],
        &["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        None,
        None,
    );
    let pinned = format!("{}/akbench/base@{digest}", reg.addr);

    // Execute only, then grade.
    let mut a = container_sweep(&reg, &digest, "evaluation:\n  grade: false\n").await;
    a.spawn_worker(0, 2);
    a.wait_finished(Duration::from_secs(600)).await;
    let (_, report) = a.reconcile().await;
    assert_eq!(
        report["counts"]["not_graded"],
        2,
        "{report}\n{}",
        history(&a).await
    );
    let executed = deciding_records(&a).await;
    let key = a.spec.identity.run_key.clone();
    let owed = a
        .client
        .resume_run(pb::ResumeRunRequest {
            run: key.clone(),
            grade: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((owed.grading, owed.not_gradable), (2, 0));
    a.wait_finished(Duration::from_secs(600)).await;
    let (r, report) = a.reconcile().await;
    assert!(r.valid, "{report}");
    assert_eq!(
        report["counts"]["not_graded"],
        0,
        "{report}\n{}",
        history(&a).await
    );
    let graded = deciding_records(&a).await;
    a.stop().await;
    assert_eq!(graded.len(), 2);
    for (k, (number, kind, record)) in &graded {
        let (before_n, _, before) = &executed[k];
        let record = record
            .as_ref()
            .unwrap_or_else(|| panic!("{k:?}: no record"));
        assert_eq!((*number, kind.as_str()), (before_n + 1, "grade"), "{k:?}");
        assert_eq!(
            record.graded_from.as_ref(),
            Some(&before.as_ref().unwrap().attempt),
            "{k:?}"
        );
        let grade = record
            .grade
            .as_ref()
            .unwrap_or_else(|| panic!("{k:?}: {:?}", record.cause));
        assert_eq!(
            grade.runtime.as_ref().map(|r| r.name.as_str()),
            Some("container"),
            "{k:?}: graded in the image"
        );
    }

    // The same tasks, grading as they go.
    let mut b = container_sweep(&reg, &digest, "").await;
    assert_eq!(
        b.plan.trials[0].task_source.image.as_deref(),
        Some(pinned.as_str())
    );
    b.spawn_worker(0, 2);
    b.wait_finished(Duration::from_secs(600)).await;
    let direct = deciding_records(&b).await;
    b.stop().await;
    assert_eq!(direct.len(), graded.len());
    for (k, (_, _, record)) in &direct {
        let later = graded[k].2.as_ref().unwrap();
        let now = record.as_ref().unwrap();
        assert_eq!(
            verdict(later),
            verdict(now),
            "{k:?}: graded later vs at once"
        );
        assert_eq!(
            now.grade.as_ref().map(|g| g.ok),
            Some(k.1 == "oracle"),
            "{k:?}"
        );
    }
}

/// Best-of-N (issue 16): a candidate whose worker is killed mid-attempt is retried as an
/// infrastructure error of that candidate (a new attempt `<trial>/c<i>/a2`), never counted
/// as a sample or turned into another candidate; the trial-level selection and pass@k see
/// three measured candidates per trial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_lost_to_a_killed_worker_is_retried_not_counted() {
    let mut s = Sweep::start_with(
        2_000,
        1,
        1,
        "pyslug-001",
        &["oracle", "fail"],
        "  candidates: 3\n",
    )
    .await;
    assert_eq!(s.plan.trials.len(), 6, "two trials x three candidates");
    s.spawn_worker(0, 2);
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
    s.spawn_worker(1, 2);
    s.wait_finished(Duration::from_secs(600)).await;
    let (r, report) = s.reconcile().await;
    assert!(r.valid, "{report}");
    assert_eq!(report["complete"], true, "{}", history(&s).await);
    assert_eq!(report["planned"], 6);
    assert_eq!(report["counts"]["infrastructure_error"], 0, "rescued");
    let c = &report["candidates"];
    assert_eq!(c["planned_trials"], 2, "{c}");
    assert_eq!(c["counts"]["succeeded"], 1, "{c}");
    assert_eq!(c["counts"]["failed"], 1, "{c}");
    for t in c["trials"].as_array().unwrap() {
        assert_eq!(t["measured"], 3, "every candidate counted once: {t}");
        assert_eq!(t["candidates"].as_array().unwrap().len(), 3, "{t}");
    }
    // pass@1 and pass@3: the oracle's trial 1, the failing agent's 0.
    assert_eq!(c["pass_at"][0]["value"], 0.5, "{c}");
    assert_eq!(c["pass_at"][1]["k"], 3, "{c}");
    assert_eq!(c["pass_at"][1]["value"], 0.5, "{c}");
    // The killed attempts: infrastructure errors of their candidate, retried under the same
    // candidate identity (attempt 2), never a new candidate.
    let db = s.handle.as_ref().unwrap().store.client().await.unwrap();
    let killed: Vec<(String, i32, String)> = db
        .query(
            "SELECT p.key, a.number, a.terminal_state FROM attempts a \
             JOIN planned_trials p ON p.trial_id = a.trial_id \
             WHERE a.worker_id = 'w0' AND a.fenced",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert!(!killed.is_empty(), "{}", history(&s).await);
    for (key, number, state) in &killed {
        assert_eq!(state, "infrastructure_error", "{key}");
        assert!(key.contains("/c"), "a candidate's attempt: {key}");
        let retried: i64 = db
            .query_one(
                "SELECT count(*) FROM attempts a JOIN planned_trials p ON p.trial_id = a.trial_id \
                 WHERE p.key = $1 AND a.number = $2",
                &[key, &(number + 1)],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(retried, 1, "{key} a{number} retried as a{}", number + 1);
    }
    let per_trial = accepted_records_per_trial(&s).await;
    assert_eq!(per_trial.len(), 6);
    assert!(per_trial.iter().all(|n| *n == 1), "{per_trial:?}");
    s.stop().await;
}
