//! Coordinator dispatch benchmark: N synthetic worker sessions over real gRPC against the
//! real coordinator and a private PostgreSQL cluster (fsync on). Each attempt is claim ->
//! 11 transitions (one batch) -> record upload -> finish; the items are queued before the
//! clock starts and the sessions open with it, as the raw loop's rows are inserted before
//! pgbench runs. Reports the enqueue-to-assignment latency with idle slots (p50/p99), then
//! `PAIRS` pairs of phases: the dispatch's attempts/s with its CPU and WAL bytes per attempt,
//! then a raw pgbench loop (one SKIP LOCKED claim+complete per transaction, 8 clients) on the
//! same cluster with its CPU and WAL bytes per transaction; each pair's ratio, and the median
//! of the pairs' ratios as the bench's figure (a change of the machine's speed during the run
//! falls on both sides of a pair). Each latency sample is a run of its own (a run whose items
//! all settled ends), and the reaper is stopped while a run is seeded and queued (its safety
//! net ends a running run that has no item yet).
//!
//! `cargo bench -p akbench-coordinator --bench dispatch` (about 1.5 min); environment:
//! `ATTEMPTS` (20000 per pair), `PAIRS` (3), `SESSIONS` (8), `SLOTS` (8), `LATENCY_SAMPLES`
//! (200, after `LATENCY_WARMUP` (32) not counted), `PGBENCH_SECONDS` (5 per pair), the report rounds' `ROUND_WRITERS` and
//! `ROUND_TOGETHER`;
//! `AKBENCH_BENCH_STATS=1` loads `pg_stat_statements` and prints the statements and the
//! trigger functions of the last pair's dispatch phase by total time and the rows each table had
//! written (inserted, updated and how many of those HOT, deleted) and the phase's WAL records by
//! kind (`pg_waldump --stats=record`), and explains statements slower
//! than `AKBENCH_BENCH_EXPLAIN_MS` (30) in the server log, a fraction
//! `AKBENCH_BENCH_EXPLAIN_RATE` (1) of them, and logs every statement (a COMMIT included)
//! slower than 10 ms and every autovacuum there.

#[path = "common/synthetic.rs"]
mod synthetic;

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use akbench_coordinator::pgcluster::{ClusterOptions, PrivateCluster};
use akbench_coordinator::scheduler::test_support::seed_run;
use akbench_coordinator::scheduler::{Caps, Scheduler};
use akbench_coordinator::store::Store;
use akbench_coordinator::workers_service::{WorkersConfig, WorkersService};
use akbench_proto::v1::{coordinator_message::Body as Out, Subject};
use synthetic::{env, messages, session};
use tokio::sync::Notify;

/// Shared counters of the synthetic workers.
struct Progress {
    finished: AtomicU64,
    assigned: AtomicU64,
    last_assigned: std::sync::Mutex<Option<Instant>>,
    changed: Notify,
}

async fn worker(addr: std::net::SocketAddr, id: String, slots: u32, progress: Arc<Progress>) {
    let (tx, mut inbound) = session(addr, id, slots).await.expect("opens a session");
    while let Ok(Some(m)) = inbound.message().await {
        match m.body {
            Some(Out::Assignment(a)) => {
                *progress.last_assigned.lock().unwrap() = Some(Instant::now());
                progress.assigned.fetch_add(1, Ordering::Relaxed);
                progress.changed.notify_waiters();
                for m in messages(&a.attempt_id, a.epoch, "") {
                    tx.send(m).await.unwrap();
                }
            }
            Some(Out::Ack(a)) if a.subject == Subject::Finished as i32 => {
                progress.finished.fetch_add(1, Ordering::Relaxed);
                progress.changed.notify_waiters();
            }
            Some(Out::Refusal(r)) => panic!("refused: {r:?}"),
            _ => {}
        }
    }
}

async fn wait_until(progress: &Progress, f: impl Fn(&Progress) -> bool) {
    loop {
        let changed = progress.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if f(progress) {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), changed).await;
    }
}

