//! What a worker daemon needs to know: where the coordinator is, its identity and capacity,
//! and where tasks, agents, caches and artifacts live.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use url::Url;

/// The default bound of a worker's caches, in GB (`--cache-max-gb`).
pub const DEFAULT_CACHE_MAX_GB: u64 = 50;

/// Bytes in a GB (as `--cache-max-gb` counts them).
pub const GB: u64 = 1_000_000_000;

/// The configuration of one worker daemon.
#[derive(Clone)]
pub struct WorkerConfig {
    /// The coordinator's gRPC endpoint (`http://host:port`).
    pub coordinator: Url,
    /// Further coordinators (replicas on the same database), tried in order after
    /// `coordinator` when a session cannot be opened (docs/remote.md "Replicas").
    pub fallbacks: Vec<Url>,
    /// Bearer token sent as `authorization: Bearer <token>` on the session.
    pub token: Option<String>,
    /// Stable identity of this worker (`<hostname>-<pid>` by default).
    pub worker_id: String,
    /// How many attempts run at once (at least 1).
    pub slots: u32,
    /// Attempts leased ahead of a free slot, each started the moment a running attempt
    /// ends (so a slot does not sit idle for the report + claim round trip); 0 (the
    /// default): none. A prefetched attempt is held like a running one: a draining worker
    /// still runs it within its grace, and cancels it when the grace is over.
    pub prefetch: u32,
    /// Labels advertised in `Hello` (the operator's; [`WorkerConfig::advertised_labels`]
    /// adds the ones the worker derives).
    pub labels: BTreeMap<String, String>,
    /// Whether this worker gives tasks the egress proxy (`AKBENCH_EGRESS`, default on;
    /// `akbench_core::egress::offer`): it then advertises `akbench.egress`.
    pub gives_egress: bool,
    /// Mirror cache and per-attempt work folders (`<cache>/mirrors`, `<cache>/work`).
    pub cache_root: PathBuf,
    /// The bound of the caches under `cache_root` (images, mirrors, baselines) in bytes,
    /// kept by a collection after attempts end (`None`: unbounded). Default: 50 GB.
    pub cache_max_bytes: Option<u64>,
    /// Local folder where each attempt's artifacts are written first
    /// (`<out>/<trial key>/a<n>/`).
    pub out_root: PathBuf,
    /// Artifact store the artifacts are copied to (`None`: they stay under `out_root`).
    pub artifacts: Option<String>,
    /// The task corpus the plan was made from.
    pub tasks_root: PathBuf,
    /// The agent descriptors the plan was made from.
    pub agents_root: PathBuf,
    /// How long running attempts may take to finish once draining starts.
    pub grace: Duration,
    /// TLS to the coordinator (`https://` URLs): CA file and client certificate.
    pub tls: crate::dial::TlsOptions,
    /// Send the token over plain `http://` to a non-loopback address anyway.
    pub allow_plaintext_token: bool,
}

impl std::fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerConfig")
            .field("coordinator", &self.coordinator.as_str())
            .field(
                "fallbacks",
                &self.fallbacks.iter().map(Url::as_str).collect::<Vec<_>>(),
            )
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("worker_id", &self.worker_id)
            .field("slots", &self.slots)
            .field("prefetch", &self.prefetch)
            .field("labels", &self.labels)
            .field("gives_egress", &self.gives_egress)
            .field("cache_root", &self.cache_root)
            .field("cache_max_bytes", &self.cache_max_bytes)
            .field("out_root", &self.out_root)
            .field("artifacts", &self.artifacts)
            .field("tasks_root", &self.tasks_root)
            .field("agents_root", &self.agents_root)
            .field("grace", &self.grace)
            .field("tls", &self.tls)
            .field("allow_plaintext_token", &self.allow_plaintext_token)
            .finish()
    }
}

