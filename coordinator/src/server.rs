//! The whole coordinator process: [`Config`] (flags and environment variables), [`serve`]
//! (migrate, bind gRPC and HTTP, run until a shutdown future resolves, then stop accepting
//! and finish in-flight requests) and [`init_logging`].

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

use crate::auth::{AuthError, Tokens};
use crate::conn_guard::{Guard, GuardedListener, Protocol};
use crate::control_service::ControlService;
use crate::http::{router, HttpState};
use crate::metrics::Metrics;
use crate::run_work::SchedulerWork;
use crate::scheduler::Scheduler;
use crate::status::StatusOptions;
use crate::store::{Store, StoreError};
use crate::tls::{Reloader, TlsError, TlsFiles, TlsIncoming};
use crate::work_control::WorkControl;
use crate::worker_identity::workers_interceptor;
use crate::workers_service::{WorkersConfig, WorkersService};
use akbench_core::connections::{self, ConnectionLimits};
use akbench_core::lease_timing::{LeaseTiming, LeaseTimingError, DEFAULT_LEASE_TTL_MS};

/// The coordinator's configuration (the scheduler reads its lease settings from here too).
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "akbench-coordinator",
    version,
    about = "akbench coordinator: plans, leases and work over gRPC"
)]
pub struct Config {
    /// PostgreSQL URL (`postgres://user@host:port/db`).
    #[arg(long, env = "AKBENCH_DATABASE_URL")]
    pub database_url: String,
    /// gRPC listen address (port 0 picks a free port).
    #[arg(long, env = "AKBENCH_GRPC_LISTEN", default_value = "127.0.0.1:7400")]
    pub grpc_listen: SocketAddr,
    /// HTTP listen address (status API, /metrics, health checks, status page).
    #[arg(long, env = "AKBENCH_HTTP_LISTEN", default_value = "127.0.0.1:7401")]
    pub http_listen: SocketAddr,
    /// Token file (one `role:token` per line; role worker, operator or viewer); repeatable.
    /// Tokens also come from AKBENCH_OPERATOR_TOKEN, AKBENCH_VIEWER_TOKEN and
    /// AKBENCH_WORKER_TOKEN. With none at all the coordinator is open (local mode).
    #[arg(long = "token-file")]
    pub token_files: Vec<PathBuf>,
    /// Lease time-to-live, milliseconds (1000 to 86400000: docs/limits.md, "Value ranges").
    #[arg(
        long,
        env = "AKBENCH_LEASE_TTL_MS",
        default_value_t = DEFAULT_LEASE_TTL_MS,
        value_parser = akbench_core::lease_timing::parse_lease_ttl_ms
    )]
    pub lease_ttl_ms: u64,
    /// Heartbeat interval asked of workers, milliseconds (default: a third of the lease TTL;
    /// at most half of it, refused at start otherwise).
    #[arg(long, env = "AKBENCH_HEARTBEAT_INTERVAL_MS")]
    pub heartbeat_interval_ms: Option<u64>,
    /// Log JSON lines instead of text.
    #[arg(long, env = "AKBENCH_LOG_JSON")]
    pub log_json: bool,
    /// Server certificate chain (PEM): both listeners speak TLS only. Reloaded on SIGHUP and
    /// when the file changes.
    #[arg(long, env = "AKBENCH_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "AKBENCH_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA (PEM) of the client certificates workers may present on the gRPC listener; a
    /// certificate from another CA, or expired, fails the handshake.
    #[arg(long, env = "AKBENCH_CLIENT_CA", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// Refuse worker sessions without a client certificate (signed by --client-ca).
    #[arg(long, env = "AKBENCH_REQUIRE_WORKER_CERTS", requires = "client_ca")]
    pub require_worker_certs: bool,
    /// The workers' artifact folder (`<trial key>/a<n>/...`), when it is a folder this
    /// coordinator can read: the viewer's trial pages show logs and diffs from it.
    #[arg(long, env = "AKBENCH_ARTIFACTS")]
    pub artifacts: Option<PathBuf>,
    /// Most connections each listener (gRPC, HTTP) holds at once; more are shed (HTTP:
    /// `503`). Lowered to what the open-files limit holds.
    #[arg(long, env = "AKBENCH_MAX_CONNECTIONS", default_value_t = connections::DEFAULT_TOTAL)]
    pub max_connections: usize,
    /// Most connections each listener holds at once from one peer address.
    #[arg(long, env = "AKBENCH_MAX_CONNECTIONS_PER_PEER", default_value_t = connections::DEFAULT_PER_PEER)]
    pub max_connections_per_peer: usize,
    /// Seconds a connection may take to finish its handshake (TLS, HTTP/2's preface, an
    /// HTTP/1 request's headers) before it is closed.
    #[arg(long, env = "AKBENCH_HANDSHAKE_TIMEOUT", value_name = "SECONDS",
          default_value_t = connections::DEFAULT_HANDSHAKE.as_secs_f64(),
          value_parser = akbench_core::limits::parse_seconds)]
    pub handshake_timeout: f64,
    /// Seconds a connection may carry no traffic before it is closed.
    #[arg(long, env = "AKBENCH_IDLE_TIMEOUT", value_name = "SECONDS",
          default_value_t = connections::DEFAULT_IDLE.as_secs_f64(),
          value_parser = akbench_core::limits::parse_seconds)]
    pub idle_timeout: f64,
    /// Seconds between HTTP/2 keepalive pings on gRPC connections; one not answered
    /// within as long again closes the connection. Below --idle-timeout.
    #[arg(long, env = "AKBENCH_KEEPALIVE", value_name = "SECONDS",
          default_value_t = connections::DEFAULT_KEEPALIVE.as_secs_f64(),
          value_parser = akbench_core::limits::parse_seconds)]
    pub keepalive: f64,
}

