//! A thousand worker sessions (issue 30, item 2: "coordinator CPU per attempt at 1,000
//! sessions within 1.5x of that at 10 sessions"). For each session count, a fresh run of
//! `TRIALS` no-op trials is planned in the database and started, the real
//! `akbench-coordinator` binary is started as its own process on it, and synthetic workers
//! run in `PROCS` separate processes (this bench re-executed with `AKBENCH_SESSIONS_CHILD`
//! set), each holding its share of the sessions, one gRPC connection per session, `SLOTS`
//! slots each. Each attempt holds its slot `ATTEMPT_MS`, then reports as a worker does (one
//! batch of 11 transitions, the record, the finish); every session heartbeats its held leases
//! at the interval the coordinator's `Welcome` asks for. After `WARMUP_S` the bench reads, over
//! `MEASURE_S`: the coordinator's CPU (utime + stime of `/proc/<pid>/stat`), its RSS at the
//! end, the attempts finished (`not_graded` attempts in PostgreSQL) and the live leases; the
//! children report the claim latency (a slot freed, or opened, to the assignment that fills
//! it) p50/p99 over the same window, and the sessions that failed to open (connection or
//! `Session` call; not retried, the reason on stderr).
//!
//! `cargo bench -p akbench-coordinator --bench sessions`; environment: `SIZES` (session
//! counts, default `10,100,1000`), `SLOTS` (64), `PROCS` (worker processes, default 4),
//! `ATTEMPT_MS` (20000), `TRIALS` (per size, default 200000; it must outlast warm-up and
//! window at the rate reached, or the live leases and claim latencies say nothing), `WARMUP_S`
//! (30), `MEASURE_S` (30). About (30 + 30 + 20) s per size plus planning and starting the run.

#[path = "common/bigrun.rs"]
mod bigrun;
#[path = "common/synthetic.rs"]
mod synthetic;

use std::collections::{HashMap, VecDeque};
use std::io::BufRead;
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use akbench_coordinator::pgcluster::PrivateCluster;
use akbench_coordinator::scheduler::Scheduler;
use akbench_coordinator::store::Store;
use akbench_proto::v1::{
    coordinator_message::Body as Out, worker_message::Body as In, Heartbeat, HeldLease, Subject,
    WorkerMessage,
};
use bigrun::{agents, caps, plan};
use synthetic::{env, messages, session};

const CHILD: &str = "AKBENCH_SESSIONS_CHILD";

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if std::env::var_os(CHILD).is_some() {
        rt.block_on(child());
    } else {
        rt.block_on(parent());
    }
}

// ---- the worker processes ----

/// What one worker process saw in the measured window.
#[derive(Default)]
struct Seen {
    latencies_us: Vec<u64>,
    assigned: u64,
    finished: u64,
    refused: u64,
    /// Sessions whose connection or opening `Session` call failed (not retried).
    failed: u64,
}

