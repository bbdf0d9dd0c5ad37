//! The embedded default: a private PostgreSQL (from the system's binaries, data kept in a
//! folder of its own between runs), a coordinator and local workers, all in this process.
//! `akbench up` serves it until SIGINT (Ctrl-C), SIGTERM or SIGHUP; `akbench sweep` runs one
//! experiment on it. Both install [`StopSignals`] before PostgreSQL starts, so none of those
//! signals can end the process without stopping PostgreSQL.

use akbench_coordinator::pgcluster::PrivateCluster;
use akbench_coordinator::server::{serve, Config, ServeHandle};
use akbench_worker::daemon::{Daemon, Exit, Handle, WorkerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::oneshot;

/// How to start the embedded system.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// PostgreSQL data folder (kept between runs).
    pub data_dir: PathBuf,
    /// gRPC address (port 0: any free port).
    pub grpc_listen: SocketAddr,
    /// HTTP address.
    pub http_listen: SocketAddr,
    /// Local workers.
    pub workers: usize,
    /// Slots per worker.
    pub slots: u32,
    /// Attempts each worker leases beyond its slots (`akbench sweep`: a quarter of the
    /// slots; `akbench up`: none, so `run status` counts only started attempts as running).
    pub prefetch: u32,
    /// Tasks root the workers read.
    pub tasks_root: PathBuf,
    /// Agents root the workers read.
    pub agents_root: PathBuf,
    /// Mirror cache.
    pub cache: PathBuf,
    /// Where workers write attempt artifacts while an attempt runs (`w<n>/`).
    pub work_out: PathBuf,
    /// The artifact store all local workers share (`<trial key>/a<n>/`): any worker can grade
    /// what another executed (`akbench run grade`), also after a restart on the same folder,
    /// and exported trial records find their attempts' artifacts beside them.
    pub artifacts: PathBuf,
    /// Lease TTL.
    pub lease_ttl: Duration,
}

/// A running embedded system.
#[derive(Debug)]
pub struct Embedded {
    cluster: Option<PrivateCluster>,
    serve: Option<ServeHandle>,
    stop: Option<oneshot::Sender<()>>,
    workers: Vec<(Handle, tokio::task::JoinHandle<Exit>)>,
    /// The database URL (with the password).
    pub database_url: String,
    /// The database URL without the password, and where the password is kept.
    pub database_display: String,
}

/// SIGINT, SIGTERM and SIGHUP, caught from the moment they are installed (a signal that
/// arrives before [`StopSignals::recv`] is awaited is kept, not lost).
#[derive(Debug)]
pub struct StopSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Replaces the default (terminate) action of the three signals; call inside a runtime.
    pub fn install() -> anyhow::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        let on = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| anyhow::anyhow!("failed to handle {name}: {e}"))
        };
        Ok(Self {
            int: on(SignalKind::interrupt(), "SIGINT")?,
            term: on(SignalKind::terminate(), "SIGTERM")?,
            hup: on(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// Waits for the next of the three signals; returns its name.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}

/// The default data folder: `$AKBENCH_DATA`, else a folder the PostgreSQL account can reach
/// (`/var/lib/akbench/postgres` when running as root, where `initdb` runs as `postgres`),
/// else `$XDG_DATA_HOME/akbench/postgres` or `~/.local/share/akbench/postgres`.
pub fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("AKBENCH_DATA").filter(|v| !v.is_empty()) {
        return PathBuf::from(d).join("postgres");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/lib/akbench/postgres");
    }
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("akbench/postgres");
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/share/akbench/postgres"),
        None => std::env::temp_dir().join("akbench/postgres"),
    }
}

impl Embedded {
    /// Starts PostgreSQL, the coordinator and the workers.
    pub async fn start(o: &EmbeddedOptions) -> anyhow::Result<Embedded> {
        let data = o.data_dir.clone();
        if let Some(parent) = data.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", parent.display()))?;
        }
        let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(Some(data)))
            .await?
            .map_err(|e| {
                anyhow::anyhow!("{e}\n(the embedded default needs the PostgreSQL server binaries; `akbench sweep --local` runs without a database)")
            })?;
        let database_url =
            match tokio_postgres::connect(&cluster.url("akbench"), tokio_postgres::NoTls).await {
                Ok(_) => cluster.url("akbench"),
                Err(_) => cluster.create_database("akbench").await?,
            };
        let database_display = format!(
            "{} (password in {})",
            cluster.display_url("akbench"),
            cluster.secret_file().display()
        );
        let mut config = Config::local(database_url.clone());
        config.grpc_listen = o.grpc_listen;
        config.http_listen = o.http_listen;
        config.lease_ttl_ms = u64::try_from(o.lease_ttl.as_millis()).unwrap_or(u64::MAX);
        // The viewer's trial pages on the coordinator read logs and diffs from here.
        config.artifacts = Some(o.artifacts.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let serve = serve(config, async move {
            let _ = stopped.await;
        })
        .await?;
        let url: url::Url = format!("http://{}", serve.grpc_addr).parse()?;
        let mut workers = Vec::new();
        for n in 0..o.workers {
            let mut wc = WorkerConfig::new(
                url.clone(),
                o.cache.clone(),
                o.work_out.join(format!("w{n}")),
                o.tasks_root.clone(),
                o.agents_root.clone(),
            );
            wc.worker_id = format!("local-{}-{n}", std::process::id());
            wc.artifacts = Some(o.artifacts.display().to_string());
            wc.slots = o.slots;
            wc.prefetch = o.prefetch;
            wc.grace = Duration::from_secs(10);
            let daemon = Daemon::new(wc)?;
            let handle = daemon.handle();
            workers.push((handle, tokio::spawn(daemon.run())));
        }
        Ok(Embedded {
            cluster: Some(cluster),
            serve: Some(serve),
            stop: Some(stop),
            workers,
            database_url,
            database_display,
        })
    }

    /// The coordinator's gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.serve.as_ref().expect("running").grpc_addr
    }

    /// The coordinator's HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.serve.as_ref().expect("running").http_addr
    }

    /// Drains the workers, stops the coordinator and PostgreSQL.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        for (h, _) in &self.workers {
            h.drain("akbench is stopping");
        }
        for (_, j) in self.workers.drain(..) {
            let _ = j.await;
        }
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.serve.take() {
            h.wait().await?;
        }
        if let Some(c) = self.cluster.take() {
            tokio::task::spawn_blocking(move || c.stop()).await??;
        }
        Ok(())
    }
}

/// Absolute form of a path.
pub fn abs(p: &Path) -> PathBuf {
    akbench_core::task::absolute(p)
}
