//! The viewer over a synthetic 100,000-trial run held in memory (1,000 tasks x 4 agents x 25
//! repetitions): time to build the index (aggregation), and time to first byte and to the
//! whole response over loopback HTTP for the run page, an API page deep in the trial list, a
//! filtered page, the run's JSON and the runs list. Median and max of 20 requests each.
//!
//! `cargo bench -p akbench --bench view` (figures in docs/PERFORMANCE.md).

use akbench::view::index::{Index, TrialRow};
use akbench::view::server::{serve, Viewer};
use akbench_core::lifecycle::State;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const TASKS: usize = 1_000;
const AGENTS: [&str; 4] = ["claude-code", "codex", "oracle", "fail"];
const REPS: usize = 25;

fn rows() -> Vec<TrialRow> {
    let mut out = Vec::with_capacity(TASKS * AGENTS.len() * REPS);
    for t in 0..TASKS {
        for (ai, a) in AGENTS.iter().enumerate() {
            for r in 0..REPS {
                let n = t * 31 + ai * 7 + r;
                let (state, ok, bucket, cause) = match n % 10 {
                    0..=4 => (State::Completed, Some(true), "succeeded", None),
                    5..=7 => (State::Completed, Some(false), "failed", None),
                    8 => (
                        State::Failed,
                        None,
                        "agent_failed",
                        Some("the agent exited with code 3".to_string()),
                    ),
                    _ => (
                        State::InfrastructureError,
                        None,
                        "infrastructure_error",
                        Some("provider: rate limited (429)".to_string()),
                    ),
                };
                out.push(TrialRow {
                    run: "bench-20261130-0001".into(),
                    key: format!("bench-20261130-0001/task-{t:04}/{a}/r{r}"),
                    task: format!("task-{t:04}"),
                    agent: (*a).into(),
                    state,
                    ok,
                    score: ok.map(|o| if o { 1.0 } else { 0.0 }),
                    bucket,
                    cause,
                    attempts: 1,
                    cost_usd: Some(0.01 * (n % 7) as f64),
                    tokens: Some(1_000 + (n % 5000) as u64),
                    spend: Default::default(),
                    grading: Default::default(),
                    duration_ms: 1_000 + (n % 60_000) as i64,
                    file: Default::default(),
                    ordinal: None,
                });
            }
        }
    }
    out
}

/// (time to first byte, time to the whole body, body bytes) of one GET.
fn get(addr: std::net::SocketAddr, path: &str) -> (Duration, Duration, usize) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let t0 = Instant::now();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut first = [0u8; 1];
    s.read_exact(&mut first).unwrap();
    let ttfb = t0.elapsed();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    let all = t0.elapsed();
    let text = String::from_utf8_lossy(&rest);
    assert!(
        text.starts_with("TTP/1.1 200"),
        "{path}: {}",
        &text[..text.len().min(200)]
    );
    (ttfb, all, rest.len() + 1)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let rows = rows();
    let n = rows.len();
    let t0 = Instant::now();
    let ix = Index::from_rows(rows, Some(n as u64));
    let build = t0.elapsed();
    println!(
        "trials: {n}; index build (aggregation): {:.1} ms",
        ms(build)
    );
    let viewer = Viewer::new(ix);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            serve(l, viewer, std::future::pending()).await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    let run = "bench-20261130-0001";
    let paths = [
        ("run page", format!("/runs/{run}")),
        ("run page, matrix page 9", format!("/runs/{run}?mpage=9")),
        (
            "run page, filtered",
            format!("/runs/{run}?outcome=infrastructure_error&q=task-09&page=3"),
        ),
        (
            "API trials page 1500",
            format!("/api/runs/{run}/trials?page=1500&per=50"),
        ),
        ("API run summary", format!("/api/runs/{run}")),
        ("runs list", "/".to_string()),
    ];
    println!("| request | TTFB median (ms) | TTFB max (ms) | full median (ms) | bytes |");
    println!("|---|---:|---:|---:|---:|");
    for (name, p) in &paths {
        let _ = get(addr, p); // warm
        let mut samples: Vec<(Duration, Duration, usize)> = (0..20).map(|_| get(addr, p)).collect();
        samples.sort_by_key(|s| s.0);
        let ttfb_med = samples[samples.len() / 2].0;
        let ttfb_max = samples.last().unwrap().0;
        let mut full: Vec<Duration> = samples.iter().map(|s| s.1).collect();
        full.sort();
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {} |",
            ms(ttfb_med),
            ms(ttfb_max),
            ms(full[full.len() / 2]),
            samples[0].2
        );
    }
}
