//! The `akbench-worker` command line.

use super::config::{default_worker_id, WorkerConfig};
use super::session::Daemon;
use akbench_core::bounded_read::{Links, ReadKind};
use clap::Parser;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// The exit codes, shown by `--help` (the same list as the module docs of `daemon`).
const EXIT_CODES: &str = "\
Exit codes:
  0  drained; everything owed was acknowledged
  1  could not start (bad configuration, unreadable token file, artifact store, or the
     sandbox cannot run here: the message names the missing kernel feature or permission)
  2  bad command line
  3  drained, but some owed messages could not be delivered before the deadline
  4  the coordinator refused the worker's credential (UNAUTHENTICATED or PERMISSION_DENIED:
     unknown or missing token, certificate name other than --worker-id, id bound to
     another credential) 3 times in a row
  5  another live session holds --worker-id (ALREADY_EXISTS) 3 times in a row: another
     worker process uses the same id
  6  the TLS handshake failed over a certificate 3 times in a row: the coordinator refused
     the worker's client certificate (another CA than its --client-ca, expired), or the
     worker did not accept the coordinator's (not signed by --ca-file, wrong name)";

/// akbench worker daemon: runs the coordinator's assignments on this host.
#[derive(Debug, Parser)]
#[command(name = "akbench-worker", version, after_help = EXIT_CODES)]
pub struct Args {
    /// The coordinator's gRPC endpoint, e.g. http://coordinator:7443; several replicas on
    /// one database comma-separated (http://c1:7443,http://c2:7443), tried in order when a
    /// session cannot be opened.
    #[arg(
        long,
        env = "AKBENCH_COORDINATOR",
        value_delimiter = ',',
        required = true
    )]
    pub coordinator: Vec<url::Url>,
    /// Bearer token for the session.
    #[arg(
        long,
        env = "AKBENCH_WORKER_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// File holding the bearer token (surrounding whitespace ignored).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Attempts run at once (1 or more).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub slots: u32,
    /// Attempts leased ahead of a free slot, each started the moment a running attempt
    /// ends instead of after the report + claim round trip (0: none). A draining worker
    /// still runs its prefetched attempts within the grace.
    #[arg(long, default_value_t = 0)]
    pub prefetch: u32,
    /// A label advertised to the coordinator, `key=value`; repeatable. A plan whose
    /// `execution.worker_labels` lists labels is claimed only by workers that have them all.
    #[arg(long = "label", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Stable worker identity [default: <hostname>-<pid>]. One live session per id: a
    /// second process with an id in use is refused (exit 5). With a client certificate it
    /// must equal the certificate's name.
    #[arg(long)]
    pub worker_id: Option<String>,
    /// Mirror cache and work folders [default: $XDG_CACHE_HOME/akbench or ~/.cache/akbench].
    #[arg(long = "cache")]
    pub cache: Option<PathBuf>,
    /// Bound of the caches under --cache (unpacked images, git mirrors, baselines) in GB
    /// (10^9 bytes); 0: unbounded. Kept after attempts end (at most once a minute): least
    /// recently used first, never one an attempt uses.
    #[arg(long, env = "AKBENCH_CACHE_MAX_GB", default_value_t = super::config::DEFAULT_CACHE_MAX_GB)]
    pub cache_max_gb: u64,
    /// Where attempts' artifacts are written first.
    #[arg(long = "out", default_value = "akbench-worker-out")]
    pub out: PathBuf,
    /// Artifact store the artifacts are copied to: a folder, file:///folder, or
    /// s3://bucket/prefix (with the `s3` feature; AWS_* environment). Without it artifacts
    /// stay under --out.
    #[arg(long)]
    pub artifacts: Option<String>,
    /// The task corpus the plans were made from.
    #[arg(long)]
    pub tasks_root: PathBuf,
    /// The agent descriptors the plans were made from.
    #[arg(long)]
    pub agents_root: PathBuf,
    /// CA certificate (PEM) that signed the coordinator's certificate, for https:// URLs
    /// [default: the system roots].
    #[arg(long, env = "AKBENCH_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) presented to the coordinator (with --tls-key).
    #[arg(long, env = "AKBENCH_WORKER_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "AKBENCH_WORKER_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Send the token over plain http:// to a non-loopback address (a private network).
    #[arg(long, env = "AKBENCH_ALLOW_PLAINTEXT_TOKEN")]
    pub allow_plaintext_token: bool,
    /// Seconds running attempts may take to finish once draining starts (0 to 604800).
    #[arg(long, default_value_t = 60.0, value_parser = grace_flag)]
    pub grace: f64,
    /// Serve Prometheus metrics on `http://ADDR/metrics` (e.g. 0.0.0.0:7402; port 0 picks
    /// a free port, logged). Off unless given.
    #[arg(long, env = "AKBENCH_WORKER_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Start even when the `sandbox` runtime cannot run here (checked at start: without
    /// this flag the worker refuses to start, naming the missing kernel feature or
    /// permission). Sandboxed attempts then end `invalid_configuration`.
    #[arg(long, env = "AKBENCH_WORKER_ALLOW_UNSANDBOXED")]
    pub allow_unsandboxed: bool,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("label {s:?} must be key=value")),
    }
}

