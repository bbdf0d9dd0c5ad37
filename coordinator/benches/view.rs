//! Viewer benchmark on the coordinator's HTTP listener: a run of `TRIALS` trials (default
//! 100,000: 5,000 tasks x 2 agents x 10 repetitions; TRIALS / 20 tasks) whose every trial is
//! done with a full attempt record (the shape workers upload; a quarter solved), then the
//! viewer's pages served by the coordinator in-process over loopback: the run page cold (one
//! compact row per trial read from the database and aggregated: the coordinator-backed path;
//! above the viewer's aggregate limit, 100,000 done trials, one page of trials read alone),
//! warm (the aggregate cached while the finished count stands), the run's progress (what
//! each server-sent event carries), a page of the trial table, a page of trials after the
//! middle ordinal (`?after=`, the paged run page's next page) and one trial page. Time to
//! the end of the body; median of 20 fresh connections, the cold page once. Then what
//! `akbench view --coordinator` reads over gRPC: one page of 50 compact rows after the middle
//! ordinal (`ListTrialRows` with `after`/`limit`, median of 20), every compact row
//! (`ListTrialRows`) and, up to 100,000 trials, every whole record (`FetchRecords`), once
//! each.
//!
//! Run: `cargo bench -p akbench-coordinator --bench view` (needs the PostgreSQL binaries);
//! `TRIALS=1000000` for the paged run page at a million.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use akbench_coordinator::pgcluster::test_support;
use akbench_core::clock::SystemClock;
use akbench_core::plan::plan;
use akbench_core::testkit::synthetic_spec;
use akbench_proto::v1 as pb;

#[path = "../tests/common/done_trials.rs"]
mod done_trials;

fn get(addr: SocketAddr, path: &str) -> (Duration, usize, String) {
    let t = Instant::now();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    let took = t.elapsed();
    let text = String::from_utf8_lossy(&body).into_owned();
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{path}: {}",
        &text[..text.len().min(300)]
    );
    (took, body.len(), text)
}

fn median(addr: SocketAddr, path: &str) -> (Duration, Duration, usize) {
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..20 {
        let (t, b, _) = get(addr, path);
        times.push(t);
        bytes = b;
    }
    times.sort();
    (times[10], times[19], bytes)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let url = test_support::fresh_database().await;
    let (handle, _stop, mut client) = done_trials::serve(&url).await;
    let trials: usize = std::env::var("TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let spec = synthetic_spec(trials / 20, 2, 10, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let trials = ready.trials.len();
    let key = spec.identity.run_key.clone();
    let t = Instant::now();
    let (db, store) =
        done_trials::submit_streamed_with_items(&mut client, &url, &spec, &ready).await;
    for chunk in ready.trials.chunks(2_000) {
        // A quarter solved.
        done_trials::end_trials(&db, &store, chunk, |t| t.ordinal % 4 == 0).await;
    }
    db.execute(
        "UPDATE runs SET state = 'finished', started_at = now() - interval '1 hour' WHERE run_id = $1",
        &[&spec.identity.run_id],
    )
    .await
    .unwrap();
    db.batch_execute("VACUUM ANALYZE").await.unwrap();
    println!(
        "set up {trials} done trials with records in {:?}",
        t.elapsed()
    );
    let paged = trials as u64 > akbench_viewer::source::AGGREGATE_MAX;
    let middle = trials / 2;

    let http = handle.http_addr;
    let run = format!("/runs/{key}");
    let (cold, bytes, page) = tokio::task::spawn_blocking({
        let run = run.clone();
        move || get(http, &run)
    })
    .await
    .unwrap();
    assert!(
        page.contains(&format!("{trials} / {trials} trials")),
        "the run page counts every trial"
    );
    assert_eq!(page.contains("id=\"paged\""), paged);
    if paged {
        println!("run page, cold (paged: status + one page of 50 rows): {cold:?}, {bytes} bytes");
    } else {
        println!(
            "run page, cold ({trials} compact rows read in pages of 10,000 + aggregate): {cold:?}, {bytes} bytes"
        );
    }
    let trial = format!("/trials/{}", ready.trials[trials / 8].key);
    let rows = [
        (
            if paged {
                "run page again (paged)"
            } else {
                "run page, warm (aggregate cached)"
            },
            run.clone(),
        ),
        (
            "run page, the trials after the middle ordinal (?after=, paged runs)",
            format!("{run}?after={middle}&per=50"),
        ),
        ("run page, matrix page 9", format!("{run}?mpage=9")),
        (
            "progress (status projection; each SSE event)",
            format!("/api/runs/{key}/status"),
        ),
        (
            "API trials page 1500",
            format!("/api/runs/{key}/trials?page=1500&per=50"),
        ),
        ("trial page", trial),
        ("runs list", "/".to_string()),
    ];
    for (name, path) in rows {
        let (p50, max, bytes) = tokio::task::spawn_blocking(move || median(http, &path))
            .await
            .unwrap();
        println!("{name}: median {p50:?}, max {max:?}, {bytes} bytes");
    }

    // One page of compact rows after the middle ordinal (what `akbench view --coordinator`
    // reads for a paged run page), median of 20.
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let mut stream = client
            .list_trial_rows(pb::ListTrialRowsRequest {
                run: key.clone(),
                after: Some(middle as u64),
                limit: 50,
                ended_after_unix_ms: None,
            })
            .await
            .unwrap()
            .into_inner();
        let mut rows = Vec::new();
        while let Some(b) = stream.message().await.unwrap() {
            rows.extend(b.rows);
        }
        times.push(t.elapsed());
        assert_eq!(rows.len(), 50);
        assert_eq!(rows[0].ordinal, middle as u64 + 1);
    }
    times.sort();
    println!(
        "gRPC: ListTrialRows, a page of 50 after ordinal {middle}: median {:?}, max {:?}",
        times[10], times[19]
    );

    // What `akbench view --coordinator` reads for an aggregated run page over gRPC: the
    // compact rows (`ListTrialRows`, what it reads now) against every whole record
    // (`FetchRecords`, what it read before), in one run.
    let t = Instant::now();
    let mut stream = client
        .list_trial_rows(pb::ListTrialRowsRequest {
            run: key.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut rows = 0;
    while let Some(b) = stream.message().await.unwrap() {
        rows += b.rows.len();
    }
    let compact = t.elapsed();
    assert_eq!(rows, trials);
    println!("gRPC: ListTrialRows ({trials} compact rows) {compact:?}");
    if trials > 100_000 {
        return;
    }
    let t = Instant::now();
    let mut stream = client
        .fetch_records(pb::FetchRecordsRequest {
            run: key.clone(),
            trials: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut records = 0;
    while stream.message().await.unwrap().is_some() {
        records += 1;
    }
    let whole = t.elapsed();
    assert_eq!(records, trials);
    println!(
        "gRPC: ListTrialRows (100,000 compact rows) {compact:?}, FetchRecords (100,000 whole records) {whole:?}, ratio {:.1}x",
        whole.as_secs_f64() / compact.as_secs_f64()
    );
}