impl Config {
    /// A configuration for `database_url` with every default, listening on loopback port 0.
    pub fn local(database_url: impl Into<String>) -> Config {
        Config {
            database_url: database_url.into(),
            grpc_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            http_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token_files: Vec::new(),
            lease_ttl_ms: DEFAULT_LEASE_TTL_MS,
            heartbeat_interval_ms: None,
            log_json: false,
            tls_cert: None,
            tls_key: None,
            client_ca: None,
            require_worker_certs: false,
            artifacts: None,
            max_connections: connections::DEFAULT_TOTAL,
            max_connections_per_peer: connections::DEFAULT_PER_PEER,
            handshake_timeout: connections::DEFAULT_HANDSHAKE.as_secs_f64(),
            idle_timeout: connections::DEFAULT_IDLE.as_secs_f64(),
            keepalive: connections::DEFAULT_KEEPALIVE.as_secs_f64(),
        }
    }

    /// The listeners' connection limits as configured (before the open-files limit lowers
    /// the totals); an error for values that cannot work together.
    pub fn connection_limits(&self) -> Result<ConnectionLimits, ServeError> {
        let limits = ConnectionLimits {
            total: self.max_connections,
            per_peer: self.max_connections_per_peer,
            handshake: Duration::from_secs_f64(self.handshake_timeout),
            idle: Duration::from_secs_f64(self.idle_timeout),
            keepalive: Duration::from_secs_f64(self.keepalive),
        };
        limits.check().map_err(ServeError::Connections)?;
        Ok(limits)
    }

    /// The lease time-to-live.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_millis(self.lease_ttl_ms)
    }

    /// The lease timing (TTL, heartbeat interval, reap interval, session grace): core's one
    /// type; an error for a TTL and heartbeat interval that cannot work together.
    pub fn lease_timing(&self) -> Result<LeaseTiming, LeaseTimingError> {
        LeaseTiming::from_ms(self.lease_ttl_ms, self.heartbeat_interval_ms)
    }

    /// The TLS files, when TLS is configured; an error for flag combinations that cannot
    /// work (a client CA or required worker certificates without a server certificate).
    pub fn tls_files(&self) -> Result<Option<TlsFiles>, TlsError> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.client_ca.clone(),
            })),
            (None, None) if self.client_ca.is_none() && !self.require_worker_certs => Ok(None),
            (None, None) => Err(TlsError::Usage(
                "--client-ca and --require-worker-certs need TLS; fix: pass --tls-cert and --tls-key too".into(),
            )),
            _ => Err(TlsError::Usage(
                "--tls-cert and --tls-key go together; fix: pass both".into(),
            )),
        }
        .and_then(|files| {
            if self.require_worker_certs && self.client_ca.is_none() {
                return Err(TlsError::Usage(
                    "--require-worker-certs needs the CA that signs them; fix: pass --client-ca".into(),
                ));
            }
            Ok(files)
        })
    }

    /// Status windows: a worker counts as connected while it heartbeats, that is while it
    /// was heard from within one lease TTL (`core::dispatch::alive`, the rule dispatch
    /// uses), not for a while after it went silent.
    pub fn status_options(&self) -> StatusOptions {
        StatusOptions {
            worker_window: self.lease_ttl(),
            ..StatusOptions::default()
        }
    }
}