/// `--grace`: [`akbench_core::ranges::DRAIN_GRACE_SEC`].
fn grace_flag(text: &str) -> Result<f64, String> {
    akbench_core::ranges::DRAIN_GRACE_SEC
        .parse_real(text)
        .map_err(|e| e.to_string())
}

fn cache_default() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("akbench");
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(h) => PathBuf::from(h).join(".cache/akbench"),
        None => std::env::temp_dir().join("akbench-cache"),
    }
}

impl Args {
    /// The configuration these flags describe.
    pub fn into_config(self) -> anyhow::Result<WorkerConfig> {
        let token = match (&self.token, &self.token_file) {
            (Some(t), _) => Some(t.trim().to_string()),
            (None, Some(f)) => Some(
                ReadKind::Secret
                    .read_text(f, Links::Follow)
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "failed to read --token-file {}: it {e}; fix: pass a regular file \
                             holding the token",
                            f.display()
                        )
                    })?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        let grace = akbench_core::ranges::DRAIN_GRACE_SEC
            .real(self.grace)
            .map_err(|e| anyhow::anyhow!("--grace: {e}"))?;
        // Relative paths are resolved once, here: attempts run in other working folders.
        let absolute = |flag: &str, p: PathBuf| {
            std::path::absolute(&p)
                .map_err(|e| anyhow::anyhow!("failed to resolve {flag} {}: {e}", p.display()))
        };
        let mut coordinators = self.coordinator.into_iter();
        let first = coordinators.next().ok_or_else(|| {
            anyhow::anyhow!("failed to read --coordinator: give at least one URL")
        })?;
        let mut c = WorkerConfig::new(
            first,
            absolute("--cache", self.cache.unwrap_or_else(cache_default))?,
            absolute("--out", self.out)?,
            absolute("--tasks-root", self.tasks_root)?,
            absolute("--agents-root", self.agents_root)?,
        );
        c.fallbacks = coordinators.collect();
        c.token = token;
        c.slots = self.slots;
        c.prefetch = self.prefetch;
        c.cache_max_bytes =
            (self.cache_max_gb > 0).then(|| self.cache_max_gb.saturating_mul(super::config::GB));
        c.labels = self.labels.into_iter().collect::<BTreeMap<_, _>>();
        // A worker that gives the egress proxy says so (WorkerConfig::advertised_labels).
        c.gives_egress = akbench_core::egress::offer::gives_egress(
            std::env::var(akbench_core::egress::offer::EGRESS_ENV)
                .ok()
                .as_deref(),
        )
        .map_err(|e| anyhow::anyhow!("failed to read the worker's settings: {e}"))?;
        c.worker_id = self.worker_id.unwrap_or_else(default_worker_id);
        c.artifacts = self.artifacts;
        c.grace = Duration::from_secs_f64(grace);
        c.tls = crate::dial::TlsOptions {
            ca_file: self.ca_file,
            cert: self.tls_cert,
            key: self.tls_key,
        };
        c.allow_plaintext_token = self.allow_plaintext_token;
        Ok(c)
    }
}

