//! Transport security of the coordinator's listeners (gRPC and HTTP): the server certificate
//! and key from PEM files, reloaded on SIGHUP or when either file changes, and, when a client
//! CA is configured, client certificates that workers present on the gRPC listener.
//!
//! - [`TlsFiles`]: the configured files; [`TlsFiles::load`] reads and checks them.
//! - [`Reloader`]: the current certificate (a rustls certificate resolver) and the task that
//!   swaps it in on SIGHUP or a change of the files (a bad new pair is logged and the old
//!   one kept, so a half-written renewal never takes the coordinator down).
//! - [`TlsIncoming`]: accepted TCP connections, handshaken off the accept loop (a slow or
//!   silent client holds only its own task) and handed to tonic as a stream or to axum as a
//!   listener.
//!
//! The crypto provider is rustls' `ring` provider, the only one in the build.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::conn_guard::{Bounded, Guard};

/// How long a client may take to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the certificate files are checked for a change.
pub const RELOAD_POLL: Duration = Duration::from_secs(2);

/// A TLS file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("failed to read {what} {}: {message}; fix: {fix}", path.display())]
    Read {
        /// Which file (`certificate`, `key`, `client CA`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        message: String,
        /// The flag that names it.
        fix: &'static str,
    },
    /// The files hold no usable certificate or key, or they do not match.
    #[error("failed to use {what} {}: {message}; fix: {fix}", path.display())]
    Invalid {
        /// Which file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
        /// How to fix it.
        fix: &'static str,
    },
    /// A flag combination that cannot work.
    #[error("failed to configure TLS: {0}")]
    Usage(String),
}

const CERT_FIX: &str = "pass a PEM certificate chain with --tls-cert (AKBENCH_TLS_CERT)";
const KEY_FIX: &str =
    "pass the PEM private key of that certificate with --tls-key (AKBENCH_TLS_KEY)";
const CA_FIX: &str = "pass a PEM CA certificate with --client-ca (AKBENCH_CLIENT_CA)";

/// The ring crypto provider (the one provider of the build).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The configured TLS files of the coordinator.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The server certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA of the client certificates that workers present (PEM); `None`: no client
    /// certificates are asked for.
    pub client_ca: Option<PathBuf>,
}

fn read(path: &Path, what: &'static str, fix: &'static str) -> Result<Vec<u8>, TlsError> {
    akbench_core::bounded_read::ReadKind::Certificate
        .read(path, akbench_core::bounded_read::Links::Follow)
        .map_err(|e| TlsError::Read {
            what,
            path: path.to_path_buf(),
            message: format!("it {e}"),
            fix,
        })
}

/// Reads PEM certificates from `path` (at least one).
pub fn read_certs(
    path: &Path,
    what: &'static str,
    fix: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path, what, fix)?;
    let invalid = |message: String| TlsError::Invalid {
        what,
        path: path.to_path_buf(),
        message,
        fix,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("no CERTIFICATE block".into()));
    }
    Ok(certs)
}

impl TlsFiles {
    /// Reads the certificate and key and checks that they belong together.
    pub fn load_key(&self) -> Result<Arc<CertifiedKey>, TlsError> {
        let chain = read_certs(&self.cert, "certificate", CERT_FIX)?;
        let key_bytes = read(&self.key, "key", KEY_FIX)?;
        let invalid = |message: String| TlsError::Invalid {
            what: "key",
            path: self.key.clone(),
            message,
            fix: KEY_FIX,
        };
        let key = PrivateKeyDer::from_pem_slice(&key_bytes)
            .map_err(|e| invalid(format!("no PEM private key: {e}")))?;
        let key = CertifiedKey::from_der(chain, key, &provider())
            .map_err(|e| invalid(format!("it does not fit the certificate: {e}")))?;
        Ok(Arc::new(key))
    }

    /// The client certificate roots, when a client CA is configured.
    pub fn load_client_roots(&self) -> Result<Option<RootCertStore>, TlsError> {
        let Some(path) = &self.client_ca else {
            return Ok(None);
        };
        let mut roots = RootCertStore::empty();
        for cert in read_certs(path, "client CA", CA_FIX)? {
            roots.add(cert).map_err(|e| TlsError::Invalid {
                what: "client CA",
                path: path.clone(),
                message: e.to_string(),
                fix: CA_FIX,
            })?;
        }
        Ok(Some(roots))
    }

    fn stamp(&self) -> Option<(SystemTime, SystemTime)> {
        let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        Some((m(&self.cert)?, m(&self.key)?))
    }
}

/// The current server certificate; swapped by [`Reloader::reload`].
#[derive(Debug)]
pub struct Reloader {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for Reloader {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

impl Reloader {
    /// Loads the files once (an error here stops the start: nothing is served).
    pub fn new(files: TlsFiles) -> Result<Arc<Reloader>, TlsError> {
        let key = files.load_key()?;
        Ok(Arc::new(Reloader {
            files,
            current: RwLock::new(key),
        }))
    }