/// What [`serve_with`] plugs in beside the configuration.
#[derive(Debug, Clone)]
pub struct Services {
    /// Starts, resumes and cancels runs; `None` (the default) uses the coordinator's own
    /// scheduler ([`SchedulerWork`]); tests may plug in a double or
    /// [`crate::work_control::NoScheduler`].
    pub work: Option<Arc<dyn WorkControl>>,
    /// Tokens; `None` loads them from the configuration's files and the environment.
    pub tokens: Option<Tokens>,
    /// Process metrics (shared with the scheduler).
    pub metrics: Arc<Metrics>,
}

impl Default for Services {
    fn default() -> Self {
        Services {
            work: None,
            tokens: None,
            metrics: Arc::new(Metrics::default()),
        }
    }
}

/// The coordinator could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The database refused or migrations failed.
    #[error(
        "failed to prepare the database: {0}; fix: check --database-url / AKBENCH_DATABASE_URL"
    )]
    Store(#[from] StoreError),
    /// Tokens could not be loaded.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The TLS files or flags cannot be used.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// An address could not be bound.
    #[error("failed to listen on {addr}: {source}; fix: pick a free address (--grpc-listen / --http-listen)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The lease TTL and heartbeat interval cannot work together.
    #[error(transparent)]
    Timing(#[from] LeaseTimingError),
    /// The connection limits cannot work together.
    #[error("failed to start: {0}")]
    Connections(String),
    /// A live replica on the same database runs with another lease TTL.
    #[error(
        "failed to start: replica {replica} on this database runs with --lease-ttl-ms {theirs} \
         (marked alive at {seen}), this coordinator with {ours}; fix: give every replica of \
         one database the same --lease-ttl-ms (or wait a TTL after stopping the others)"
    )]
    ReplicaTtl {
        /// The other replica.
        replica: String,
        /// Its TTL in milliseconds.
        theirs: u128,
        /// Its last mark.
        seen: String,
        /// This coordinator's TTL in milliseconds.
        ours: u128,
    },
    /// A server failed while running.
    #[error("failed to serve {what}: {message}")]
    Serve {
        /// `grpc` or `http`.
        what: &'static str,
        /// The error.
        message: String,
    },
}

