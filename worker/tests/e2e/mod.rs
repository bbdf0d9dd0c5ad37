//! Helpers shared by the multi-process end-to-end tests (sweep, restart, replicas, chaos):
//! the example corpus, workspace binaries, plans, restartable addresses, and the one way a
//! test starts an `akbench-coordinator` process and connects to it.
#![allow(dead_code)]

use akbench_core::clock::SystemClock;
use akbench_core::manifest::ExperimentManifest;
use akbench_core::plan::{plan, RunPlan};
use akbench_core::spec::{resolve, ResolveInputs, ResolvedRunSpec};
use akbench_proto::control_client::ControlClient;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use uuid::Uuid;

/// The example corpus.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

#[path = "../common/workspace_bin.rs"]
mod workspace_bin;
pub use workspace_bin::workspace_bin;

/// Writes `manifest` to `dir/experiment.yaml` and resolves and plans it over the example
/// corpus: the spec and the ready plan.
pub fn plan_run(dir: &Path, manifest: &str) -> (ResolvedRunSpec, RunPlan) {
    let spec = resolve_run(dir, manifest, &examples().join("tasks"));
    let ready = plan(&spec, &SystemClock).ready();
    (spec, ready)
}

/// Writes `manifest` to `dir/experiment.yaml` and resolves it over the tasks in
/// `tasks_root` (and the example agents).
pub fn resolve_run(dir: &Path, manifest: &str, tasks_root: &Path) -> ResolvedRunSpec {
    let path = dir.join("experiment.yaml");
    std::fs::write(&path, manifest).unwrap();
    resolve(
        &ExperimentManifest::load(&path).unwrap(),
        &ResolveInputs {
            manifest_path: Some(path),
            tasks_root: Some(tasks_root.to_path_buf()),
            agents_root: Some(examples().join("agents")),
        },
        &SystemClock,
    )
    .unwrap()
}

/// Accepted records of each trial's deciding attempt, one count per work item of `run_id`.
pub async fn accepted_records_per_trial(db: &tokio_postgres::Client, run_id: Uuid) -> Vec<i64> {
    db.query(
        "SELECT count(sub.attempt_id) FROM work_items w \
         LEFT JOIN attempts a ON a.trial_id = w.trial_id AND a.number = w.attempts_used \
         LEFT JOIN submissions sub ON sub.attempt_id = a.attempt_id \
         WHERE w.run_id = $1 GROUP BY w.trial_id",
        &[&run_id],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// `N` distinct addresses on 127.0.0.1 for servers the test kills and starts again on the
/// same address: ports below the kernel's ephemeral range (`ip_local_port_range`), free when
/// picked. A port from `bind(:0)` is an ephemeral one, which any outbound connection on the
/// host may take while the server is down (a restart 12 minutes into a loaded run failed
/// with "Address already in use").
pub fn restartable_addrs<const N: usize>() -> [std::net::SocketAddr; N] {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let (from, to) = (10_000u16, low.max(10_001));
    let span = u64::from(to - from);
    let seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    // Held until all N are chosen, so they differ.
    let mut held = Vec::new();
    for i in 0..span {
        if held.len() == N {
            break;
        }
        let port =
            from + ((seed.wrapping_mul(2_654_435_761).wrapping_add(i * 7_919)) % span) as u16;
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            held.push(l);
        }
    }
    assert_eq!(
        held.len(),
        N,
        "no {N} free ports on 127.0.0.1 between {from} and {to}"
    );
    std::array::from_fn(|i| {
        held[i]
            .local_addr()
            .expect("a bound listener has an address")
    })
}

/// The command of a test's `akbench-coordinator` process on the database `url`, serving gRPC
/// on `grpc` and HTTP on `http`, with a lease TTL of `ttl_ms`, logging warnings only. The
/// caller adds what else it needs (output, TLS) and spawns it.
pub fn coordinator_command(
    bin: &Path,
    url: &str,
    grpc: SocketAddr,
    http: SocketAddr,
    ttl_ms: u64,
) -> Command {
    let mut c = Command::new(bin);
    c.arg("--database-url")
        .arg(url)
        .arg("--grpc-listen")
        .arg(grpc.to_string())
        .arg("--http-listen")
        .arg(http.to_string())
        .args(["--lease-ttl-ms", &ttl_ms.to_string()])
        .env("RUST_LOG", "warn");
    c
}

/// A control client of the coordinator at `grpc` (messages up to 256 MiB), waiting up to
/// `secs` for it to listen (it may be starting, or restarting).
pub async fn control_client(grpc: SocketAddr, secs: u64) -> ControlClient<Channel> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(c) = try_control_client(grpc).await {
            return c;
        }
        assert!(
            Instant::now() < until,
            "the coordinator never listened on {grpc}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A control client of the coordinator at `grpc` (messages up to 256 MiB), or `None` when
/// nothing listens there yet.
pub async fn try_control_client(grpc: SocketAddr) -> Option<ControlClient<Channel>> {
    let ch = Channel::from_shared(format!("http://{grpc}"))
        .unwrap()
        .connect()
        .await
        .ok()?;
    Some(
        ControlClient::new(ch)
            .max_encoding_message_size(256 << 20)
            .max_decoding_message_size(256 << 20),
    )
}

/// Child processes killed (after a SIGCONT, in case a test froze one) and reaped on drop.
pub struct Procs(pub Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SAFETY: kill(2) with the pid of a child this test spawned and has not reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