/// One pair of phases: the dispatch of the queued items, then the raw loop.
struct Pair {
    /// Attempts per second.
    rate: f64,
    elapsed: Duration,
    enqueue_took: Duration,
    /// CPU per attempt in ms: this process, PostgreSQL.
    cpu: Option<(f64, f64)>,
    /// WAL bytes per attempt.
    wal: Option<f64>,
    raw_tps: Option<f64>,
    /// PostgreSQL CPU per raw transaction, ms.
    raw_cpu: Option<f64>,
    /// WAL bytes per raw transaction.
    raw_wal: Option<f64>,
}

impl Pair {
    fn line(&self) -> String {
        let mut out = format!(
            "{:.0} attempts/s ({:.2} s; enqueue {:.2} s before it)",
            self.rate,
            self.elapsed.as_secs_f64(),
            self.enqueue_took.as_secs_f64()
        );
        if let Some((own, pg)) = self.cpu {
            out += &format!(", CPU per attempt {own:.3} ms process + {pg:.3} ms PostgreSQL");
        }
        if let Some(w) = self.wal {
            out += &format!(", WAL {w:.0} B");
        }
        match self.raw_tps {
            Some(tps) => out += &format!("; raw {tps:.0} tx/s, ratio {:.2}", self.rate / tps),
            None => out += "; raw loop not available",
        }
        out
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// CPU seconds used so far by this process and by the cluster's server processes (the
/// postmaster and its children), from `/proc`; `None` where `/proc` is not readable.
fn cpu_seconds(cluster: &PrivateCluster) -> Option<(f64, f64)> {
    let tick: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0);
    // Fields after the command name: state (3), ppid (4), ..., utime (14), stime (15),
    // cutime (16), cstime (17): exited backends count in their postmaster's cutime/cstime.
    let stat = |pid: &str| -> Option<(u32, f64)> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &text[text.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ppid = fields.get(1)?.parse().ok()?;
        let mut ticks = 0.0;
        for field in &fields[11..15] {
            ticks += field.parse::<f64>().ok()?;
        }
        Some((ppid, ticks / tick))
    };
    let own = stat("self")?.1;
    let pid_file = std::fs::read_to_string(cluster.data_dir().join("postmaster.pid")).ok()?;
    let postmaster: u32 = pid_file.lines().next()?.trim().parse().ok()?;
    let mut server = stat(&postmaster.to_string())?.1;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.bytes().all(|b| b.is_ascii_digit()) {
            if let Some((ppid, cpu)) = stat(&name) {
                if ppid == postmaster {
                    server += cpu;
                }
            }
        }
    }
    Some((own, server))
}

/// The cluster's WAL insert position, read once: in bytes (the difference of two readings is
/// the WAL written between them, which the machine's load does not blur as it blurs CPU
/// time) and as `pg_lsn` text (for `pg_waldump`).
async fn wal_position(store: &Store) -> Option<(i64, String)> {
    let c = store.client().await.ok()?;
    let row = c
        .query_one(
            "SELECT (p - '0/0'::pg_lsn)::bigint, p::text FROM pg_current_wal_insert_lsn() p",
            &[],
        )
        .await
        .ok()?;
    Some((row.try_get(0).ok()?, row.try_get(1).ok()?))
}

/// `pg_waldump --stats=record` over `from..to`: the WAL records of a phase by kind, with
/// their full-page images, per attempt (`n`).
fn print_wal_kinds(cluster: &PrivateCluster, from: &str, to: &str, n: usize) {
    let bin = ["/usr/lib/postgresql/15/bin/pg_waldump", "pg_waldump"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok());
    let Some(bin) = bin else {
        println!("  WAL by kind: pg_waldump not found");
        return;
    };
    let out = Command::new(bin)
        .arg("-p")
        .arg(cluster.data_dir().join("pg_wal"))
        .args(["-s", from, "-e", to, "--stats=record"])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            println!(
                "  WAL of the throughput phase by kind ({n} attempts; pg_waldump --stats=record):"
            );
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                println!("    {line}");
            }
        }
        Ok(o) => println!(
            "  WAL by kind: pg_waldump failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => println!("  WAL by kind: pg_waldump failed: {e}"),
    }
}