/// Runs sessions `FIRST..FIRST+COUNT` until the window ends, then prints one line:
/// `assigned finished refused failed latency_us...` and keeps the sessions open until killed.
async fn child() {
    let addr: SocketAddr = std::env::var("ADDR").unwrap().parse().unwrap();
    let (first, count) = (env("FIRST", 0), env("COUNT", 1));
    let slots = env("SLOTS", 64) as u32;
    let hold = Duration::from_millis(env("ATTEMPT_MS", 20_000) as u64);
    let start = Instant::now();
    let from = start + Duration::from_secs(env("WARMUP_S", 30) as u64);
    let until = from + Duration::from_secs(env("MEASURE_S", 30) as u64);
    let seen = Arc::new(Mutex::new(Seen::default()));
    for i in first..first + count {
        let seen = Arc::clone(&seen);
        tokio::spawn(one_session(
            addr,
            format!("s-{i}"),
            slots,
            hold,
            (from, until),
            seen,
        ));
    }
    tokio::time::sleep_until(until.into()).await;
    {
        let s = seen.lock().unwrap();
        let lat: Vec<String> = s.latencies_us.iter().map(u64::to_string).collect();
        println!(
            "{} {} {} {} {}",
            s.assigned,
            s.finished,
            s.refused,
            s.failed,
            lat.join(" ")
        );
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    // The sessions stay open until the parent kills this process (as a killed worker's
    // would end): it counts the live leases at the window's end, and a process that ended
    // here first would have its leases released before they were counted.
    std::future::pending::<()>().await;
}

async fn one_session(
    addr: SocketAddr,
    id: String,
    slots: u32,
    hold: Duration,
    (from, until): (Instant, Instant),
    seen: Arc<Mutex<Seen>>,
) {
    let (tx, mut inbound) = match session(addr, id.clone(), slots).await {
        Ok(s) => s,
        Err(e) => {
            seen.lock().unwrap().failed += 1;
            eprintln!("session {id} failed to open: {e}");
            return;
        }
    };
    let opened = Instant::now();
    // When each free slot became free (oldest first), and the leases held.
    let free: Arc<Mutex<VecDeque<Instant>>> =
        Arc::new(Mutex::new((0..slots).map(|_| opened).collect()));
    let held: Arc<Mutex<HashMap<String, i64>>> = Arc::default();
    let in_window = move |t: Instant| t >= from && t < until;
    while let Ok(Some(m)) = inbound.message().await {
        match m.body {
            Some(Out::Welcome(w)) => {
                let every = Duration::from_millis(w.heartbeat_interval_ms.max(100));
                let (tx, free, held) = (tx.clone(), Arc::clone(&free), Arc::clone(&held));
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(every).await;
                        let leases = held
                            .lock()
                            .unwrap()
                            .iter()
                            .map(|(a, e)| HeldLease {
                                attempt_id: a.clone(),
                                epoch: *e,
                            })
                            .collect();
                        let free_slots = free.lock().unwrap().len() as u32;
                        let beat = In::Heartbeat(Heartbeat {
                            free_slots,
                            leases,
                            draining: false,
                        });
                        if tx.send(WorkerMessage { body: Some(beat) }).await.is_err() {
                            return;
                        }
                    }
                });
            }
            Some(Out::Assignment(a)) => {
                let now = Instant::now();
                let freed = free.lock().unwrap().pop_front();
                if in_window(now) {
                    let mut s = seen.lock().unwrap();
                    s.assigned += 1;
                    if let Some(at) = freed {
                        s.latencies_us.push((now - at).as_micros() as u64);
                    }
                }
                held.lock().unwrap().insert(a.attempt_id.clone(), a.epoch);
                let (tx, free, held) = (tx.clone(), Arc::clone(&free), Arc::clone(&held));
                tokio::spawn(async move {
                    tokio::time::sleep(hold).await;
                    held.lock().unwrap().remove(&a.attempt_id);
                    free.lock().unwrap().push_back(Instant::now());
                    for m in messages(&a.attempt_id, a.epoch, "") {
                        if tx.send(m).await.is_err() {
                            return;
                        }
                    }
                });
            }
            Some(Out::Ack(a))
                if a.subject == Subject::Finished as i32 && in_window(Instant::now()) =>
            {
                seen.lock().unwrap().finished += 1;
            }
            Some(Out::Refusal(r)) => {
                seen.lock().unwrap().refused += 1;
                eprintln!("refused: {r:?}");
            }
            _ => {}
        }
    }
}

// ---- the bench ----

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// utime + stime of `pid` in seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn count(store: &Store, sql: &str) -> i64 {
    store
        .client()
        .await
        .unwrap()
        .query_one(sql, &[])
        .await
        .unwrap()
        .get(0)
}

