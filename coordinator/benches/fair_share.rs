//! Runs sharing the workers (issue 30, "a 200-trial run started behind a 1,000,000-trial run
//! gets its first assignment within 1 s and its weighted share within 10 s"): a big run
//! already claiming on every slot of N synthetic worker sessions (real gRPC, the real
//! coordinator service, a private PostgreSQL cluster with fsync on), then a small run
//! started behind it (`Scheduler::start_run`, as `StartRun` does). Reports the time from the
//! start of the small run to its first assignment and to the moment its live leases reach
//! its weighted share of the slots (`slots x w_small / (w_small + w_big)`, at most its size).
//! Each synthetic attempt holds its slot for `ATTEMPT_MS` (nothing is preempted: the small
//! run's share comes as the big run's attempts end), then reports its 11 transitions, its
//! record and its finish as a worker does.
//!
//! `cargo bench -p akbench-coordinator --bench fair_share`; environment: `BIG` (1000000
//! trials), `SMALL` (200), `SESSIONS` (8), `SLOTS` (8), `ATTEMPT_MS` (1000), `BIG_WEIGHT`
//! (1), `SMALL_WEIGHT` (1), `WAIT_S` (60: how long to wait for the small run). Takes about 2 minutes at the defaults on 2 cores (most of it
//! planning and starting the big run: 24-28 s and 56-60 s at 1,000,000 trials, load 7-14).

#[path = "common/bigrun.rs"]
mod bigrun;
#[path = "common/synthetic.rs"]
mod synthetic;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use akbench_coordinator::pgcluster::PrivateCluster;
use akbench_coordinator::scheduler::Scheduler;
use akbench_coordinator::store::Store;
use akbench_coordinator::workers_service::{WorkersConfig, WorkersService};
use akbench_proto::v1::{coordinator_message::Body as Out, Subject};
use bigrun::{agents, caps, plan};
use synthetic::{env, messages, session};
use uuid::Uuid;

/// What the synthetic workers saw.
#[derive(Default)]
struct Seen {
    /// The small run's trials (filled before it starts).
    small_trials: Mutex<HashSet<String>>,
    /// Its attempts assigned so far.
    small_attempts: Mutex<HashSet<String>>,
    small_assigned: AtomicU64,
    small_finished: AtomicU64,
    all_assigned: AtomicU64,
    first_small: Mutex<Option<Instant>>,
}