/// The statements of the throughput phase by total (planning + execution) time.
async fn print_statements(store: &Store) {
    let c = store.client().await.unwrap();
    let rows = c
        .query(
            "SELECT calls, total_plan_time, total_exec_time, rows,
                    regexp_replace(left(query, 110), '\\s+', ' ', 'g')
             FROM pg_stat_statements
             ORDER BY total_plan_time + total_exec_time DESC LIMIT 25",
            &[],
        )
        .await
        .unwrap();
    println!("statements by total time (ms): calls, plan, exec, rows, query");
    for r in rows {
        let (calls, plan, exec, n, q): (i64, f64, f64, i64, String) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        println!("{calls:>7} {plan:>9.0} {exec:>9.0} {n:>8}  {q}");
    }
    let rows = c
        .query(
            "SELECT calls, total_time, self_time, funcname FROM pg_stat_user_functions
             ORDER BY total_time DESC LIMIT 10",
            &[],
        )
        .await
        .unwrap();
    println!("trigger and SQL functions by total time (ms): calls, total, self, function");
    for r in rows {
        let (calls, total, own, f): (i64, f64, f64, String) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        println!("{calls:>7} {total:>9.0} {own:>9.0}  {f}");
    }
    let rows = c
        .query(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
             FROM pg_stat_user_tables
             WHERE n_tup_ins + n_tup_upd + n_tup_del > 0
             ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC",
            &[],
        )
        .await
        .unwrap();
    println!("rows written by table: inserted, updated (HOT), deleted");
    for r in rows {
        let (t, ins, upd, hot, del): (String, i64, i64, i64, i64) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        println!("{ins:>9} {upd:>9} ({hot:>7}) {del:>9}  {t}");
    }
}