async fn parent() {
    let sizes: Vec<usize> = std::env::var("SIZES")
        .unwrap_or_else(|_| "10,100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let slots = env("SLOTS", 64);
    let procs = env("PROCS", 4);
    let trials = env("TRIALS", 200_000);
    let warmup = env("WARMUP_S", 30);
    let measure = env("MEASURE_S", 30);
    let cluster = PrivateCluster::start(None).expect("private cluster");
    println!(
        "sessions benchmark: {slots} slots per session, {procs} worker processes, attempts hold a slot {} ms, window {warmup} s + {measure} s",
        env("ATTEMPT_MS", 20_000)
    );
    println!("sessions | live leases | attempts/s | coordinator CPU ms per attempt | CPU % of a core | RSS MiB (idle -> end) | RSS KiB per session | per live lease | claim p50 / p99 ms | refused | sessions failed to open | load");
    for sessions in sizes {
        // A database of its own per size: nothing left by the previous size's sessions.
        let url = cluster
            .create_database(&format!("sessions{sessions}"))
            .await
            .expect("database");
        let store = Store::connect(&url).await.expect("connects");
        store.migrate().await.expect("migrates");
        let scheduler = Scheduler::new(store.clone());
        let (run, _) = plan(&store, trials, false).await;
        scheduler.start_run(run, &caps(1), &agents()).await.unwrap();
        let (grpc, http) = (free_port(), free_port());
        let coordinator = Killed(
            Command::new(env!("CARGO_BIN_EXE_akbench-coordinator"))
                .args(["--database-url", &url])
                .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
                .args(["--http-listen", &format!("127.0.0.1:{http}")])
                // Every session comes from this one loopback address.
                .args(["--max-connections-per-peer", "100000"])
                .env("RUST_LOG", "warn")
                .env_remove("AKBENCH_OPERATOR_TOKEN")
                .env_remove("AKBENCH_VIEWER_TOKEN")
                .env_remove("AKBENCH_WORKER_TOKEN")
                .stdout(Stdio::null())
                .spawn()
                .expect("starts akbench-coordinator"),
        );
        let pid = coordinator.0.id();
        let addr: SocketAddr = format!("127.0.0.1:{grpc}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(Instant::now() < deadline, "the coordinator never listened");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let idle_kib = rss_kib(pid);
        let procs = procs.min(sessions).max(1);
        let children: Vec<Killed> = (0..procs)
            .map(|p| {
                let (first, end) = (sessions * p / procs, sessions * (p + 1) / procs);
                Killed(
                    Command::new(std::env::current_exe().unwrap())
                        .env(CHILD, "1")
                        .env("ADDR", addr.to_string())
                        .env("FIRST", first.to_string())
                        .env("COUNT", (end - first).to_string())
                        .env("SLOTS", slots.to_string())
                        .stdout(Stdio::piped())
                        .spawn()
                        .expect("starts a worker process"),
                )
            })
            .collect();
        let started = Instant::now();
        let done = "SELECT count(*) FROM attempts WHERE terminal_state = 'not_graded'";
        tokio::time::sleep_until((started + Duration::from_secs(warmup as u64)).into()).await;
        let (cpu0, done0) = (cpu_s(pid), count(&store, done).await);
        tokio::time::sleep(Duration::from_secs(measure as u64)).await;
        let (cpu1, done1) = (cpu_s(pid), count(&store, done).await);
        let end_kib = rss_kib(pid);
        let live = count(
            &store,
            &format!("SELECT count(*) FROM work_items WHERE run_id = '{run}' AND state = 'leased'"),
        )
        .await;
        let (mut latencies, mut refused, mut failed) = (Vec::new(), 0u64, 0u64);
        for mut c in children {
            let out = c.0.stdout.take().unwrap();
            let line = std::io::BufReader::new(out)
                .lines()
                .next()
                .and_then(Result::ok)
                .unwrap_or_default();
            let f: Vec<u64> = line.split(' ').filter_map(|v| v.parse().ok()).collect();
            if f.len() >= 4 {
                refused += f[2];
                failed += f[3];
                latencies.extend_from_slice(&f[4..]);
            }
        }
        latencies.sort_unstable();
        let pct = |p: usize| {
            latencies
                .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
                .map_or("-".to_string(), |us| format!("{:.1}", *us as f64 / 1e3))
        };
        let attempts = (done1 - done0).max(0) as f64;
        let cpu = cpu1 - cpu0;
        println!(
            "{sessions} | {live} | {:.0} | {} | {:.0} | {} -> {} | {:.0} | {} | {} / {} | {refused} | {failed} | {}",
            attempts / measure as f64,
            if attempts > 0.0 {
                format!("{:.2}", cpu * 1e3 / attempts)
            } else {
                "-".into()
            },
            cpu * 100.0 / measure as f64,
            idle_kib / 1024,
            end_kib / 1024,
            end_kib.saturating_sub(idle_kib) as f64 / sessions as f64,
            if live > 0 {
                format!(
                    "{:.1}",
                    end_kib.saturating_sub(idle_kib) as f64 / live as f64
                )
            } else {
                "-".into()
            },
            pct(50),
            pct(99),
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split(' ')
                .next()
                .unwrap_or("")
        );
        drop(coordinator);
    }
    let _ = cluster.stop();
}