async fn worker(
    addr: std::net::SocketAddr,
    id: String,
    slots: u32,
    hold: Duration,
    seen: Arc<Seen>,
) {
    let (tx, mut inbound) = session(addr, id, slots).await.expect("opens a session");
    while let Ok(Some(m)) = inbound.message().await {
        match m.body {
            Some(Out::Assignment(a)) => {
                seen.all_assigned.fetch_add(1, Ordering::Relaxed);
                if seen.small_trials.lock().unwrap().contains(&a.trial_id) {
                    seen.first_small
                        .lock()
                        .unwrap()
                        .get_or_insert_with(Instant::now);
                    seen.small_attempts
                        .lock()
                        .unwrap()
                        .insert(a.attempt_id.clone());
                    seen.small_assigned.fetch_add(1, Ordering::Relaxed);
                }
                // The attempt holds its slot, then reports as a worker does.
                let tx = tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(hold).await;
                    for m in messages(&a.attempt_id, a.epoch, "") {
                        if tx.send(m).await.is_err() {
                            return;
                        }
                    }
                });
            }
            Some(Out::Ack(a))
                if a.subject == Subject::Finished as i32
                    && seen.small_attempts.lock().unwrap().contains(&a.attempt_id) =>
            {
                seen.small_finished.fetch_add(1, Ordering::Relaxed);
            }
            // At the end the cluster stops under the sessions: their last reports are
            // refused (unavailable). Any refusal ends the session; the figures are taken.
            Some(Out::Refusal(r)) => {
                eprintln!("session ends: refused {r:?}");
                return;
            }
            _ => {}
        }
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let big = env("BIG", 1_000_000);
    let small = env("SMALL", 200);
    let sessions = env("SESSIONS", 8);
    let slots = env("SLOTS", 8) as u32;
    let hold = Duration::from_millis(env("ATTEMPT_MS", 1000) as u64);
    let big_weight = env("BIG_WEIGHT", 1) as u32;
    let small_weight = env("SMALL_WEIGHT", 1) as u32;
    let wait = Duration::from_secs(env("WAIT_S", 60) as u64);

    let cluster = PrivateCluster::start(None).expect("private cluster");
    let url = cluster.create_database("bench").await.expect("database");
    let store = Store::connect(&url).await.expect("connects");
    store.migrate().await.expect("migrates");
    let scheduler = Scheduler::new(store.clone());
    let service = WorkersService::new(
        scheduler.clone(),
        WorkersConfig {
            lease_ttl: Duration::from_secs(60),
            ..Default::default()
        },
    );
    let _reaper = service.spawn_reaper();
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

    let t = Instant::now();
    let (big_run, _) = plan(&store, big, false).await;
    let planned_in = t.elapsed();
    let t = Instant::now();
    scheduler
        .start_run(big_run, &caps(big_weight), &agents())
        .await
        .unwrap();
    let started_in = t.elapsed();

    let seen = Arc::new(Seen::default());
    for i in 0..sessions {
        tokio::spawn(worker(
            addr,
            format!("bench-{i}"),
            slots,
            hold,
            Arc::clone(&seen),
        ));
    }
    // The big run claims every slot, and keeps claiming as its attempts end: wait until it
    // has filled every slot twice over.
    let total = sessions as u64 * u64::from(slots);
    while seen.all_assigned.load(Ordering::Relaxed) < 2 * total {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let (small_run, small_ids) = plan(&store, small, true).await;
    seen.small_trials
        .lock()
        .unwrap()
        .extend(small_ids.iter().map(Uuid::to_string));
    let share = (total * u64::from(small_weight) / u64::from(small_weight + big_weight))
        .min(small as u64)
        .max(1);
    let t0 = Instant::now();
    scheduler
        .start_run(small_run, &caps(small_weight), &agents())
        .await
        .unwrap();
    let start_call = t0.elapsed();
    let mut share_at = None;
    let mut peak = 0;
    let deadline = t0 + wait;
    while Instant::now() < deadline {
        let live = seen.small_assigned.load(Ordering::Relaxed)
            - seen.small_finished.load(Ordering::Relaxed);
        peak = peak.max(live);
        if live >= share && share_at.is_none() {
            share_at = Some(t0.elapsed());
        }
        if share_at.is_some() && t0.elapsed() > share_at.unwrap() + hold * 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let first = seen.first_small.lock().unwrap().map(|at| at - t0);
    let ms = |d: Option<Duration>| {
        d.map_or(format!("never (within {} s)", wait.as_secs()), |d| {
            format!("{:.0} ms", d.as_secs_f64() * 1e3)
        })
    };
    println!("fair share benchmark");
    println!(
        "  big run: {big} trials (planned in {:.1} s, started in {:.1} s), weight {big_weight}",
        planned_in.as_secs_f64(),
        started_in.as_secs_f64()
    );
    println!(
        "  small run: {small} trials, weight {small_weight}; sessions x slots: {sessions} x {slots}; attempts hold a slot {} ms",
        hold.as_millis()
    );
    println!(
        "  small run start (start_run): {:.0} ms",
        start_call.as_secs_f64() * 1e3
    );
    println!("  small run start -> first assignment: {}", ms(first));
    println!(
        "  small run start -> its weighted share ({share} of {total} slots live): {}",
        ms(share_at)
    );
    println!("  small run's most live leases: {peak}");
    println!(
        "  load average at the end: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    drop(service);
    let _ = cluster.stop();
}