/// A configuration that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The coordinator URL is not usable.
    #[error("coordinator `{url}` is not usable: {reason}; give an http:// or https:// URL such as https://coordinator:7443")]
    Coordinator {
        /// As given.
        url: String,
        /// Why.
        reason: String,
    },
    /// A value is invalid.
    #[error("{0}")]
    Invalid(String),
}

impl WorkerConfig {
    /// The labels this worker advertises: the operator's, and `akbench.egress` when it gives
    /// the egress proxy (plans whose tasks need the network require it).
    pub fn advertised_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        if self.gives_egress {
            labels
                .entry(akbench_core::egress::offer::EGRESS_LABEL.to_string())
                .or_default();
        }
        labels
    }

    /// The coordinator's endpoint: TLS for `https://`, and the plaintext-token rule.
    pub fn endpoint(&self) -> Result<tonic::transport::Endpoint, ConfigError> {
        self.endpoint_of(&self.coordinator)
    }

    /// Every coordinator this worker may open a session with, in the order tried:
    /// `coordinator`, then the `fallbacks`.
    pub fn coordinators(&self) -> impl Iterator<Item = &Url> {
        std::iter::once(&self.coordinator).chain(&self.fallbacks)
    }

    /// The endpoint of each of [`WorkerConfig::coordinators`], with its URL.
    pub fn endpoints(&self) -> Result<Vec<(Url, tonic::transport::Endpoint)>, ConfigError> {
        self.coordinators()
            .map(|url| Ok((url.clone(), self.endpoint_of(url)?)))
            .collect()
    }

    fn endpoint_of(&self, url: &Url) -> Result<tonic::transport::Endpoint, ConfigError> {
        crate::dial::endpoint(
            url.as_str(),
            &self.tls,
            self.token.is_some(),
            self.allow_plaintext_token,
        )
        .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// A configuration with defaults: 1 slot, no labels, `<hostname>-<pid>`, grace 60 s,
    /// caches bounded at 50 GB.
    pub fn new(
        coordinator: Url,
        cache_root: PathBuf,
        out_root: PathBuf,
        tasks_root: PathBuf,
        agents_root: PathBuf,
    ) -> Self {
        Self {
            coordinator,
            fallbacks: Vec::new(),
            token: None,
            worker_id: default_worker_id(),
            slots: 1,
            prefetch: 0,
            labels: BTreeMap::new(),
            gives_egress: true,
            cache_root,
            cache_max_bytes: Some(DEFAULT_CACHE_MAX_GB * GB),
            out_root,
            artifacts: None,
            tasks_root,
            agents_root,
            grace: Duration::from_secs(60),
            tls: crate::dial::TlsOptions::default(),
            allow_plaintext_token: false,
        }
    }

    /// The prefetch `akbench sweep` gives its embedded workers: a quarter of the slots,
    /// rounded up.
    pub fn sweep_prefetch(slots: u32) -> u32 {
        slots.div_ceil(4)
    }

    /// Most attempts this worker holds leases for at once: the slots plus the prefetched
    /// ones (what it advertises to the coordinator as its capacity).
    pub fn leases(&self) -> u32 {
        self.slots.saturating_add(self.prefetch)
    }

    /// Checks what can be checked before connecting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for url in self.coordinators() {
            match url.scheme() {
                "http" | "https" => {}
                s => {
                    return Err(ConfigError::Coordinator {
                        url: url.to_string(),
                        reason: format!("scheme `{s}` is not http or https"),
                    })
                }
            }
            if url.host_str().is_none_or(str::is_empty) {
                return Err(ConfigError::Coordinator {
                    url: url.to_string(),
                    reason: "it names no host".into(),
                });
            }
        }
        self.endpoints()?;
        if self.slots == 0 {
            return Err(ConfigError::Invalid(
                "--slots must be at least 1".to_string(),
            ));
        }
        // The range of akbench_core::ranges (the table wins over any other check): what the
        // coordinator accepts, so a worker is never refused in every session forever.
        if let Err(why) = akbench_core::ranges::worker_id(&self.worker_id) {
            return Err(ConfigError::Invalid(format!("--worker-id: {why}")));
        }
        if let Some(t) = &self.token {
            if t.is_empty() || t.chars().any(|c| c.is_control() || c == ' ') {
                return Err(ConfigError::Invalid(
                    "the worker token is empty or contains spaces or control characters"
                        .to_string(),
                ));
            }
        }
        for (dir, what) in [
            (&self.tasks_root, "--tasks-root"),
            (&self.agents_root, "--agents-root"),
        ] {
            if !dir.is_dir() {
                return Err(ConfigError::Invalid(format!(
                    "{what} {} is not a folder; point it at the corpus the plan was made from",
                    dir.display()
                )));
            }
        }
        Ok(())
    }
}