fn init_tracing() -> akbench_telemetry::Telemetry {
    let level = std::env::var("AKBENCH_LOG")
        .ok()
        .and_then(|v| v.parse::<tracing::Level>().ok())
        .unwrap_or(tracing::Level::INFO);
    akbench_telemetry::init(akbench_telemetry::Logs {
        service_name: "akbench-worker",
        json: false,
        filter: tracing_subscriber::EnvFilter::new(level.to_string()),
        ansi: false,
        stderr: true,
        capture: None,
    })
}

/// Parses `args` (the program name first), runs the daemon until it is drained, and returns
/// the process exit code (see the [module docs](super)). SIGTERM and SIGINT start a drain;
/// a second one cancels the running attempts at once. Logs go to stderr (`AKBENCH_LOG` sets
/// the level: error, warn, info, debug, trace).
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    let telemetry = init_tracing();
    // Checked here rather than by the flag parser, which would repeat a 10 KB id whole: the
    // range of akbench_core::ranges (what the coordinator accepts), a bad command line.
    if let Some(Err(why)) = args
        .worker_id
        .as_deref()
        .map(akbench_core::ranges::worker_id)
    {
        tracing::error!("--worker-id: {why}");
        telemetry.shutdown();
        return 2;
    }
    akbench_telemetry::raise_open_files_limit();
    let metrics_listen = args.metrics_listen;
    let allow_unsandboxed = args.allow_unsandboxed;
    let config = match args.into_config() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e:#}");
            return 1;
        }
    };
    if let Err(e) = super::preflight::check_sandbox() {
        if !allow_unsandboxed {
            tracing::error!("{e}");
            return 1;
        }
        tracing::warn!("--allow-unsandboxed: {e}");
    }
    let daemon = match Daemon::new(config) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("failed to start the async runtime: {e}");
            return 1;
        }
    };
    let code = runtime.block_on(async move {
        if let Some(addr) = metrics_listen {
            match super::metrics::bind(addr).await {
                Ok(listener) => {
                    let bound = listener.local_addr().map_or(addr, |a| a);
                    tracing::info!(metrics = %format!("http://{bound}/metrics"), "metrics listening");
                    tokio::spawn(super::metrics::serve(listener, daemon.metrics()));
                }
                Err(e) => {
                    tracing::error!(
                        "failed to listen on --metrics-listen {addr}: {e}; fix: pick a free address"
                    );
                    return 1;
                }
            }
        }
        let handle = daemon.handle();
        let signals = tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                tracing::error!("failed to install signal handlers");
                return;
            };
            loop {
                let name = tokio::select! {
                    _ = term.recv() => "SIGTERM",
                    _ = int.recv() => "SIGINT",
                };
                crate::process::note_shutdown(name);
                handle.drain(name);
            }
        });
        let exit = daemon.run().await;
        signals.abort();
        exit.code()
    });
    telemetry.shutdown();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags_into_a_config() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let d = dir.path().to_str().unwrap();
        let args = Args::try_parse_from([
            "akbench-worker",
            "--coordinator",
            "http://127.0.0.1:7443",
            "--token-file",
            token.to_str().unwrap(),
            "--slots",
            "4",
            "--label",
            "arch=x86_64",
            "--label",
            "gpu=",
            "--worker-id",
            "w1",
            "--tasks-root",
            d,
            "--agents-root",
            d,
            "--grace",
            "1.5",
            "--cache-max-gb",
            "7",
        ])
        .unwrap();
        let c = args.into_config().unwrap();
        assert_eq!(c.token.as_deref(), Some("s3cret"));
        assert_eq!(c.slots, 4);
        assert_eq!(c.labels["arch"], "x86_64");
        assert_eq!(c.labels["gpu"], "");
        assert_eq!(c.worker_id, "w1");
        assert_eq!(c.grace, Duration::from_millis(1500));
        assert_eq!(c.cache_max_bytes, Some(7_000_000_000));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn several_coordinators_are_tried_in_the_order_given() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let args = Args::try_parse_from([
            "akbench-worker",
            "--coordinator",
            "http://127.0.0.1:7443,http://127.0.0.1:7444",
            "--tasks-root",
            d,
            "--agents-root",
            d,
        ])
        .unwrap();
        let c = args.into_config().unwrap();
        assert_eq!(
            c.coordinators().map(url::Url::as_str).collect::<Vec<_>>(),
            ["http://127.0.0.1:7443/", "http://127.0.0.1:7444/"]
        );
        assert!(c.validate().is_ok());
        // A list with a bad URL is a usage error.
        assert!(Args::try_parse_from([
            "akbench-worker",
            "--coordinator",
            "http://127.0.0.1:7443,not a url",
            "--tasks-root",
            d,
            "--agents-root",
            d,
        ])
        .is_err());
    }

    #[test]
    fn relative_paths_are_resolved_at_start() {
        let args = Args::try_parse_from([
            "akbench-worker",
            "--coordinator",
            "http://127.0.0.1:7443",
            "--cache",
            "rel-cache",
            "--out",
            "rel-out",
            "--tasks-root",
            "tasks",
            "--agents-root",
            "agents",
        ])
        .unwrap();
        let c = args.into_config().unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(c.cache_root, cwd.join("rel-cache"));
        assert_eq!(c.out_root, cwd.join("rel-out"));
        assert_eq!(c.tasks_root, cwd.join("tasks"));
        assert_eq!(c.agents_root, cwd.join("agents"));
        // The caches are bounded unless told otherwise.
        assert_eq!(c.cache_max_bytes, Some(50_000_000_000));
    }

    #[test]
    fn a_cache_bound_of_zero_is_unbounded() {
        let args = Args::try_parse_from([
            "akbench-worker",
            "--coordinator",
            "http://127.0.0.1:7443",
            "--tasks-root",
            "t",
            "--agents-root",
            "a",
            "--cache-max-gb",
            "0",
        ])
        .unwrap();
        assert_eq!(args.into_config().unwrap().cache_max_bytes, None);
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        assert_eq!(main_with_args(["akbench-worker", "--slots", "x"]), 2);
        assert_eq!(
            main_with_args([
                "akbench-worker",
                "--coordinator",
                "http://127.0.0.1:7443",
                "--tasks-root",
                "t",
                "--agents-root",
                "a",
                "--slots",
                "0"
            ]),
            2
        );
        // Values outside their range (docs/limits.md): a usage error, never a panic.
        for (flag, value) in [("--grace", "1e20"), ("--grace", "NaN")] {
            let e = Args::try_parse_from([
                "akbench-worker",
                "--coordinator",
                "http://127.0.0.1:7443",
                "--tasks-root",
                "t",
                "--agents-root",
                "a",
                flag,
                value,
            ])
            .unwrap_err();
            assert_eq!(e.exit_code(), 2, "{flag} {value}");
            let text = e.to_string();
            assert!(text.contains(flag) && text.contains("fix:"), "{text}");
        }
        for id in ["w".repeat(10_000), "a b".into(), String::new()] {
            assert_eq!(
                main_with_args([
                    "akbench-worker",
                    "--coordinator",
                    "http://127.0.0.1:7443",
                    "--tasks-root",
                    "t",
                    "--agents-root",
                    "a",
                    "--worker-id",
                    &id,
                ]),
                2,
                "{id:.20}"
            );
        }
        assert!(parse_label("novalue").is_err());
        assert!(parse_label("=v").is_err());
    }
}