    /// Reads the files again; on success new handshakes use the new certificate, on failure
    /// the old one stays and the error is returned.
    pub fn reload(&self) -> Result<(), TlsError> {
        let key = self.files.load_key()?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = key;
        Ok(())
    }

    /// The DER of the certificate served now (tests and logs).
    pub fn current_cert(&self) -> CertificateDer<'static> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).cert[0].clone()
    }

    /// Reloads on SIGHUP and whenever the files' modification times change (checked every
    /// [`RELOAD_POLL`]).
    pub fn spawn_watch(self: &Arc<Self>) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut stamp = this.files.stamp();
            #[cfg(unix)]
            let mut hup =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
            let mut tick = tokio::time::interval(RELOAD_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let why = tokio::select! {
                    _ = tick.tick() => {
                        let now = this.files.stamp();
                        if now == stamp || now.is_none() {
                            continue;
                        }
                        stamp = now;
                        "the files changed"
                    }
                    _ = async {
                        #[cfg(unix)]
                        if let Some(h) = hup.as_mut() {
                            h.recv().await;
                            return;
                        }
                        std::future::pending::<()>().await
                    } => "SIGHUP",
                };
                match this.reload() {
                    Ok(()) => tracing::info!(reason = why, "TLS certificate reloaded"),
                    Err(e) => {
                        tracing::error!(
                            reason = why,
                            "TLS certificate not reloaded, the old one stays: {e}"
                        )
                    }
                }
            }
        })
    }

    /// The rustls configuration of a listener speaking `alpn`; `client_roots`: ask for
    /// (optional) client certificates signed by those roots.
    pub fn server_config(
        self: &Arc<Self>,
        alpn: &[&[u8]],
        client_roots: Option<RootCertStore>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Usage(e.to_string()))?;
        let builder = match client_roots {
            Some(roots) => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                        .allow_unauthenticated()
                        .build()
                        .map_err(|e| TlsError::Usage(format!("the client CA is unusable: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.clone());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }
}

/// How long a refused handshake's connection is drained before it is closed.
const REFUSAL_DRAIN: Duration = Duration::from_secs(2);

/// Closes a connection whose handshake was refused so that the client reads the alert.
///
/// rustls has written its alert (unknown CA, bad or missing certificate). A TLS 1.3 client
/// takes its handshake as done once it sent its Finished, so it may already have written
/// its first bytes (the HTTP/2 preface): closing with those unread would make the kernel
/// send a reset, which can reach the client before it reads the alert, and the client
/// then sees a transport error instead of the refusal (and retries as if the network
/// failed). So: end the write side after the alert (FIN), discard what the client sends
/// until it closes or [`REFUSAL_DRAIN`] passes (at most 64 KiB), then close.
async fn close_after_alert<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut s: S) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let drain = async {
        let _ = s.shutdown().await;
        let mut buf = [0u8; 4096];
        let mut left = 64 * 1024usize;
        while left > 0 {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_DRAIN, drain).await;
}

/// Connections accepted on a listener and handshaken with TLS.
#[derive(Debug)]
pub struct TlsIncoming {
    rx: mpsc::Receiver<TlsStream<Bounded<TcpStream>>>,
    addr: SocketAddr,
    task: AbortOnDrop,
}

impl TlsIncoming {
    /// Starts accepting on `listener` the connections `guard` admits; each handshake runs
    /// in its own task.
    pub fn new(
        listener: TcpListener,
        config: Arc<ServerConfig>,
        guard: Arc<Guard>,
    ) -> std::io::Result<TlsIncoming> {
        let addr = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(async move {
            loop {
                let tcp = guard.accept(&listener).await;
                let peer = tcp.get_ref().peer_addr().unwrap_or(addr);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let handshake = acceptor.accept(tcp).into_fallible();
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send(tls).await;
                        }
                        Ok(Err((e, tcp))) => {
                            tracing::debug!(%peer, "TLS handshake refused: {e}");
                            close_after_alert(tcp).await;
                        }
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsIncoming {
            rx,
            addr,
            task: AbortOnDrop(task),
        })
    }

    /// The connections as a stream (for tonic's `serve_with_incoming_shutdown`).
    pub fn into_stream(
        self,
    ) -> impl tokio_stream::Stream<Item = std::io::Result<TlsStream<Bounded<TcpStream>>>> {
        let TlsIncoming {
            rx, task: guard, ..
        } = self;
        tokio_stream::StreamExt::map(tokio_stream::wrappers::ReceiverStream::new(rx), move |s| {
            let _ = &guard;
            Ok(s)
        })
    }
}

#[derive(Debug)]
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl axum::serve::Listener for TlsIncoming {
    type Io = TlsStream<Bounded<TcpStream>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.rx.recv().await {
                Some(tls) => {
                    let peer = tls.get_ref().0.get_ref().peer_addr().unwrap_or(self.addr);
                    return (tls, peer);
                }
                None => std::future::pending::<()>().await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
