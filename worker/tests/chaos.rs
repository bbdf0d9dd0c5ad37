//! The chaos check (issue 12): a sweep of deterministic trials (pyslug tasks x the `oracle`
//! and `fail` agents: every oracle trial is solved, every fail trial is not) on four
//! `akbench-worker` processes against an `akbench-coordinator` process on a private
//! PostgreSQL, while workers are SIGKILLed and frozen (SIGSTOP until their leases are reaped,
//! then SIGCONT), the coordinator is SIGKILLed and restarted twice and PostgreSQL is stopped
//! with `pg_ctl stop -m immediate` for longer than the lease TTL and started again. Then it
//! checks and prints: one final outcome per planned trial, no duplicates, no stale completion
//! accepted, no trial misfiled because of a fault, reconcile valid and complete, and the
//! rescue time per fault. Then one `run resume` runs again the trials the faults left
//! `infrastructure_error` (every attempt lost: with `CHAOS_RETRIES=0`, one fault is enough),
//! and every check is made again with no fault to excuse a trial: each planned trial graded
//! with its agent's outcome, and `run records` exporting each exactly once with every attempt
//! it made. Any failed check fails the test.
//!
//! `CHAOS_TRIALS` (default 100) sets the plan size (rounded up to a multiple of 8);
//! `CHAOS_KILLS` / `CHAOS_FREEZES` the worker faults (default 2 each, or trials / 100);
//! `CHAOS_RETRIES` the run's `infrastructure_retries` (default 3; a trial whose every attempt
//! is lost to a fault ends `infrastructure_error`, counted as such and checked to be one);
//! `CHAOS_SEED` the fault order and targets; `CHAOS_KEEP=1` keeps the logs and the
//! PostgreSQL data folder (always kept when a check fails). `bench/chaos` runs it at 1,000 trials.
//!
//! A setup that cannot run the trials stops the check at once, never a silent wait: a worker
//! or the coordinator exiting by itself (a worker refusing to start without `bwrap`, or on a
//! flag it does not know) stops it with that process's log tail; and until the first attempt
//! ends graded, every slot having an attempt end otherwise (infrastructure error, invalid
//! configuration) or `CHAOS_STARTUP_SECS` (default 300) passing stops it with the attempts'
//! causes and the workers' log tails; each stop names the likely cause ([`chaos_watch`]).
//! `CHAOS_WORKER_ARGS` (extra worker flags) and `CHAOS_WORKER_PATH` (the workers' `PATH`)
//! break the setup on purpose, to see those stops.

use akbench_coordinator::pgcluster::PrivateCluster;
mod chaos_watch;
mod e2e;

use akbench_core::digest::canonical_json;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use e2e::examples;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tonic::transport::Channel;

/// Seconds the workers get to end their first trial graded before the check stops
/// (`CHAOS_STARTUP_SECS` overrides).
const STARTUP_SECS: u64 = 300;

/// Lease TTL of the chaos coordinator.
const TTL_MS: u64 = 2_000;
const WORKERS: usize = 4;
const SLOTS: u32 = 2;

/// `name` from the environment, `default` when unset; a value that is not a whole number
/// stops the check with an error naming it (never a silent default).
fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            panic!("{name}={v:?} is not a whole number: set it to one, or unset it for {default}")
        }),
    }
}

fn now_epoch() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling a child process this test spawned and has not reaped.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill({}, {sig})", child.id());
}

/// A small deterministic generator (xorshift64*), seeded per run and printed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillWorker,
    FreezeWorker,
    RestartCoordinator,
    RestartPostgres,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::KillWorker => "worker SIGKILL",
            Fault::FreezeWorker => "worker SIGSTOP past the TTL",
            Fault::RestartCoordinator => "coordinator SIGKILL + restart",
            Fault::RestartPostgres => "PostgreSQL stop -m immediate + start",
        }
    }
}

/// One injected fault: what, on which worker, when (seconds since the epoch).
struct Injected {
    fault: Fault,
    worker: Option<usize>,
    at: f64,
}

struct Chaos {
    tmp: tempfile::TempDir,
    cluster: PrivateCluster,
    db_url: String,
    grpc: SocketAddr,
    http: SocketAddr,
    /// Built once: `workspace_bin` runs `cargo build`, which can wait minutes for the build
    /// folder's lock while the coordinator is down.
    coordinator_bin: std::path::PathBuf,
    coordinator: Option<Child>,
    workers: Vec<Option<Child>>,
    /// When the check started its processes.
    began: Instant,
}

