//! The real coordinator (scheduler + `Workers` gRPC service) on a private PostgreSQL, served
//! on loopback behind a TCP proxy the tests can cut, plus work items built from a real plan.
#![allow(dead_code)]

use crate::common::Corpus;
use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::scheduler::{NewWorkItem, Scheduler, WorkKind};
use akbench_coordinator::store::Store;
use akbench_coordinator::workers_service::{WorkersConfig, WorkersService};
use akbench_core::clock::SystemClock;
use akbench_core::digest::{canonical_json, digest_of};
use akbench_core::manifest::ExperimentManifest;
use akbench_core::plan::plan;
use akbench_core::record::AttemptRecord;
use akbench_core::spec::{resolve, ResolveInputs};
use akbench_core::work::WorkItem;
use akbench_worker::daemon::{Daemon, Exit, Handle, WorkerConfig};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::TcpListenerStream;
use uuid::Uuid;

/// Polls `f` every 20 ms until it returns `Some`, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A TCP proxy that can cut its connections and refuse new ones.
#[derive(Clone)]
pub struct Proxy {
    pub addr: SocketAddr,
    accepting: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let p = Proxy {
            addr: listener.local_addr().unwrap(),
            accepting: Arc::new(AtomicBool::new(true)),
            conns: Arc::default(),
        };
        let q = p.clone();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                if !q.accepting.load(Ordering::SeqCst) {
                    drop(down);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut up) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
                q.conns.lock().unwrap().push(task.abort_handle());
            }
        });
        p
    }

    /// Drops every open connection (both directions, as a network failure would).
    pub fn cut(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            c.abort();
        }
    }

    /// Refuses (true) or accepts (false) new connections.
    pub fn refuse(&self, refuse: bool) {
        self.accepting.store(!refuse, Ordering::SeqCst);
    }
}

/// The coordinator: scheduler on a fresh database, `Workers` served on loopback.
pub struct Coord {
    /// The database's URL (for `pg_dump` and the like).
    pub db_url: String,
    pub scheduler: Scheduler,
    pub service: WorkersService,
    pub addr: SocketAddr,
    pub proxy: Proxy,
}