fn pgbench(cluster: &PrivateCluster, db: &str, seconds: usize) -> Option<f64> {
    let bin = ["/usr/lib/postgresql/15/bin/pgbench", "pgbench"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok())?;
    let dir = tempfile::tempdir().ok()?;
    let script = dir.path().join("claim_complete.sql");
    std::fs::write(
        &script,
        "BEGIN;\n\
         WITH c AS (SELECT id FROM raw_jobs WHERE state = 'ready' ORDER BY id \
         FOR UPDATE SKIP LOCKED LIMIT 1) \
         UPDATE raw_jobs j SET state = 'done', done_at = now() FROM c WHERE j.id = c.id;\n\
         COMMIT;\n",
    )
    .ok()?;
    let out = Command::new(bin)
        .env("PGPASSWORD", cluster.password())
        .args(["-n", "-c", "8", "-j", "2", "-T", &seconds.to_string(), "-f"])
        .arg(&script)
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &cluster.port().to_string(),
            "-U",
            "postgres",
            db,
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let tps = text
        .lines()
        .find(|l| l.starts_with("tps = "))?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok();
    println!(
        "pgbench: {}",
        text.lines()
            .filter(|l| l.starts_with("tps") || l.contains("latency average"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    tps
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let attempts = env("ATTEMPTS", 20_000);
    let sessions = env("SESSIONS", 8);
    let slots = env("SLOTS", 8) as u32;
    let samples = env("LATENCY_SAMPLES", 200);
    let warmup = env("LATENCY_WARMUP", 32);
    let pg_seconds = env("PGBENCH_SECONDS", 5);
    let pairs = env("PAIRS", 3);

    let stats = std::env::var_os("AKBENCH_BENCH_STATS").is_some();
    // With stats: statements slower than this are explained in the server log (a sample).
    let explain_ms = env("AKBENCH_BENCH_EXPLAIN_MS", 30);
    let explain_rate =
        std::env::var("AKBENCH_BENCH_EXPLAIN_RATE").unwrap_or_else(|_| "1".to_string());
    let settings = if stats {
        vec![
            (
                "shared_preload_libraries".into(),
                "pg_stat_statements".into(),
            ),
            ("pg_stat_statements.track_planning".into(), "on".into()),
            ("track_functions".into(), "pl".into()),
            ("session_preload_libraries".into(), "auto_explain".into()),
            (
                "auto_explain.log_min_duration".into(),
                format!("{explain_ms}ms"),
            ),
            ("auto_explain.log_triggers".into(), "on".into()),
            ("auto_explain.sample_rate".into(), explain_rate.clone()),
            ("auto_explain.log_analyze".into(), "on".into()),
            ("auto_explain.log_nested_statements".into(), "on".into()),
            ("log_lock_waits".into(), "on".into()),
            // Slow statements, COMMIT included: a slow WAL flush shows here.
            ("log_min_duration_statement".into(), "10ms".into()),
            ("log_autovacuum_min_duration".into(), "0".into()),
            ("deadlock_timeout".into(), "20ms".into()),
        ]
    } else {
        Vec::new()
    };
    let cluster = PrivateCluster::start_with(ClusterOptions {
        settings,
        ..ClusterOptions::default()
    })
    .expect("private cluster");
    let url = cluster.create_database("bench").await.expect("database");
    let store = Store::connect(&url).await.expect("connects");
    store.migrate().await.expect("migrates");
    if let Ok(sql) = std::env::var("AKBENCH_BENCH_SQL") {
        // An experiment: SQL run once after the migrations (e.g. drop a trigger to see
        // what it costs).
        if let Err(e) = store.client().await.unwrap().batch_execute(&sql).await {
            let why = e
                .as_db_error()
                .map_or(e.to_string(), |d| d.message().to_string());
            panic!(
                "AKBENCH_BENCH_SQL failed: {why}; fix the SQL (it runs once, after the migrations)"
            );
        }
    }
    if stats {
        let c = store.client().await.unwrap();
        c.batch_execute("CREATE EXTENSION pg_stat_statements")
            .await
            .unwrap();
    }
    let scheduler = Scheduler::new(store.clone())
        .with_round_writers(env(
            "ROUND_WRITERS",
            akbench_coordinator::scheduler::ROUND_WRITERS,
        ))
        .with_round_together(env(
            "ROUND_TOGETHER",
            akbench_coordinator::scheduler::ROUND_TOGETHER,
        ));
    let service = WorkersService::new(
        scheduler.clone(),
        WorkersConfig {
            lease_ttl: Duration::from_secs(30),
            ..Default::default()
        },
    );
    let mut reaper = service.spawn_reaper();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = service.clone().into_server();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(server)
            .serve_with_incoming(akbench_coordinator::server::accepted(listener))
            .await
            .unwrap();
    });
    let progress = Arc::new(Progress {
        finished: AtomicU64::new(0),
        assigned: AtomicU64::new(0),
        last_assigned: std::sync::Mutex::new(None),
        changed: Notify::new(),
    });
    let latency_workers: Vec<_> = (0..sessions)
        .map(|i| {
            tokio::spawn(worker(
                addr,
                format!("bench-{i}"),
                slots,
                Arc::clone(&progress),
            ))
        })
        .collect();
    while service.connected() < sessions {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Dispatch latency with idle slots: one item at a time, after `warmup` items dispatched
    // the same way and not counted (the first claims and enqueues of each of the pool's
    // connections prepare their statements: 11-28 ms, the slowest samples of every run
    // before they were set apart).
    // Each sample is the one item of a run of its own, seeded before its clock starts: a run
    // whose items are all settled ends (core's idle rule), so a second item enqueued into
    // the run of the first would never be claimed. The reaper is stopped meanwhile: its
    // safety net ends a running run that has no item yet, as a seeded run has until its
    // enqueue commits.
    reaper.abort();
    let _ = (&mut reaper).await;
    let mut warmup_max = Duration::ZERO;
    let mut latencies = Vec::with_capacity(samples);
    // The enqueue's own transaction, part of each sample: with the sample, it tells a slow
    // commit from a slow claim.
    let mut enqueues = Vec::with_capacity(samples);
    for n in 0..warmup + samples {
        let run = seed_run(&store, 1, "noop", &Caps::default()).await.unwrap();
        let items = run.items("noop", 0);
        let before = progress.finished.load(Ordering::Relaxed);
        let t0 = Instant::now();
        scheduler.enqueue(run.run_id, &items).await.unwrap();
        let enqueued = t0.elapsed();
        wait_until(&progress, |p| p.finished.load(Ordering::Relaxed) > before).await;
        let at = progress.last_assigned.lock().unwrap().unwrap();
        let latency = at.saturating_duration_since(t0);
        if n < warmup {
            warmup_max = warmup_max.max(latency);
        } else {
            enqueues.push(enqueued);
            latencies.push(latency);
        }
    }
    // The slowest samples with their place in the sequence.
    let mut slowest: Vec<(usize, Duration)> = latencies.iter().copied().enumerate().collect();
    slowest.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
    slowest.truncate(5);
    let slowest: Vec<(usize, Duration, Duration)> = slowest
        .into_iter()
        .map(|(i, d)| (i, d, enqueues[i]))
        .collect();
    latencies.sort();
    enqueues.sort();

    // Throughput against the raw loop, in `PAIRS` pairs of phases: each pair times the
    // dispatch of `ATTEMPTS` queued items, then runs the raw loop for `PGBENCH_SECONDS`, so
    // that a change of the machine's speed during the run (this VM's raw loop moves 2x
    // between consecutive runs) falls on both sides of a pair's ratio; the median ratio is
    // the bench's figure.
    for w in latency_workers {
        w.abort();
    }
    while service.connected() > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let raw_db = "raw";
    let raw_url = cluster.create_database(raw_db).await.expect("raw database");
    let raw = Store::connect(&raw_url).await.unwrap();
    // Enough ready rows for every pair's loop at well above this machine's rate.
    let raw_rows = 100_000 * pairs.max(1) * pg_seconds.max(1) / 2;
    raw.client()
        .await
        .unwrap()
        .batch_execute(&format!(
            "CREATE TABLE raw_jobs (id bigserial PRIMARY KEY, state text NOT NULL, done_at timestamptz);
             INSERT INTO raw_jobs (state) SELECT 'ready' FROM generate_series(1, {raw_rows});
             CREATE INDEX raw_jobs_ready ON raw_jobs (id) WHERE state = 'ready';"
        ))
        .await
        .unwrap();
    // Apart: VACUUM cannot run inside the implicit transaction of several statements.
    raw.client()
        .await
        .unwrap()
        .batch_execute("VACUUM ANALYZE raw_jobs")
        .await
        .unwrap();
    let mut pair_figures: Vec<Pair> = Vec::new();
    for k in 0..pairs.max(1) {
        let last = k + 1 == pairs.max(1);
        // The items are queued before the clock starts and with no session open, as the raw
        // loop's rows are inserted before pgbench runs: both phases time claiming and
        // completing queued work. The sessions open when the clock starts.
        // The reaper is stopped while the run is seeded and queued (its safety net would end
        // the run before its items exist), and runs again through the timed phase.
        if !reaper.is_finished() {
            reaper.abort();
            let _ = (&mut reaper).await;
        }
        let run = seed_run(&store, attempts, "noop", &Caps::default())
            .await
            .unwrap();
        let items = run.items("noop", 0);
        let base = progress.finished.load(Ordering::Relaxed);
        let enqueue_started = Instant::now();
        scheduler.enqueue(run.run_id, &items).await.unwrap();
        let enqueue_took = enqueue_started.elapsed();
        reaper = service.spawn_reaper();
        if stats && last {
            let c = store.client().await.unwrap();
            c.batch_execute("SELECT pg_stat_statements_reset(), pg_stat_reset()")
                .await
                .unwrap();
        }
        let cpu0 = cpu_seconds(&cluster);
        let at0 = wal_position(&store).await;
        let t0 = Instant::now();
        let workers: Vec<_> = (0..sessions)
            .map(|i| {
                tokio::spawn(worker(
                    addr,
                    format!("bench-t{k}-{i}"),
                    slots,
                    Arc::clone(&progress),
                ))
            })
            .collect();
        let target = base + attempts as u64;
        wait_until(&progress, |p| p.finished.load(Ordering::Relaxed) >= target).await;
        let elapsed = t0.elapsed();
        let cpu1 = cpu_seconds(&cluster);
        let at1 = wal_position(&store).await;
        for w in workers {
            w.abort();
        }
        while service.connected() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if stats && last {
            print_statements(&store).await;
        }

        let cpu2 = cpu_seconds(&cluster);
        let wal2 = wal_position(&raw).await.map(|w| w.0);
        let raw_tps = pgbench(&cluster, raw_db, pg_seconds);
        let cpu3 = cpu_seconds(&cluster);
        let wal3 = wal_position(&raw).await.map(|w| w.0);
        let pair = Pair {
            rate: attempts as f64 / elapsed.as_secs_f64(),
            elapsed,
            enqueue_took,
            cpu: cpu0.zip(cpu1).map(|(a, b)| {
                (
                    (b.0 - a.0) * 1e3 / attempts as f64,
                    (b.1 - a.1) * 1e3 / attempts as f64,
                )
            }),
            wal: at0
                .as_ref()
                .zip(at1.as_ref())
                .map(|((a, _), (b, _))| (b - a) as f64 / attempts as f64),
            raw_tps,
            raw_cpu: cpu2
                .zip(cpu3)
                .zip(raw_tps)
                .map(|((a, b), tps)| (b.1 - a.1) * 1e3 / (tps * pg_seconds as f64)),
            raw_wal: wal2
                .zip(wal3)
                .zip(raw_tps)
                .map(|((c, d), tps)| (d - c) as f64 / (tps * pg_seconds as f64)),
        };
        println!("  pair {}: {}", k + 1, pair.line());
        pair_figures.push(pair);
        if let (true, true, Some((_, from)), Some((_, to))) = (stats, last, &at0, &at1) {
            print_wal_kinds(&cluster, from, to, attempts);
        }
    }
    drop(raw);

    println!("coordinator dispatch benchmark");
    println!(
        "  sessions x slots: {sessions} x {slots}; attempts: {attempts} per pair, {} pairs",
        pair_figures.len()
    );
    for (k, p) in pair_figures.iter().enumerate() {
        println!("  pair {}: {}", k + 1, p.line());
    }
    println!(
        "  dispatch latency (enqueue -> assignment, idle slots, {samples} samples after {warmup} not counted, the slowest of those {:.2} ms): p50 {:.2} ms, p99 {:.2} ms",
        warmup_max.as_secs_f64() * 1e3,
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "  of which the enqueue's transaction: p50 {:.2} ms, p99 {:.2} ms",
        percentile(&enqueues, 0.50).as_secs_f64() * 1e3,
        percentile(&enqueues, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "  slowest samples (sample number: ms, of which the enqueue): {}",
        slowest
            .iter()
            .map(|(i, d, e)| {
                let ms = |d: &Duration| d.as_secs_f64() * 1e3;
                format!("{}: {:.2} ({:.2})", i + 1, ms(d), ms(e))
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let median = |mut v: Vec<f64>| -> Option<f64> {
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    };
    let of = |f: &dyn Fn(&Pair) -> Option<f64>| median(pair_figures.iter().filter_map(f).collect());
    if let (Some(own), Some(pg)) = (of(&|p| p.cpu.map(|c| c.0)), of(&|p| p.cpu.map(|c| c.1))) {
        println!(
            "  CPU per attempt (median of the pairs): {own:.3} ms this process (coordinator + synthetic workers), {pg:.3} ms PostgreSQL"
        );
    }
    if let Some(c) = of(&|p| p.raw_cpu) {
        println!("  CPU per raw pgbench transaction (median): {c:.3} ms PostgreSQL");
    }
    if let Some(w) = of(&|p| p.wal) {
        print!("  WAL per attempt (median): {w:.0} bytes");
        match of(&|p| p.raw_wal) {
            Some(r) => println!("; per raw pgbench transaction: {r:.0} bytes"),
            None => println!(),
        }
    }
    println!(
        "  load average at the end: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    match (
        of(&|p| Some(p.rate)),
        of(&|p| p.raw_tps),
        of(&|p| p.raw_tps.map(|t| p.rate / t)),
    ) {
        (Some(rate), Some(tps), Some(ratio)) => println!(
            "  throughput {rate:.0} attempts/s, raw pgbench SKIP LOCKED claim+complete (8 clients) {tps:.0} tx/s (medians); ratio {ratio:.2} (median of the pairs' ratios)"
        ),
        _ => println!("  raw pgbench: not available"),
    }
    drop(service);
    if stats {
        let log = std::env::temp_dir().join("akbench-dispatch-postmaster.log");
        if std::fs::copy(cluster.data_dir().join("postmaster.log"), &log).is_ok() {
            println!(
                "  server log (auto_explain > 30 ms, lock waits > 20 ms): {}",
                log.display()
            );
        }
    }
    let _ = cluster.stop();
}
