//! Sandbox start-up per attempt: what the `sandbox` runtime adds to starting and ending a
//! process. Each round, alternately, runs `true` under `direct` and under `sandbox` (cgroups
//! made and limited, hosts file written, bwrap with all namespaces, the end waited for and
//! every group member gone, groups removed), and under `sandbox` with one forwarded
//! endpoint (a network namespace made by the worker, a forwarder bound in it).
//! Goal: median sandbox overhead per attempt <= 50 ms.
//!
//! `cargo bench -p akbench-worker --bench sandbox_startup` (env `SANDBOX_ROUNDS`, default 200).

use akbench_core::endpoint::Endpoint;
use akbench_worker::process::{base_env, spawn, CancelToken, ProcessSpec};
use akbench_worker::runtime::{prepare, sandbox_available, Exposure, Limits, RuntimeKind};
use std::path::Path;
use std::time::{Duration, Instant};

/// Per-phase times of one run: prepare, spawn, wait, finish.
type Phases = [Duration; 4];

fn once(dir: &Path, kind: RuntimeKind, endpoints: &[Endpoint], i: usize) -> (Duration, Phases) {
    let started = Instant::now();
    let ws = dir.join(format!("ws{i}"));
    let home = dir.join(format!("home{i}"));
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let spec = ProcessSpec {
        argv: vec!["true".into()],
        cwd: ws.clone(),
        env: base_env(&home),
        stdout_path: dir.join("out"),
        stderr_path: dir.join("err"),
        output_cap: 1024,
        timeout: Duration::from_secs(30),
        grace: Duration::from_secs(1),
        tag: uuid::Uuid::now_v7().to_string(),
        hooks: Default::default(),
    };
    let exposure = Exposure {
        hosts: Vec::new(),
        budget: None,
        egress: None,
        writable: vec![ws.clone(), home.clone()],
        readable: Vec::new(),
        endpoints: endpoints.to_vec(),
        disk_roots: vec![ws.clone(), home.clone()],
        scratch: dir.join(format!("rt{i}")),
        container: None,
    };
    let limits = Limits {
        memory_mb: Some(2048),
        cpus: Some(1),
        ..Limits::default()
    };
    let t0 = Instant::now();
    let p = prepare(kind, spec, &exposure, limits).unwrap();
    let t1 = Instant::now();
    let running = spawn(p.spec).unwrap();
    let t2 = Instant::now();
    let end = running.wait(&CancelToken::new());
    let t3 = Instant::now();
    let fin = p.guard.finish();
    let t4 = Instant::now();
    assert_eq!(end.exit_code, Some(0), "{kind:?}: {end:?}");
    assert!(fin.limit_cause.is_none());
    (started.elapsed(), [t1 - t0, t2 - t1, t3 - t2, t4 - t3])
}

fn phases(v: &[(Duration, Phases)]) -> String {
    let names = ["prepare", "spawn", "wait", "finish"];
    (0..4)
        .map(|k| {
            let (m, _) = median(v.iter().map(|x| x.1[k]).collect());
            format!("{} {m:.1}", names[k])
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn median(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[v.len() / 2]), ms(v[v.len() * 9 / 10]))
}

fn main() {
    if let Err(e) = sandbox_available() {
        eprintln!("SKIPPED sandbox_startup: the sandbox does not work here: {e}");
        return;
    }
    let rounds: usize = std::env::var("SANDBOX_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ep = Endpoint::parse(&format!(
        "provider.test:{}",
        listener.local_addr().unwrap().port()
    ))
    .unwrap();
    let (mut direct, mut sandbox, mut net) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        direct.push(once(dir.path(), RuntimeKind::Direct, &[], 3 * i));
        sandbox.push(once(dir.path(), RuntimeKind::Sandbox, &[], 3 * i + 1));
        net.push(once(
            dir.path(),
            RuntimeKind::Sandbox,
            std::slice::from_ref(&ep),
            3 * i + 2,
        ));
    }
    let (dp, sp, np) = (phases(&direct), phases(&sandbox), phases(&net));
    let total = |v: Vec<(Duration, Phases)>| median(v.into_iter().map(|x| x.0).collect());
    let (d50, d90) = total(direct);
    let (s50, s90) = total(sandbox);
    let (n50, n90) = total(net);
    println!("rounds {rounds}");
    println!("direct            median {d50:.1} ms  p90 {d90:.1} ms");
    println!(
        "sandbox           median {s50:.1} ms  p90 {s90:.1} ms  (overhead {:.1} ms)",
        s50 - d50
    );
    println!(
        "sandbox+endpoint  median {n50:.1} ms  p90 {n90:.1} ms  (overhead {:.1} ms)",
        n50 - d50
    );
    println!("medians (ms) direct: {dp}");
    println!("medians (ms) sandbox: {sp}");
    println!("medians (ms) sandbox+endpoint: {np}");
    println!("goal: sandbox overhead median <= 50 ms");
}
