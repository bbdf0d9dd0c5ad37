//! One worker daemon running no-op attempts through the real session: the coordinator's
//! scheduler and `Workers` service on a private PostgreSQL, over loopback gRPC.
//!
//!   CARGO_TARGET_DIR=/work/target-workerd cargo bench -p akbench-worker --bench session
//!
//! Environment: `BENCH_ATTEMPTS` (default 64) attempts with as many slots; `BENCH_SERIAL`
//! (default 16) attempts one at a time, through the session and directly through the
//! orchestrator, to isolate the per-attempt overhead of the session. The task is tiny (a
//! one-file repository, a mutation, a shell test); the agent is a script that exits 0.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/coord/mod.rs"]
mod coord;

use akbench_core::clock::SystemClock;
use akbench_core::record::Identity;
use akbench_worker::orchestrator::{AttemptOptions, AttemptRequest, Orchestrator, Silent};
use akbench_worker::process::CancelToken;
use coord::{config, spawn, work_items, Coord};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Lat {
    /// Write transactions (transaction ids) the coordinator's database used per attempt.
    xacts: f64,
    mean_ms: f64,
    p50_ms: f64,
    p95_ms: f64,
    agent_ms: f64,
}

/// The database's next transaction id: every transaction that writes takes one (this call
/// too), read ones take none.
async fn next_xid(coord: &Coord) -> i64 {
    coord
        .client()
        .await
        .query_one("SELECT txid_current()", &[])
        .await
        .unwrap()
        .get(0)
}

/// Per-attempt latency (lease granted -> finish stored) and the agent's own run time.
async fn latencies(coord: &Coord, trials: &[Uuid], xacts: f64) -> Lat {
    let c = coord.client().await;
    let rows = c
        .query(
            "SELECT extract(epoch FROM (a.finished_at - a.started_at))::float8 * 1000, \
             (s.record -> 'agent_process' ->> 'duration_ms')::float8 \
             FROM attempts a JOIN submissions s USING (attempt_id) WHERE a.trial_id = ANY($1)",
            &[&trials],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), trials.len(), "every attempt has its record");
    let mut ms: Vec<f64> = rows.iter().map(|r| r.get::<_, f64>(0)).collect();
    let agent: f64 = rows.iter().map(|r| r.get::<_, f64>(1)).sum::<f64>() / rows.len() as f64;
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
    Lat {
        xacts,
        mean_ms: ms.iter().sum::<f64>() / ms.len() as f64,
        p50_ms: pct(0.5),
        p95_ms: pct(0.95),
        agent_ms: agent,
    }
}

/// Runs `n` attempts on one daemon with `slots`; returns (seconds, latencies).
async fn through_session(coord: &Coord, c: &common::Corpus, n: usize, slots: u32) -> (f64, Lat) {
    let items = work_items(c, "noop", u32::try_from(n).unwrap(), true);
    let (h, run) = spawn(config(c, coord, &format!("bench-{slots}"), slots));
    h.wait_for(|s| s.connected).await;
    let started = Instant::now();
    let (_, trials) = coord.enqueue_items(&items).await;
    // After the enqueue: what the attempts cost, not the run's creation (a claim that raced
    // the read is the only error, at most one per slot).
    let xid0 = next_xid(coord).await;
    let client = coord.client().await;
    loop {
        let done: i64 = client
            .query_one(
                "SELECT count(*) FROM attempts a JOIN submissions USING (attempt_id) \
                 WHERE a.trial_id = ANY($1) AND a.finished_at IS NOT NULL",
                &[&trials],
            )
            .await
            .unwrap()
            .get(0);
        if done as usize == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    // Less this call's own id and the one that read `xid0`.
    let xacts = (next_xid(coord).await - xid0 - 1) as f64 / n as f64;
    let bad: i64 = client
        .query_one(
            "SELECT count(*) FROM attempts WHERE trial_id = ANY($1) AND terminal_state <> 'completed'",
            &[&trials],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(bad, 0, "every attempt completed");
    h.drain("bench over");
    run.await.unwrap();
    (secs, latencies(coord, &trials, xacts).await)
}

fn direct(c: &common::Corpus, n: usize) -> f64 {
    let items = work_items(c, "noop", 1, true);
    let p =
        akbench_worker::trial::prepare(&items[0].trial, &items[0].agent, &c.tasks(), &c.agents())
            .unwrap();
    let orch = Orchestrator::new(&c.root().join("cache"), Arc::new(SystemClock));
    let started = Instant::now();
    for i in 0..n {
        let r = orch.run_attempt(
            &AttemptRequest {
                task: &p.task,
                agent: &p.agent,
                attempt: Identity {
                    id: Uuid::now_v7(),
                    key: format!("direct/a{i}"),
                },
                number: 1,
                artifacts_dir: c.root().join(format!("direct/a{i}")),
                artifacts_rel: format!("a{i}"),
                // As the daemon's runner sets them (the trial's runtime: `direct` here; the
                // default options would run in the sandbox).
                options: AttemptOptions {
                    grade: items[0].trial.evaluation.grade,
                    ..AttemptOptions::default()
                }
                .with_compute(&items[0].trial.compute),
            },
            &Silent,
            &CancelToken::new(),
        );
        assert_eq!(r.state, akbench_core::lifecycle::State::Completed);
    }
    started.elapsed().as_secs_f64() / n as f64 * 1000.0
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = env_usize("BENCH_ATTEMPTS", 64);
    let serial = env_usize("BENCH_SERIAL", 16);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let coord = Coord::start(Duration::from_secs(30)).await;
        let c = common::corpus();
        c.add_agent(
            "noop",
            "adapter = \"scripted\"\nscript = \"noop.sh\"\n",
            Some("exit 0\n"),
        );
        // Warm the mirror cache so the first attempts do not pay for the clone.
        let _ = through_session(&coord, &c, 1, 1).await;

        let (secs, lat) = through_session(&coord, &c, n, u32::try_from(n).unwrap()).await;
        println!(
            "concurrent: {n} attempts, {n} slots: {secs:.2} s, {:.1} attempts/s; \
             per attempt (lease -> finish stored) mean {:.0} ms, p50 {:.0} ms, p95 {:.0} ms; agent {:.0} ms; \
             {:.1} write transactions per attempt",
            n as f64 / secs,
            lat.mean_ms,
            lat.p50_ms,
            lat.p95_ms,
            lat.agent_ms,
            lat.xacts
        );
        let (secs, lat) = through_session(&coord, &c, serial, 1).await;
        let per = secs / serial as f64 * 1000.0;
        let direct_ms = {
            let c = &c;
            tokio::task::block_in_place(|| direct(c, serial))
        };
        println!(
            "serial: {serial} attempts, 1 slot: {per:.0} ms per attempt end to end \
             (lease -> finish stored mean {:.0} ms); the same attempt run directly by the \
             orchestrator: {direct_ms:.0} ms; session overhead {:.0} ms per attempt; \
             {:.1} write transactions per attempt",
            lat.mean_ms,
            per - direct_ms,
            lat.xacts
        );
    });
}
