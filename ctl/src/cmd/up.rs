//! `akbench up`: the embedded default, served until SIGINT (Ctrl-C), SIGTERM or SIGHUP; each
//! stops the workers, the coordinator and PostgreSQL before exiting 0.

use crate::cli::{EmbeddedArgs, UpArgs};
use crate::cmd::single::cache_root;
use crate::embedded::{abs, default_data_dir, Embedded, EmbeddedOptions, StopSignals};
use crate::exit;
use std::time::Duration;

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
        lease_ttl: Duration::from_millis(e.lease_ttl_ms.max(1000)),
    }
}

/// Serves until SIGINT, SIGTERM or SIGHUP.
pub fn run(args: UpArgs) -> anyhow::Result<i32> {
    // Bad folders are bad flags: refused (exit 2) before PostgreSQL starts.
    for (flag, dir) in [
        ("--tasks-root", &args.tasks_root),
        ("--agents-root", &args.agents_root),
    ] {
        if !dir.is_dir() {
            return Err(exit::InputError(format!(
                "failed to use {flag} {}: it is not a folder; fix: give the folder holding the {}",
                dir.display(),
                if flag == "--tasks-root" {
                    "tasks"
                } else {
                    "agent descriptors"
                }
            ))
            .into());
        }
    }
    let o = options(
        &args.embedded,
        &args.tasks_root,
        &args.agents_root,
        args.cache.as_deref(),
        &args.out,
        args.grpc_listen,
        args.http_listen,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // Before PostgreSQL starts: from here on no stop signal ends the process unhandled.
        let mut signals = StopSignals::install()?;
        let e = Embedded::start(&o).await?;
        println!("akbench up: PostgreSQL data in {}", o.data_dir.display());
        println!("  database     {}", e.database_display);
        println!(
            "  coordinator  http://{}   (export AKBENCH_COORDINATOR=http://{})",
            e.grpc_addr(),
            e.grpc_addr()
        );
        println!(
            "  http         http://{}   (/api/runs/<run>/status, /runs/<run>, /metrics)",
            e.http_addr()
        );
        println!("  workers      {} x {} slots", o.workers, o.slots);
        println!("Ctrl-C (SIGINT), SIGTERM or SIGHUP stops everything.");
        let signal = signals.recv().await;
        eprintln!(
            "akbench up: {signal}: stopping (workers drain, coordinator and PostgreSQL stop)"
        );
        e.stop().await?;
        Ok::<_, anyhow::Error>(exit::OK)
    })
}
