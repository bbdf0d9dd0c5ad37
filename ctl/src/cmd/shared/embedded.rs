//! The embedded system's options from the command line, for `akbench up` and the default
//! (embedded) sweep.

use crate::cli::EmbeddedArgs;
use crate::embedded::{abs, default_data_dir, EmbeddedOptions};
use std::time::Duration;

use super::inputs::cache_root;

/// Options of the embedded system from the flags. Workers write attempts under
/// `<out>/.workers/` and store their artifacts under `<out>/<trial key>/a<n>/`, beside the
/// trial records the sweep exports there.
pub fn options(
    e: &EmbeddedArgs,
    tasks_root: &std::path::Path,
    agents_root: &std::path::Path,
    cache: Option<&std::path::Path>,
    out: &std::path::Path,
    grpc_listen: std::net::SocketAddr,
    http_listen: std::net::SocketAddr,
) -> EmbeddedOptions {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
    let workers = e.workers.max(1);
    EmbeddedOptions {
        data_dir: e
            .data_dir
            .clone()
            .map(|d| abs(&d))
            .unwrap_or_else(default_data_dir),
        grpc_listen,
        http_listen,
        workers,
        slots: e.slots.unwrap_or_else(|| (cpus / workers as u32).max(1)),
        prefetch: 0,
        tasks_root: abs(tasks_root),
        agents_root: abs(agents_root),
        cache: cache_root(cache),
        work_out: abs(&out.join(".workers")),
        artifacts: abs(out),
        // Inside akbench_core::ranges::LEASE_TTL_MS (the flag's parser refused the rest).
        lease_ttl: Duration::from_millis(e.lease_ttl_ms),
    }
}
