//! `akbench-coordinator`: parses flags and serves until SIGTERM or SIGINT. Exit codes: 0
//! stopped by a signal; 1 could not start or serve (an unreadable `--token-file` or TLS
//! file, a FIFO or device given as one, the database, a listener), the error on stderr; 2
//! bad command line (from clap).

use akbench_coordinator::server::{init_logging, serve, shutdown_signal, Config};
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let telemetry = init_logging(config.log_json);
    // A socket per worker session and per PostgreSQL connection: 1,000 sessions alone
    // exceed the usual soft limit of 1,024.
    akbench_telemetry::raise_open_files_limit();
    let handle = serve(config, shutdown_signal()).await?;
    handle.wait().await?;
    telemetry.shutdown();
    Ok(())
}
