//! `akbench view [DIR]`: serves the read-only web viewer ([`crate::view`]) over a folder of
//! run records, or with `--coordinator URL` over a coordinator's runs, until Ctrl-C.

use crate::cli::{RemoteArgs, ViewArgs};
use crate::exit::{self, InputError};
use crate::remote::Remote;
use crate::view::coordinator::GrpcBackend;
use crate::view::index::Index;
use crate::view::server::{serve, Viewer};
use akbench_viewer::source::Coordinated;
use std::sync::Arc;
use std::time::Duration;

/// Runs the viewer.
pub fn run(args: ViewArgs, remote: &RemoteArgs) -> anyhow::Result<i32> {
    if args.poll_ms == 0 {
        return Err(
            InputError("failed to open the viewer: --poll-ms must be at least 1".into()).into(),
        );
    }
    if let Some(url) = remote
        .coordinator
        .as_deref()
        .filter(|c| !c.trim().is_empty())
    {
        return coordinator(url, args, remote);
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
        outln!(
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

/// `akbench view --coordinator URL`: the same pages over the coordinator's gRPC API.
fn coordinator(url: &str, args: ViewArgs, remote: &RemoteArgs) -> anyhow::Result<i32> {
    let remote = Remote::new(url, remote)?;
    if let Some(a) = &args.artifacts {
        if !a.is_dir() {
            return Err(InputError(format!(
                "failed to open the viewer: --artifacts {} is not a folder; fix: give the \
                 workers' artifact folder (`akbench up --out`), or leave it out",
                a.display()
            ))
            .into());
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = remote.connect().await?;
        let listener = tokio::net::TcpListener::bind(args.listen).await.map_err(|e| {
            InputError(format!(
                "failed to listen on {}: {e}; fix: pick another --listen address (port 0: any free port)",
                args.listen
            ))
        })?;
        let addr = listener.local_addr()?;
        outln!(
            "akbench view: http://{addr}/ (runs of the coordinator at {}); Ctrl-C to stop",
            remote.url
        );
        let source = Arc::new(Coordinated::new(GrpcBackend {
            client,
            artifacts: args.artifacts.clone(),
        }));
        let app = akbench_viewer::server::router(source, Duration::from_millis(args.poll_ms))
            .merge(akbench_viewer::server::assets());
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(exit::OK)
}