/// A running coordinator.
#[derive(Debug)]
pub struct ServeHandle {
    /// The bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The bound HTTP address.
    pub http_addr: SocketAddr,
    /// The listeners' connection guards (gRPC, HTTP): what they hold and shed.
    pub connections: [Arc<Guard>; 2],
    /// The database.
    pub store: Store,
    /// Process metrics.
    pub metrics: Arc<Metrics>,
    /// The served certificate, when TLS is on (reloaded on SIGHUP or a change of its files).
    pub tls: Option<Arc<Reloader>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl ServeHandle {
    /// Waits until both servers have stopped (after the shutdown future resolved and the
    /// in-flight requests finished).
    pub async fn wait(self) -> Result<(), ServeError> {
        self.task.await.map_err(|e| ServeError::Serve {
            what: "coordinator",
            message: e.to_string(),
        })?
    }
}

/// [`serve_with`] with no scheduler and tokens from the configuration and environment.
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServeHandle, ServeError> {
    serve_with(config, Services::default(), shutdown).await
}

/// Connects, applies migrations, binds both listeners and serves until `shutdown` resolves.
/// Returns once the listeners are bound, with their addresses.
pub async fn serve_with(
    config: Config,
    services: Services,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServeHandle, ServeError> {
    let timing = config.lease_timing()?;
    let limits = config
        .connection_limits()?
        .within_files(open_files_limit(), 2);
    let tls_files = config.tls_files()?;
    let tls = tls_files.clone().map(Reloader::new).transpose()?;
    // Every local file is read before the database is reached: a bad one fails at once.
    let tokens = match services.tokens {
        Some(t) => t,
        None => Tokens::load(&config.token_files, |n| std::env::var(n).ok())?,
    };
    let store = Store::connect(&config.database_url).await?;
    let applied = store.migrate().await?;
    tracing::info!(?applied, "database migrated");
    if tokens.is_open() {
        tracing::warn!(
            "no tokens configured: the coordinator is open to anyone who can reach it (local mode)"
        );
    }
    let bind = |addr: SocketAddr| listen(addr).map_err(|source| ServeError::Bind { addr, source });
    let grpc = bind(config.grpc_listen)?;
    let http = bind(config.http_listen)?;
    let (grpc_addr, http_addr) = (
        grpc.local_addr().map_err(|source| ServeError::Bind {
            addr: config.grpc_listen,
            source,
        })?,
        http.local_addr().map_err(|source| ServeError::Bind {
            addr: config.http_listen,
            source,
        })?,
    );
    let status = config.status_options();
    let scheduler = Scheduler::new(store.clone());
    if let Some(other) =
        scheduler
            .replica_ttl_conflict(timing.ttl())
            .await
            .map_err(|e| match e {
                crate::scheduler::SchedulerError::Store(s) => ServeError::Store(s),
                other => ServeError::Store(StoreError::Invalid(other.to_string())),
            })?
    {
        return Err(ServeError::ReplicaTtl {
            replica: other.replica,
            theirs: other.ttl.map_or(0, |t| t.as_millis()),
            seen: other.seen.to_rfc3339(),
            ours: timing.ttl().as_millis(),
        });
    }
    let workers = WorkersService::new(
        scheduler,
        WorkersConfig {
            lease_ttl: timing.ttl(),
            heartbeat_interval: Some(timing.heartbeat()),
            ..WorkersConfig::default()
        },
    )
    .with_metrics(services.metrics.clone());
    let work: Arc<dyn WorkControl> = match services.work {
        Some(w) => w,
        None => Arc::new(SchedulerWork::new(workers.clone())),
    };
    let control = ControlService::new(store.clone(), work, status)
        .with_metrics(services.metrics.clone())
        .into_server(tokens.clone());
    // `into_server` sets the session's message limits (akbench_proto::MAX_*_MESSAGE_BYTES).
    let workers_server = tonic::service::interceptor::InterceptedService::new(
        workers.clone().into_server(),
        workers_interceptor(tokens.clone(), config.require_worker_certs),
    );
    let app = router(HttpState {
        store: store.clone(),
        tokens,
        metrics: services.metrics.clone(),
        status,
        artifacts: config.artifacts.clone(),
        tls: tls.is_some(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let grpc_guard = Guard::with_metric(
        "grpc",
        Protocol::Grpc,
        limits,
        services.metrics.connections_shed("grpc"),
    );
    let http_protocol = if tls.is_some() {
        Protocol::HttpTls
    } else {
        Protocol::Http
    };
    let http_guard = Guard::with_metric(
        "http",
        http_protocol,
        limits,
        services.metrics.connections_shed("http"),
    );
    // Keepalive pings make a live peer's idle connection carry traffic, so only a dead or
    // silent one reaches the idle timeout (conn_guard).
    let grpc_router = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(limits.keepalive))
        .http2_keepalive_timeout(Some(limits.keepalive))
        .trace_fn(akbench_telemetry::grpc_server_span)
        .add_service(control)
        .add_service(workers_server);
    let (grpc_task, http_task, watch_task) = match (&tls, &tls_files) {
        (Some(reloader), Some(files)) => {
            let bind_err = |source| ServeError::Bind {
                addr: grpc_addr,
                source,
            };
            let grpc_config = reloader.server_config(&[b"h2"], files.load_client_roots()?)?;
            let http_config = reloader.server_config(&[b"http/1.1"], None)?;
            let grpc_in =
                TlsIncoming::new(grpc, grpc_config, grpc_guard.clone()).map_err(bind_err)?;
            let http_in =
                TlsIncoming::new(http, http_config, http_guard.clone()).map_err(bind_err)?;
            let http_server = axum::serve(http_in, app).with_graceful_shutdown(stopped());
            (
                tokio::spawn(
                    grpc_router.serve_with_incoming_shutdown(grpc_in.into_stream(), stopped()),
                ),
                tokio::spawn(async move { http_server.await }),
                Some(reloader.spawn_watch()),
            )
        }
        _ => {
            let http_in = GuardedListener {
                listener: http,
                guard: http_guard.clone(),
            };
            let http_server = axum::serve(http_in, app).with_graceful_shutdown(stopped());
            let grpc_in = crate::conn_guard::incoming(grpc, grpc_guard.clone());
            (
                tokio::spawn(grpc_router.serve_with_incoming_shutdown(grpc_in, stopped())),
                tokio::spawn(async move { http_server.await }),
                None,
            )
        }
    };
    // The reaper starts once the gRPC server accepts sessions: its first pass gives every
    // lease from before this start the restart grace, counted from now
    // (LeaseTiming::restart_grace).
    let reaper = workers.spawn_reaper();
    tracing::info!(%grpc_addr, %http_addr, tls = tls.is_some(), client_certs = config.client_ca.is_some(),
        max_connections = limits.total, max_connections_per_peer = limits.per_peer, "coordinator listening");
    let task = tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections, finishing in-flight requests");
        let _ = stop_tx.send(true);
        reaper.abort();
        if let Some(w) = &watch_task {
            w.abort();
        }
        // Worker sessions are long-lived streams that never finish on their own: give
        // in-flight requests a moment, then close what is left. Workers reconnect (to this
        // coordinator's successor) and re-present their leases.
        let grpc_abort = grpc_task.abort_handle();
        let grpc = match tokio::time::timeout(Duration::from_secs(3), grpc_task).await {
            Ok(r) => r,
            Err(_) => {
                grpc_abort.abort();
                Ok(Ok(()))
            }
        };
        let http = http_task.await;
        match grpc {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(ServeError::Serve {
                    what: "grpc",
                    message: e.to_string(),
                })
            }
            Err(e) => {
                return Err(ServeError::Serve {
                    what: "grpc",
                    message: e.to_string(),
                })
            }
        }
        match http {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServeError::Serve {
                what: "http",
                message: e.to_string(),
            }),
            Err(e) => Err(ServeError::Serve {
                what: "http",
                message: e.to_string(),
            }),
        }
    });
    Ok(ServeHandle {
        grpc_addr,
        http_addr,
        connections: [grpc_guard, http_guard],
        store,
        metrics: services.metrics,
        tls,
        task,
    })
}