impl Coord {
    pub async fn start(lease_ttl: Duration) -> Coord {
        let db_url = test_support::fresh_database().await;
        let store = Store::connect(&db_url).await.expect("connects");
        store.migrate().await.expect("migrates");
        let scheduler = Scheduler::new(store);
        let service = WorkersService::new(
            scheduler.clone(),
            WorkersConfig {
                lease_ttl,
                poll_interval: Duration::from_millis(50),
                max_slots: 256,
                heartbeat_interval: None,
            },
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = service.clone().into_server();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(server)
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        let proxy = Proxy::start(addr).await;
        Coord {
            db_url,
            scheduler,
            service,
            addr,
            proxy,
        }
    }

    /// The URL workers dial (through the proxy).
    pub fn url(&self) -> url::Url {
        format!("http://{}", self.proxy.addr).parse().unwrap()
    }

    pub async fn client(&self) -> deadpool_postgres::Object {
        self.scheduler.store().client().await.unwrap()
    }

    /// Stores a run whose planned trials carry `documents` (work items, or anything) and
    /// enqueues them; returns the run id and trial ids.
    pub async fn enqueue(&self, docs: &[(Uuid, String, serde_json::Value)]) -> (Uuid, Vec<Uuid>) {
        let run_id = Uuid::now_v7();
        let key = format!("run-{run_id}");
        let spec = serde_json::json!({"run_id": run_id, "run_key": key});
        let c = self.client().await;
        c.execute(
            "INSERT INTO run_specs (run_id, run_key, digest, document) VALUES ($1, $2, $3, $4)",
            &[&run_id, &key, &digest_of(&spec), &spec],
        )
        .await
        .unwrap();
        let mut items = Vec::new();
        for (i, (trial_id, agent, doc)) in docs.iter().enumerate() {
            let ordinal = i32::try_from(i).unwrap();
            c.execute(
                "INSERT INTO planned_trials (trial_id, run_id, ordinal, key, task_id, agent, repetition, document) \
                 VALUES ($1, $2, $3, $4, 'answer', $5, 1, $6)",
                // Stored as the coordinator stores a trial: its canonical JSON, as text.
                &[trial_id, &run_id, &ordinal, &format!("{key}/{i}"), agent, &canonical_json(doc)],
            )
            .await
            .unwrap();
            items.push(NewWorkItem {
                trial_id: *trial_id,
                ordinal,
                retry_budget: 0,
                agent: agent.clone(),
                provider_route: None,
                kind: WorkKind::Execute,
                document: None,
            });
        }
        c.execute(
            "INSERT INTO runs (run_id, state, started_at) VALUES ($1, 'running', now())",
            &[&run_id],
        )
        .await
        .unwrap();
        self.scheduler.enqueue(run_id, &items).await.unwrap();
        (run_id, docs.iter().map(|d| d.0).collect())
    }

    /// Enqueues work items.
    pub async fn enqueue_items(&self, items: &[WorkItem]) -> (Uuid, Vec<Uuid>) {
        let docs: Vec<_> = items
            .iter()
            .map(|w| {
                (
                    w.trial.trial_id,
                    w.trial.agent.label.clone(),
                    serde_json::to_value(w).unwrap(),
                )
            })
            .collect();
        self.enqueue(&docs).await
    }

    /// The attempts of a trial: (attempt id, state, terminal state, last seq, epoch).
    pub async fn attempts(&self, trial: Uuid) -> Vec<AttemptRow> {
        self.client()
            .await
            .query(
                "SELECT attempt_id, state, terminal_state, last_seq, epoch, cause FROM attempts \
                 WHERE trial_id = $1 ORDER BY number",
                &[&trial],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| AttemptRow {
                id: r.get(0),
                state: r.get(1),
                terminal: r.get(2),
                last_seq: r.get(3),
                epoch: r.get(4),
                cause: r.get(5),
            })
            .collect()
    }

    /// Waits for the first attempt of `trial` to satisfy `pred`.
    pub async fn wait_attempt(
        &self,
        trial: Uuid,
        what: &str,
        pred: impl Fn(&AttemptRow) -> bool,
    ) -> AttemptRow {
        eventually(120, what, || async {
            self.attempts(trial).await.into_iter().next().filter(&pred)
        })
        .await
    }

    /// Stored transitions of an attempt: (seq, state).
    pub async fn transitions(&self, attempt: Uuid) -> Vec<(i32, String)> {
        self.client()
            .await
            .query(
                "SELECT seq, state FROM transitions WHERE attempt_id = $1 ORDER BY seq",
                &[&attempt],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    /// The stored record of an attempt and its digest.
    pub async fn record(
        &self,
        attempt: Uuid,
    ) -> Option<(AttemptRecord, String, serde_json::Value)> {
        self.client()
            .await
            .query_opt(
                "SELECT record, digest FROM submissions WHERE attempt_id = $1",
                &[&attempt],
            )
            .await
            .unwrap()
            .map(|r| {
                let v: serde_json::Value = r.get(0);
                (serde_json::from_value(v.clone()).unwrap(), r.get(1), v)
            })
    }
}

#[derive(Debug, Clone)]
pub struct AttemptRow {
    pub id: Uuid,
    pub state: String,
    pub terminal: Option<String>,
    pub last_seq: i32,
    pub epoch: i64,
    pub cause: Option<String>,
}

/// Work items from a real spec and plan over the corpus: `reps` trials of task `answer` with
/// agent `agent`.
pub fn work_items(corpus: &Corpus, agent: &str, reps: u32, grade: bool) -> Vec<WorkItem> {
    work_items_in(corpus, agent, reps, grade, "direct")
}

/// [`work_items`] run in `runtime` (`direct` or `sandbox`).
pub fn work_items_in(
    corpus: &Corpus,
    agent: &str,
    reps: u32,
    grade: bool,
    runtime: &str,
) -> Vec<WorkItem> {
    let manifest = corpus
        .root()
        .join(format!("experiment-{agent}-{}.yaml", Uuid::now_v7()));
    std::fs::write(
        &manifest,
        format!(
            "experiment: daemon-{agent}\ntasks:\n  root: tasks\n  include: [\"answer\"]\n\
             agents:\n  root: agents\n  conditions:\n    - descriptor: {agent}\n\
             repetitions: {reps}\ncompute:\n  cpus: 1\n  memory_mb: 512\n\
             execution:\n  runtime: {runtime}\n  infrastructure_retries: 0\n  candidates: 1\n\
             evaluation:\n  grade: {grade}\n  profile: default\nvisibility: private\n"
        ),
    )
    .unwrap();
    let m = ExperimentManifest::load(&manifest).unwrap();
    let spec = resolve(
        &m,
        &ResolveInputs {
            manifest_path: Some(manifest.clone()),
            tasks_root: None,
            agents_root: None,
        },
        &SystemClock,
    )
    .unwrap();
    let p = plan(&spec, &SystemClock);
    p.trials
        .iter()
        .map(|t| WorkItem {
            trial: t.clone(),
            agent: akbench_worker::trial::spec_agent(&spec, t).unwrap().clone(),
            grade: None,
        })
        .collect()
}

/// A daemon configuration for `corpus` against `coord`.
pub fn config(corpus: &Corpus, coord: &Coord, id: &str, slots: u32) -> WorkerConfig {
    let mut c = WorkerConfig::new(
        coord.url(),
        corpus.root().join("cache"),
        corpus.root().join("out"),
        corpus.tasks(),
        corpus.agents(),
    );
    c.worker_id = id.to_string();
    c.slots = slots;
    c.grace = Duration::from_secs(30);
    c
}

/// Starts a daemon in this runtime.
pub fn spawn(config: WorkerConfig) -> (Handle, tokio::task::JoinHandle<Exit>) {
    let d = Daemon::new(config).expect("daemon starts");
    let h = d.handle();
    (h, tokio::spawn(d.run()))
}

/// The agent home of an attempt.
pub fn home_of(corpus: &Corpus, attempt: Uuid) -> PathBuf {
    corpus
        .root()
        .join("cache/work")
        .join(attempt.to_string())
        .join("home")
}

/// Pids listed in a file of `role pid` or `pid` lines.
pub fn pids_in(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().last()?.parse().ok())
        .collect()
}