impl Drop for Chaos {
    fn drop(&mut self) {
        for c in self
            .workers
            .iter_mut()
            .chain([&mut self.coordinator])
            .flatten()
        {
            signal(c, libc::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Chaos {
    fn start_coordinator(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.tmp.path().join("coordinator.log"))
            .unwrap();
        self.coordinator = Some(
            e2e::coordinator_command(
                &self.coordinator_bin,
                &self.db_url,
                self.grpc,
                self.http,
                TTL_MS,
            )
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
        );
    }

    fn spawn_worker(&mut self, n: usize) {
        let dir = self.tmp.path().join(format!("w{n}"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.tmp.path().join(format!("w{n}.log")))
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_akbench-worker"));
        command
            .arg("--coordinator")
            .arg(format!("http://{}", self.grpc))
            .args([
                "--slots",
                &SLOTS.to_string(),
                "--worker-id",
                &format!("w{n}"),
                "--grace",
                "5",
            ])
            .arg("--cache")
            .arg(dir.join("cache"))
            .arg("--out")
            .arg(dir.join("out"))
            .arg("--artifacts")
            .arg(self.tmp.path().join("artifacts"))
            .arg("--tasks-root")
            .arg(examples().join("tasks"))
            .arg("--agents-root")
            .arg(examples().join("agents"))
            .args(
                std::env::var("CHAOS_WORKER_ARGS")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .env("AKBENCH_LOG", "warn");
        if let Some(path) = std::env::var_os("CHAOS_WORKER_PATH") {
            command.env("PATH", path);
        }
        let child = command
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.workers[n] = Some(child);
    }

    /// A control client, waiting for the coordinator to listen (stopping the check if the
    /// coordinator process exits meanwhile).
    async fn control(&self) -> ControlClient<Channel> {
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            self.health();
            if let Some(c) = e2e::try_control_client(self.grpc).await {
                return c;
            }
            if Instant::now() > until {
                self.stop(
                    format!("the coordinator never listened on {} in 120 s", self.grpc),
                    &self.logs(&["coordinator"], 30),
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the check at once (a panic naming `what` happened, the likely cause read from
    /// `evidence`, and `evidence` itself: log tails, attempts' causes). The processes are
    /// stopped by [`Chaos`]'s drop.
    fn stop(&self, what: String, evidence: &str) -> ! {
        panic!(
            "chaos: stopped: {what}\nchaos: likely cause: {}\n{evidence}",
            chaos_watch::likely_cause(evidence)
        )
    }

    /// The last `n` lines of the logs of `names` (`coordinator`, `w0`, ...), each headed.
    fn logs(&self, names: &[&str], n: usize) -> String {
        names
            .iter()
            .map(|name| {
                let path = self.tmp.path().join(format!("{name}.log"));
                format!(
                    "--- last {n} lines of {}:\n{}",
                    path.display(),
                    chaos_watch::log_tail(&path, n)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Stops the check at once when a process it started has exited by itself (a worker
    /// refusing to start: no `bwrap`, a flag it does not know; a coordinator that cannot use
    /// its database): with that process's log tail. Processes the check kills are waited
    /// for (and replaced) before the next call.
    fn health(&self) {
        let procs = self
            .workers
            .iter()
            .enumerate()
            .map(|(n, c)| (format!("w{n}"), c))
            .chain([("coordinator".to_string(), &self.coordinator)]);
        for (name, child) in procs {
            let Some(child) = child else { continue };
            if let Some(how) = chaos_watch::exited(child) {
                let what = if name == "coordinator" {
                    "the coordinator".to_string()
                } else {
                    format!("worker {name}")
                };
                self.stop(
                    format!(
                        "{what} (pid {}) exited by itself ({how}) {:.0} s into the check",
                        child.id(),
                        self.began.elapsed().as_secs_f64()
                    ),
                    &self.logs(&[&name], 30),
                );
            }
        }
    }

    /// Waits until a first attempt ends `completed` (graded: the setup runs trials), and
    /// stops the check at once instead when a process exits, when every slot has had an
    /// attempt end otherwise (infrastructure error, invalid configuration, ...) with none
    /// graded, or when `secs` pass with none graded: with the attempts' causes, the workers'
    /// log tails and the likely cause.
    async fn wait_started(&self, secs: u64, trials: u64) {
        let until = Instant::now() + Duration::from_secs(secs);
        let slots = (WORKERS as u64 * u64::from(SLOTS)).min(trials) as i64;
        let db = self.db().await;
        loop {
            self.health();
            let row = db
                .query_one(
                    "SELECT count(*) FILTER (WHERE terminal_state = 'completed'), \
                     count(*) FILTER (WHERE terminal_state <> 'completed'), count(*) \
                     FROM attempts",
                    &[],
                )
                .await
                .unwrap();
            let (graded, other, started): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
            if graded > 0 {
                return;
            }
            let timed_out = Instant::now() > until;
            if other >= slots || timed_out {
                let causes: Vec<String> = db
                    .query(
                        "SELECT terminal_state, coalesce(cause, '(no cause)'), count(*) \
                         FROM attempts WHERE terminal_state IS NOT NULL GROUP BY 1, 2 \
                         ORDER BY 3 DESC LIMIT 5",
                        &[],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| {
                        format!(
                            "  {} x {}: {}",
                            r.get::<_, i64>(2),
                            r.get::<_, String>(0),
                            r.get::<_, String>(1).chars().take(600).collect::<String>()
                        )
                    })
                    .collect();
                let what = if timed_out {
                    format!(
                        "no trial graded in {secs} s (CHAOS_STARTUP_SECS): {started} attempts \
                         started, {other} ended otherwise"
                    )
                } else {
                    format!(
                        "the first {other} attempts ended without a grade (none graded) \
                         {:.0} s into the check: the setup cannot run the trials",
                        self.began.elapsed().as_secs_f64()
                    )
                };
                let names: Vec<String> = (0..WORKERS).map(|n| format!("w{n}")).collect();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                self.stop(
                    what,
                    &format!(
                        "--- attempts ended, by terminal state and cause:\n{}\n{}",
                        if causes.is_empty() {
                            "  (none)".to_string()
                        } else {
                            causes.join("\n")
                        },
                        self.logs(&names, 10)
                    ),
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A fresh database connection (PostgreSQL restarts under the test).
    async fn db(&self) -> tokio_postgres::Client {
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            match tokio_postgres::connect(&self.db_url, tokio_postgres::NoTls).await {
                Ok((client, conn)) => {
                    tokio::spawn(conn);
                    return client;
                }
                Err(e) => assert!(Instant::now() < until, "database unreachable: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls `sql` (one bigint) until `pred` holds; panics after `secs`.
    async fn wait_count(&self, secs: u64, what: &str, sql: &str, pred: impl Fn(i64) -> bool) {
        let until = Instant::now() + Duration::from_secs(secs);
        let db = self.db().await;
        loop {
            self.health();
            let n: i64 = db.query_one(sql, &[]).await.unwrap().get(0);
            if pred(n) {
                return;
            }
            assert!(
                Instant::now() < until,
                "timed out after {secs}s waiting for {what} (last: {n})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn done(&self) -> i64 {
        self.db()
            .await
            .query_one("SELECT count(*) FROM work_items WHERE state = 'done'", &[])
            .await
            .unwrap()
            .get(0)
    }

    /// Workers (by index) holding a live attempt now.
    async fn busy_workers(&self) -> Vec<usize> {
        self.db()
            .await
            .query(
                "SELECT DISTINCT worker_id FROM attempts WHERE finished_at IS NULL \
                 AND worker_id IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .filter_map(|r| r.get::<_, String>(0).strip_prefix('w')?.parse().ok())
            .collect()
    }

    /// Waits until worker `n` holds no live attempt (its leases were released or reaped).
    async fn wait_released(&self, n: usize, what: &str) {
        self.wait_count(
            TTL_MS / 1000 * 10 + 60,
            what,
            &format!(
                "SELECT count(*) FROM attempts WHERE worker_id = 'w{n}' AND finished_at IS NULL"
            ),
            |c| c == 0,
        )
        .await;
    }

    /// Waits until a trial is claimed after `at` (the system makes progress again), or
    /// every trial is done (the fault took the last live trial's last retry: with many
    /// faults on few trials, nothing may be left to claim).
    async fn wait_claim_after(&self, at: f64, what: &str) {
        self.wait_count(
            180,
            what,
            &format!(
                "SELECT (EXISTS (SELECT 1 FROM attempts WHERE started_at > to_timestamp({at})) \
                 OR NOT EXISTS (SELECT 1 FROM work_items WHERE state <> 'done'))::int::int8"
            ),
            |c| c > 0,
        )
        .await;
    }

    async fn inject(&mut self, fault: Fault, rng: &mut Rng) -> Injected {
        match fault {
            Fault::KillWorker | Fault::FreezeWorker => {
                // A worker holding work (wait for one: slots free up between trials).
                let busy = loop {
                    self.health();
                    let b = self.busy_workers().await;
                    if !b.is_empty() {
                        break b;
                    }
                    let left: i64 = self
                        .db()
                        .await
                        .query_one("SELECT count(*) FROM work_items WHERE state <> 'done'", &[])
                        .await
                        .unwrap()
                        .get(0);
                    assert!(left > 0, "the run ended before every fault was injected");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                let n = busy[rng.below(busy.len())];
                let at = now_epoch();
                let child = self.workers[n].as_ref().unwrap();
                if fault == Fault::KillWorker {
                    signal(child, libc::SIGKILL);
                    self.workers[n].take().unwrap().wait().unwrap();
                    self.wait_released(n, "the killed worker's leases to be released")
                        .await;
                    self.spawn_worker(n);
                } else {
                    signal(child, libc::SIGSTOP);
                    self.wait_released(n, "the frozen worker's leases to be reaped")
                        .await;
                    signal(self.workers[n].as_ref().unwrap(), libc::SIGCONT);
                }
                Injected {
                    fault,
                    worker: Some(n),
                    at,
                }
            }
            Fault::RestartCoordinator => {
                let at = now_epoch();
                let mut c = self.coordinator.take().unwrap();
                c.kill().unwrap();
                c.wait().unwrap();
                self.start_coordinator();
                self.control().await;
                Injected {
                    fault,
                    worker: None,
                    at,
                }
            }
            Fault::RestartPostgres => {
                let at = now_epoch();
                self.cluster.crash().unwrap();
                // An outage longer than the lease TTL: heartbeating workers keep their leases.
                tokio::time::sleep(Duration::from_millis(TTL_MS * 3 / 2)).await;
                self.cluster.restart().unwrap();
                Injected {
                    fault,
                    worker: None,
                    at,
                }
            }
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_check() {
    let trials = env_u64("CHAOS_TRIALS", 100).max(8);
    let reps = trials.div_ceil(8);
    let trials = reps * 8;
    let kills = env_u64("CHAOS_KILLS", (trials / 100).max(2));
    let freezes = env_u64("CHAOS_FREEZES", (trials / 100).max(2));
    let retries = env_u64("CHAOS_RETRIES", 3);
    let seed = env_u64(
        "CHAOS_SEED",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1,
    );
    println!(
        "chaos: {trials} trials, {WORKERS} workers x {SLOTS} slots, TTL {TTL_MS} ms, \
         {kills} kills, {freezes} freezes, 2 coordinator restarts, 1 PostgreSQL restart, seed {seed}"
    );
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let cluster = PrivateCluster::start(Some(tmp.path().join("pg"))).unwrap();
    let db_url = cluster.create_database("chaos").await.unwrap();
    let [grpc, http] = e2e::restartable_addrs();
    let mut chaos = Chaos {
        tmp,
        cluster,
        db_url,
        grpc,
        http,
        coordinator_bin: e2e::workspace_bin("akbench-coordinator"),
        coordinator: None,
        workers: (0..WORKERS).map(|_| None).collect(),
        began: Instant::now(),
    };
    chaos.start_coordinator();
    let mut client = chaos.control().await;
    let (spec, ready) = e2e::plan_run(
        chaos.tmp.path(),
        &format!(
            "experiment: chaos\ntasks:\n  include: [\"pyslug-*\"]\nagents:\n  conditions:\n\
             \x20   - descriptor: oracle\n    - descriptor: fail\nrepetitions: {reps}\n\
             execution:\n  runtime: direct\n  infrastructure_retries: {retries}\n"
        ),
    );
    assert_eq!(ready.trials.len() as u64, trials);
    client
        .submit_plan(pb::SubmitPlanRequest {
            spec_json: canonical_json(&spec),
            spec_digest: spec.digest.clone(),
            plan_json: canonical_json(&ready),
            plan_digest: ready.digest.clone(),
        })
        .await
        .unwrap();
    let run = spec.identity.run_key.clone();
    let run_id = spec.identity.run_id;
    let started = client
        .start_run(pb::StartRunRequest { run: run.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(started.work_items_created, trials);
    let began = Instant::now();
    for n in 0..WORKERS {
        chaos.spawn_worker(n);
    }
    // A setup that cannot run the trials (no `bwrap`, a worker that refuses its flags) stops
    // here, with the cause, instead of waiting out the progress timeouts below.
    chaos
        .wait_started(env_u64("CHAOS_STARTUP_SECS", STARTUP_SECS), trials)
        .await;
    println!(
        "chaos: first trial graded {:.1} s after the workers started",
        began.elapsed().as_secs_f64()
    );

    // The faults in a seeded random order, spread over the run by progress.
    let mut faults: Vec<Fault> = std::iter::repeat_n(Fault::KillWorker, kills as usize)
        .chain(std::iter::repeat_n(Fault::FreezeWorker, freezes as usize))
        .chain([
            Fault::RestartCoordinator,
            Fault::RestartCoordinator,
            Fault::RestartPostgres,
        ])
        .collect();
    for i in (1..faults.len()).rev() {
        let j = rng.below(i + 1);
        faults.swap(i, j);
    }
    let mut injected = Vec::new();
    let total = faults.len() as i64;
    for (i, fault) in faults.into_iter().enumerate() {
        // Fault i once (i + 1) / (total + 1) of 70% of the trials are done.
        let target = (i as i64 + 1) * trials as i64 * 7 / 10 / (total + 1);
        chaos
            .wait_count(
                600,
                "progress before the next fault",
                "SELECT count(*) FROM work_items WHERE state = 'done'",
                |d| d >= target,
            )
            .await;
        let done = chaos.done().await;
        assert!(
            done < trials as i64,
            "the run ended before fault {i} ({fault:?})"
        );
        let f = chaos.inject(fault, &mut rng).await;
        println!(
            "chaos: fault {i}: {}{} at {done} done",
            f.fault.name(),
            f.worker.map(|w| format!(" (w{w})")).unwrap_or_default()
        );
        // Every fault is followed by progress before the next one.
        chaos
            .wait_claim_after(f.at, "a claim after the fault")
            .await;
        injected.push(f);
    }

    chaos
        .wait_count(
            900,
            "the run to finish",
            &format!("SELECT count(*) FROM runs WHERE run_id = '{run_id}' AND state = 'finished'"),
            |n| n == 1,
        )
        .await;
    let elapsed = began.elapsed();
    let mut report = check(&chaos, &run, run_id, trials, retries, &injected).await;
    report.push('\n');
    report.push_str(&records_check(&chaos, &run, run_id).await);
    println!("chaos: {} trials in {:.1} s", trials, elapsed.as_secs_f64());
    // One `run resume`: the trials the faults left `infrastructure_error` (every attempt lost;
    // with `CHAOS_RETRIES=0` one fault is enough) run again, with no fault this time. After
    // it every trial must be graded with its agent's outcome and exported exactly once.
    let resumed = client
        .resume_run(pb::ResumeRunRequest {
            run: run.clone(),
            grade: false,
        })
        .await
        .unwrap()
        .into_inner();
    chaos
        .wait_count(
            900,
            "the resumed run to finish",
            &format!(
                "SELECT count(*) FROM runs r WHERE r.run_id = '{run_id}' AND r.state = 'finished' \
                 AND NOT EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.run_id \
                 AND w.state <> 'done')"
            ),
            |n| n == 1,
        )
        .await;
    report.push('\n');
    report.push_str(&after_resume(&chaos, &run, run_id, trials, resumed.requeued).await);
    println!("{report}");
    if report.contains("FAIL") || std::env::var_os("CHAOS_KEEP").is_some() {
        let kept = std::mem::replace(&mut chaos.tmp, tempfile::tempdir().unwrap()).keep();
        assert!(
            !report.contains("FAIL"),
            "chaos check failed; logs kept in {}",
            kept.display()
        );
        println!("chaos: logs and database kept in {}", kept.display());
    }
}

/// The trials of `run_id` that ended `infrastructure_error` because the coordinator took
/// back every one of their attempts (retry budget + 1): each attempt ended
/// `infrastructure_error` and was live on its worker at the instant that worker was killed or
/// frozen, or was fenced (its lease expired or was released: its worker was not heard within
/// the TTL, e.g. across a coordinator restart on a starved machine). By trial, its agent; and
/// how many of them had an attempt lost outside a worker fault.
async fn spent_on_faults(
    db: &tokio_postgres::Client,
    run_id: uuid::Uuid,
    faults: &[Injected],
) -> (BTreeMap<uuid::Uuid, String>, usize) {
    let rows = db
        .query(
            "SELECT w.trial_id, w.agent, w.retry_budget, a.worker_id, a.terminal_state, \
             extract(epoch FROM a.started_at)::float8, extract(epoch FROM a.finished_at)::float8, \
             a.fenced FROM work_items w JOIN attempts a ON a.trial_id = w.trial_id \
             WHERE w.run_id = $1 AND w.outcome = 'infrastructure_error' ORDER BY a.number",
            &[&run_id],
        )
        .await
        .unwrap();
    /// Per attempt: (taken back by the coordinator, live at a worker fault).
    type Lost = Vec<(bool, bool)>;
    let mut by_trial: BTreeMap<uuid::Uuid, (String, i32, Lost)> = BTreeMap::new();
    for r in &rows {
        let worker: Option<String> = r.get(3);
        let terminal: Option<String> = r.get(4);
        let (start, end): (f64, Option<f64>) = (r.get(5), r.get(6));
        let fenced: bool = r.get(7);
        let at_fault = faults.iter().any(|f| {
            f.worker
                .is_some_and(|n| worker.as_deref() == Some(&format!("w{n}")))
                && start <= f.at
                && end.is_some_and(|e| f.at <= e)
        });
        let lost = terminal.as_deref() == Some("infrastructure_error") && (at_fault || fenced);
        by_trial
            .entry(r.get(0))
            .or_insert_with(|| (r.get(1), r.get(2), Vec::new()))
            .2
            .push((lost, at_fault));
    }
    let spent: Vec<_> = by_trial
        .into_iter()
        .filter(|(_, (_, budget, lost))| {
            lost.len() as i64 == i64::from(*budget) + 1 && lost.iter().all(|l| l.0)
        })
        .collect();
    let outside = spent
        .iter()
        .filter(|(_, (_, _, lost))| lost.iter().any(|l| !l.1))
        .count();
    (
        spent
            .into_iter()
            .map(|(t, (agent, _, _))| (t, agent))
            .collect(),
        outside,
    )
}

/// The checks after the one `run resume`: every check of [`check`] with no fault left to
/// excuse a trial (each must now have exactly one accepted final outcome, its agent's), and
/// the export: one record per planned trial, each with every attempt the trial made.
async fn after_resume(
    chaos: &Chaos,
    run: &str,
    run_id: uuid::Uuid,
    trials: u64,
    requeued: u64,
) -> String {
    let mut out = vec![format!(
        "chaos: info one `run resume`: {requeued} trials re-queued (those the faults left \
         infrastructure_error), run again with no fault"
    )];
    out.push(check(chaos, run, run_id, trials, 0, &[]).await);
    out.push(records_check(chaos, run, run_id).await);
    out.join("\n").replace("chaos: ", "chaos: after resume: ")
}

/// `run records` over gRPC: one record per planned trial, none withheld (`not_exported`),
/// each with every attempt the coordinator stored for the trial, in order.
async fn records_check(chaos: &Chaos, run: &str, run_id: uuid::Uuid) -> String {
    use tokio_stream::StreamExt;
    let db = chaos.db().await;
    let attempts: BTreeMap<String, i64> = db
        .query(
            "SELECT w.trial_id::text, count(a.attempt_id) FROM work_items w \
             LEFT JOIN attempts a ON a.trial_id = w.trial_id WHERE w.run_id = $1 GROUP BY 1",
            &[&run_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let mut client = chaos.control().await;
    let mut stream = client
        .fetch_records(pb::FetchRecordsRequest {
            run: run.to_string(),
            trials: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let (mut seen, mut withheld, mut short) = (BTreeMap::<String, u32>::new(), 0, 0);
    while let Some(r) = stream.next().await {
        let r = r.unwrap();
        *seen.entry(r.trial_id.clone()).or_default() += 1;
        if !r.not_exported.is_empty() {
            withheld += 1;
            continue;
        }
        let record: serde_json::Value = serde_json::from_str(&r.record_json).unwrap();
        let n = record["attempts"].as_array().map_or(0, |a| a.len()) as i64;
        if attempts.get(&r.trial_id) != Some(&n) {
            short += 1;
        }
    }
    let once = seen.values().filter(|n| **n == 1).count();
    let ok = once == attempts.len() && seen.len() == attempts.len() && withheld == 0 && short == 0;
    format!(
        "chaos: {} records: {once} of {} planned trials exported exactly once, {withheld} not \
         exported, {short} missing an attempt the coordinator stored",
        if ok { "ok  " } else { "FAIL" },
        attempts.len()
    )
}

/// Runs the checks over the finished run; one line per check, `ok` or `FAIL`.
async fn check(
    chaos: &Chaos,
    run: &str,
    run_id: uuid::Uuid,
    trials: u64,
    retries: u64,
    faults: &[Injected],
) -> String {
    let db = chaos.db().await;
    let mut out = Vec::new();
    fn line_of(ok: bool, what: String) -> String {
        format!("chaos: {} {what}", if ok { "ok  " } else { "FAIL" })
    }
    macro_rules! line {
        ($ok:expr, $what:expr $(,)?) => {
            out.push(line_of($ok, $what))
        };
    }
    let one = |sql: &'static str| {
        let db = &db;
        async move {
            db.query_one(sql, &[&run_id])
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .get::<_, i64>(0)
        }
    };
    let planned = one("SELECT count(*) FROM planned_trials WHERE run_id = $1").await;
    let done = one("SELECT count(*) FROM work_items WHERE run_id = $1 AND state = 'done'").await;
    line!(
        planned == trials as i64 && done == planned,
        format!("planned {planned} trials, {done} with a final outcome"),
    );
    // Trials that spent their infrastructure retries on lost attempts: they end
    // `infrastructure_error` (the right bucket: resumable, never an agent failure), and
    // only when the coordinator took back every one of their attempts (retry budget + 1).
    let (spent, outside_faults) = spent_on_faults(&db, run_id, faults).await;
    // A trial's accepted final outcomes: attempts with an accepted record that ended in a
    // final state (an infrastructure error is retried, never final while budget remains).
    let per_trial: Vec<(uuid::Uuid, i64)> = db
        .query(
            "SELECT w.trial_id, count(sub.attempt_id) FILTER (WHERE a.terminal_state <> 'infrastructure_error') \
             FROM work_items w LEFT JOIN attempts a ON a.trial_id = w.trial_id \
             LEFT JOIN submissions sub ON sub.attempt_id = a.attempt_id \
             WHERE w.run_id = $1 GROUP BY w.trial_id",
            &[&run_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let exactly_one = per_trial
        .iter()
        .filter(|(t, n)| *n == 1 || (*n == 0 && spent.contains_key(t)))
        .count();
    let duplicates: i64 = per_trial
        .iter()
        .filter(|(_, n)| *n > 1)
        .map(|(_, n)| n - 1)
        .sum();
    line!(
        exactly_one as i64 == planned,
        format!(
            "{exactly_one} of {planned} trials have exactly one accepted final outcome \
             (or spent their retries on faults)"
        ),
    );
    line!(duplicates == 0, format!("{duplicates} duplicates"));
    let deciding_not_last = one(
        "SELECT count(*) FROM work_items w JOIN attempts a ON a.trial_id = w.trial_id \
         WHERE w.run_id = $1 AND a.number > w.attempts_used",
    )
    .await;
    line!(
        deciding_not_last == 0,
        format!("{deciding_not_last} attempts after a trial's deciding attempt"),
    );
    let stale = one(
        "SELECT count(*) FROM attempts a JOIN work_items w ON w.trial_id = a.trial_id \
         WHERE w.run_id = $1 AND a.fenced AND (a.terminal_state IS DISTINCT FROM \
         'infrastructure_error' OR EXISTS (SELECT 1 FROM submissions s WHERE s.attempt_id = a.attempt_id))",
    )
    .await;
    let fenced = one(
        "SELECT count(*) FROM attempts a JOIN work_items w ON w.trial_id = a.trial_id \
         WHERE w.run_id = $1 AND a.fenced",
    )
    .await;
    line!(
        stale == 0,
        format!("{stale} stale completions accepted ({fenced} attempts fenced)"),
    );
    // Misfiled: the deciding outcome of each trial against its agent's deterministic one.
    let outcomes: Vec<(uuid::Uuid, String, Option<String>, Option<bool>)> = db
        .query(
            "SELECT w.trial_id, w.agent, w.outcome, (sub.record -> 'grade' ->> 'ok')::boolean \
             FROM work_items w LEFT JOIN attempts a ON a.trial_id = w.trial_id AND a.number = w.attempts_used \
             LEFT JOIN submissions sub ON sub.attempt_id = a.attempt_id WHERE w.run_id = $1",
            &[&run_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let mut misfiled: BTreeMap<String, usize> = BTreeMap::new();
    for (trial, agent, outcome, ok) in &outcomes {
        if spent.contains_key(trial) {
            continue;
        }
        let expected = (agent == "oracle").then_some(true).or(Some(false));
        if outcome.as_deref() != Some("completed") || *ok != expected {
            *misfiled
                .entry(format!("{agent}: {outcome:?} solved={ok:?}"))
                .or_default() += 1;
        }
    }
    line!(
        misfiled.is_empty(),
        format!(
            "{} trials misfiled {misfiled:?}",
            misfiled.values().sum::<usize>()
        ),
    );
    out.push(format!(
        "chaos: info {} trials spent their infrastructure retries on lost attempts (every \
         attempt taken back by the coordinator: live on a worker when it was faulted, or its \
         lease expired or was released): infrastructure_error, resumable; {outside_faults} of \
         them lost an attempt outside a worker fault (its worker not heard within the TTL, \
         e.g. across a coordinator or PostgreSQL restart)",
        spent.len()
    ));
    let mut client = chaos.control().await;
    let r = client
        .reconcile(pb::ReconcileRequest {
            run: run.to_string(),
            observations_json: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let report: serde_json::Value = serde_json::from_str(&r.report_json).unwrap();
    let spent_of = |agent: &str| spent.values().filter(|a| a.as_str() == agent).count() as u64;
    line!(
        r.valid
            && report["complete"] == true
            && report["counts"]["succeeded"] == serde_json::json!(trials / 2 - spent_of("oracle"))
            && report["counts"]["failed"] == serde_json::json!(trials / 2 - spent_of("fail"))
            && report["counts"]["infrastructure_error"] == serde_json::json!(spent.len()),
        format!(
            "reconcile valid {} complete {} counts {}",
            r.valid, report["complete"], report["counts"]
        ),
    );
    // Status reads the counters the coordinator keeps as trials end (run_counts, kept by
    // triggers and the records statement through every fault); reconcile recounts the rows.
    // They must agree.
    let status = client
        .get_status(pb::GetStatusRequest {
            run: run.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    let from_status: BTreeMap<String, u64> = status
        .outcomes
        .iter()
        .filter(|c| c.count > 0)
        .map(|c| (c.state.clone(), c.count))
        .collect();
    let from_rows: BTreeMap<String, u64> = report["counts"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .filter(|(_, n)| *n > 0)
                .collect()
        })
        .unwrap_or_default();
    line!(
        status.finished == planned as u64 && from_status == from_rows,
        format!(
            "status agrees with reconcile: {} finished, outcomes {from_status:?}",
            status.finished
        ),
    );
    // Per worker fault, for each trial the worker held then: the time from the fault until
    // the coordinator took the trial back (its attempt ended `infrastructure_error`: the
    // coordinator's part, bounded by TTL + 2 s) and until its next claim (the rescue time
    // as a user sees it: it also waits for a free slot, the queue is never empty here).
    // Per fault of the coordinator or PostgreSQL: the time until the first claim after it.
    /// Seconds from each fault: until taken back, until claimed again, until the first claim.
    type Times = (Vec<f64>, Vec<f64>, Vec<f64>);
    let mut by_kind: BTreeMap<Fault, Times> = BTreeMap::new();
    for f in faults {
        let first: f64 = db
            .query_one(
                "SELECT extract(epoch FROM min(started_at))::float8 FROM attempts \
                 WHERE started_at > to_timestamp($1)",
                &[&f.at],
            )
            .await
            .unwrap()
            .get(0);
        let entry = by_kind.entry(f.fault).or_default();
        entry.2.push(first - f.at);
        if let Some(n) = f.worker {
            let rows = db
                .query(
                    "SELECT extract(epoch FROM a.finished_at)::float8, \
                     extract(epoch FROM next.started_at)::float8 FROM attempts a \
                     LEFT JOIN attempts next ON next.trial_id = a.trial_id AND next.number = a.number + 1 \
                     WHERE a.worker_id = $1 AND a.started_at <= to_timestamp($2) \
                     AND a.finished_at > to_timestamp($2) AND a.terminal_state = 'infrastructure_error'",
                    &[&format!("w{n}"), &f.at],
                )
                .await
                .unwrap();
            for r in rows {
                entry.0.push(r.get::<_, f64>(0) - f.at);
                // No next attempt: the fault took the trial's last retry.
                if let Some(next) = r.get::<_, Option<f64>>(1) {
                    entry.1.push(next - f.at);
                }
            }
        }
    }
    let bound = TTL_MS as f64 / 1000.0 + 2.0;
    let max = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    for (kind, (mut back, mut claim, mut first)) in by_kind {
        let n = first.len();
        if matches!(kind, Fault::KillWorker | Fault::FreezeWorker) {
            let (bmax, cmax) = (max(&back), max(&claim));
            let (taken, rescued) = (back.len(), claim.len());
            let (bmed, cmed) = (median(&mut back), median(&mut claim));
            // Every fault hits a busy worker, so trials are taken back; they are claimed
            // again unless the fault took their last retry (none left with 0 retries).
            line!(
                taken > 0 && bmax <= bound && (retries == 0 || rescued > 0),
                format!(
                    "{}: {n} faults, {taken} trials taken back after median {bmed:.2} s, \
                     max {bmax:.2} s (bound TTL + 2 s = {bound:.1} s); {rescued} claimed again \
                     (rescue) after median {cmed:.2} s, max {cmax:.2} s",
                    kind.name()
                ),
            );
        } else {
            let fmax = max(&first);
            let med = median(&mut first);
            out.push(format!(
                "chaos: info {}: {n} faults, first claim after the fault: median {med:.2} s, max {fmax:.2} s",
                kind.name()
            ));
        }
    }
    out.join("\n")
}
