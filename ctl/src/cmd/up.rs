//! `akbench up`: the embedded default, served until SIGINT (Ctrl-C), SIGTERM or SIGHUP; each
//! stops the workers, the coordinator and PostgreSQL before exiting 0.

use crate::cli::UpArgs;
use crate::cmd::shared::embedded::options;
use crate::embedded::{Embedded, StopSignals};
use crate::exit;

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
        outln!("akbench up: PostgreSQL data in {}", o.data_dir.display());
        outln!("  database     {}", e.database_display);
        outln!(
            "  coordinator  http://{}   (export AKBENCH_COORDINATOR=http://{})",
            e.grpc_addr(),
            e.grpc_addr()
        );
        outln!(
            "  http         http://{}   (/api/runs/<run>/status, /runs/<run>, /metrics)",
            e.http_addr()
        );
        outln!("  workers      {} x {} slots", o.workers, o.slots);
        outln!("Ctrl-C (SIGINT), SIGTERM or SIGHUP stops everything.");
        let signal = signals.recv().await;
        eprintln!(
            "akbench up: {signal}: stopping (workers drain, coordinator and PostgreSQL stop)"
        );
        e.stop().await?;
        Ok::<_, anyhow::Error>(exit::OK)
    })
}