/// The accept backlog of the coordinator's listeners (the kernel caps it at
/// `net.core.somaxconn`, 4096 by default since Linux 5.4). `TcpListener::bind` asks for 128
/// (the standard library's value): when a fleet of workers connects at once (a coordinator
/// restart, or 1,000 sessions opening together) the connections beyond the accept queue
/// overflow it, the kernel answers with SYN cookies and drops the handshakes' last ACKs, and
/// a share of the workers' first requests end in "connection reset" (97 of 1,000 sessions
/// in the `sessions` bench, with `TcpExtListenOverflows` and `TcpExtSyncookiesFailed`
/// rising). Workers retry with backoff, but each reset costs them a reconnect.
pub const LISTEN_BACKLOG: u32 = 4096;

/// A listener bound to `addr` with [`LISTEN_BACKLOG`] (address reuse on, as
/// `TcpListener::bind` sets it). Needs a Tokio runtime.
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// The connections accepted on `listener`, as the coordinator serves gRPC on them: with
/// Nagle's algorithm off, so that a small message (an assignment, an ack) goes out at once
/// instead of waiting for the peer's delayed ACK, about 40 ms. Benches and tests that serve
/// the coordinator's services themselves take their connections from here too (without it,
/// the dispatch bench's enqueue-to-assignment p99 was 20-44 ms, a delayed ACK's).
pub fn accepted(
    listener: TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt as _;
    TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    })
}

/// This process's soft open-files limit, when it can be read.
fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct passed, which lives for the call.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit.rlim_cur)
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// Installs the `tracing` subscriber: `RUST_LOG`-style filter (default `info`), text or JSON,
/// and the OTLP span exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (see
/// `akbench_telemetry`). Keep the returned guard until exit: dropping it flushes the spans.
pub fn init_logging(json: bool) -> akbench_telemetry::Telemetry {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    akbench_telemetry::init(akbench_telemetry::Logs {
        service_name: "akbench-coordinator",
        json,
        filter,
        // Colour only on a terminal: under docker or a log collector the codes are noise.
        ansi: std::io::IsTerminal::is_terminal(&std::io::stdout()),
        stderr: false,
        capture: None,
    })
}
