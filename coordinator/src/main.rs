//! `akbench-coordinator`: parses flags and serves until SIGTERM or SIGINT.

use akbench_coordinator::server::{init_logging, serve, shutdown_signal, Config};
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let telemetry = init_logging(config.log_json);
    let handle = serve(config, shutdown_signal()).await?;
    handle.wait().await?;
    telemetry.shutdown();
    Ok(())
}
