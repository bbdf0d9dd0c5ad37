//! `akbench view [DIR]`: serves the read-only web viewer ([`crate::view`]) over a folder of
//! run records until Ctrl-C.

use crate::cli::{RemoteArgs, ViewArgs};
use crate::exit::{self, InputError};
use crate::view::index::Index;
use crate::view::server::{serve, Viewer};
use std::time::Duration;

/// Runs the viewer.
pub fn run(args: ViewArgs, remote: &RemoteArgs) -> anyhow::Result<i32> {
    if remote
        .coordinator
        .as_deref()
        .is_some_and(|c| !c.trim().is_empty())
    {
        // Often set in the environment for the `run` commands: the folder is still viewed.
        eprintln!(
            "note: the coordinator (--coordinator / AKBENCH_COORDINATOR) is ignored: viewing a \
             coordinator is not supported yet; export a run with `akbench run records RUN --out \
             DIR` and view DIR"
        );
    }
    let root = args
        .dir
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| {
            InputError(format!(
                "failed to open the viewer on {}: not a folder; give the folder that holds run \
             records (a sweep's --out, `run records --out`, `run single --out`)",
                args.dir.display()
            ))
        })?;
    if args.poll_ms == 0 {
        return Err(
            InputError("failed to open the viewer: --poll-ms must be at least 1".into()).into(),
        );
    }
    let store = args.store_root.is_dir().then(|| args.store_root.clone());
    let mut index = Index::new(root.clone(), store);
    index.refresh();
    let (runs, refused) = (index.runs.len(), index.refused.len());
    let viewer = Viewer::new(index);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen).await.map_err(|e| {
            InputError(format!(
                "failed to listen on {}: {e}; fix: pick another --listen address (port 0: any free port)",
                args.listen
            ))
        })?;
        let addr = listener.local_addr()?;
        println!(
            "akbench view: http://{addr}/ ({runs} runs under {}{}); Ctrl-C to stop",
            root.display(),
            if refused > 0 { format!(", {refused} records refused") } else { String::new() }
        );
        let poller = viewer.spawn_poller(Duration::from_millis(args.poll_ms));
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        let served = serve(listener, viewer, shutdown).await;
        poller.abort();
        served?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(exit::OK)
}