/// `<hostname>-<pid>`.
pub fn default_worker_id() -> String {
    format!("{}-{}", hostname(), std::process::id())
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success
    // (and we stop at the first NUL or the end).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "worker".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    if name.is_empty() {
        "worker".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> WorkerConfig {
        let d = std::env::temp_dir();
        WorkerConfig::new(url.parse().unwrap(), d.clone(), d.clone(), d.clone(), d)
    }

    #[test]
    fn a_worker_advertises_the_egress_label_only_when_it_gives_the_network() {
        let mut c = config("http://x:1");
        c.labels.insert("gpu".into(), "a100".into());
        let on = c.advertised_labels();
        assert_eq!(on.get("akbench.egress").map(String::as_str), Some(""));
        assert_eq!(on.get("gpu").map(String::as_str), Some("a100"));
        c.gives_egress = false;
        let off = c.advertised_labels();
        assert!(!off.contains_key("akbench.egress"), "{off:?}");
        assert_eq!(off.len(), 1);
        // An operator's own value is kept.
        c.gives_egress = true;
        c.labels.insert("akbench.egress".into(), "mirror".into());
        assert_eq!(c.advertised_labels()["akbench.egress"], "mirror");
    }

    #[test]
    fn validates_urls_slots_and_tokens() {
        assert!(config("http://127.0.0.1:7443").validate().is_ok());
        assert!(config("ftp://x").validate().is_err());
        let mut c = config("http://x:1");
        c.slots = 0;
        assert!(c.validate().is_err());
        c.slots = 2;
        c.token = Some("a b".into());
        assert!(c.validate().is_err());
        c.token = Some("secret".into());
        // A token over plaintext to a non-loopback host needs the explicit flag.
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("--allow-plaintext-token"), "{e}");
        c.allow_plaintext_token = true;
        assert!(c.validate().is_ok());
        assert!(!format!("{c:?}").contains("secret"));
        // Every listed coordinator is checked, not only the first.
        let mut several = config("http://127.0.0.1:7443");
        several.fallbacks = vec!["http://127.0.0.1:7444".parse().unwrap()];
        assert!(several.validate().is_ok());
        several.fallbacks.push("ftp://127.0.0.1:1".parse().unwrap());
        let e = several.validate().unwrap_err().to_string();
        assert!(e.contains("ftp://127.0.0.1:1"), "{e}");
        let mut tls = config("https://x:1");
        tls.token = Some("secret".into());
        assert!(tls.validate().is_ok());
        // A worker id longer than a coordinator accepts is refused at start, not retried.
        let mut long = config("http://127.0.0.1:7443");
        long.worker_id = "w".repeat(akbench_core::identity::MAX_WORKER_ID_BYTES);
        assert!(long.validate().is_ok());
        long.worker_id = "w".repeat(10_000);
        let e = long.validate().unwrap_err().to_string();
        assert!(
            e.contains("--worker-id") && e.contains("10000 bytes") && e.len() < 600,
            "{e}"
        );
    }

    #[test]
    fn default_worker_id_names_host_and_pid() {
        let id = default_worker_id();
        assert!(id.ends_with(&format!("-{}", std::process::id())), "{id}");
    }
}
