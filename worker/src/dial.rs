//! How a client reaches the coordinator over gRPC, shared by `akbench-worker` and the
//! `akbench` CLI: an `https://` URL always gets TLS (the coordinator's certificate verified
//! against `--ca-file` or the system roots; never a plaintext fallback), an `http://` URL
//! never carries TLS flags, and a bearer token goes over plaintext only where
//! [`akbench_core::transport::check_token_transport`] allows it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use akbench_core::transport::{check_token_transport, PlaintextToken, Scheme};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// The client's TLS settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// CA certificate(s) (PEM) that signed the coordinator's certificate; `None`: the
    /// system roots.
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) to present (workers, when the coordinator asks for one).
    pub cert: Option<PathBuf>,
    /// Its private key (PEM).
    pub key: Option<PathBuf>,
}

/// The coordinator cannot be dialled as configured.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The URL cannot be used.
    #[error("failed to use coordinator URL `{url}`: {reason}; fix: pass http://HOST:PORT or https://HOST:PORT")]
    Url {
        /// As given.
        url: String,
        /// Why.
        reason: String,
    },
    /// TLS settings given for a plaintext URL (they would be silently ignored).
    #[error("failed to use {flag} with `{url}`: an http:// URL is plaintext; fix: use an https:// URL, or drop {flag}")]
    TlsOnPlaintext {
        /// The URL.
        url: String,
        /// The flag.
        flag: &'static str,
    },
    /// A TLS file cannot be read.
    #[error("failed to read {flag} {}: {message}; fix: pass a readable PEM file", path.display())]
    Read {
        /// The flag.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        message: String,
    },
    /// A client certificate without its key or the other way round.
    #[error("failed to use the client certificate: --tls-cert and --tls-key go together; fix: pass both")]
    HalfIdentity,
    /// The token would travel in plaintext.
    #[error(transparent)]
    Plaintext(#[from] PlaintextToken),
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, DialError> {
    akbench_core::bounded_read::ReadKind::Certificate
        .read(path, akbench_core::bounded_read::Links::Follow)
        .map_err(|e| DialError::Read {
            flag,
            path: path.to_path_buf(),
            message: format!("it {e}"),
        })
}

/// Checks `url` (a bare `host:port` is not accepted here: callers add the scheme), the TLS
/// options and the token rule, and builds the endpoint.
pub fn endpoint(
    url: &str,
    tls: &TlsOptions,
    has_token: bool,
    allow_plaintext_token: bool,
) -> Result<Endpoint, DialError> {
    let bad = |reason: String| DialError::Url {
        url: url.to_string(),
        reason,
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let scheme = Scheme::parse(parsed.scheme())
        .ok_or_else(|| bad(format!("scheme `{}` is not http or https", parsed.scheme())))?;
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("it names no host".into()))?
        .to_string();
    check_token_transport(scheme, &host, has_token, allow_plaintext_token)?;
    let endpoint = Endpoint::from_shared(url.trim_end_matches('/').to_string())
        .map_err(|e| bad(e.to_string()))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true);
    if scheme == Scheme::Http {
        for (set, flag) in [
            (tls.ca_file.is_some(), "--ca-file"),
            (tls.cert.is_some(), "--tls-cert"),
            (tls.key.is_some(), "--tls-key"),
        ] {
            if set {
                return Err(DialError::TlsOnPlaintext {
                    url: url.to_string(),
                    flag,
                });
            }
        }
        return Ok(endpoint);
    }
    let domain = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let mut config = ClientTlsConfig::new().domain_name(domain);
    config = match &tls.ca_file {
        Some(ca) => config.ca_certificate(Certificate::from_pem(read("--ca-file", ca)?)),
        None => config.with_native_roots(),
    };
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            config = config.identity(Identity::from_pem(
                read("--tls-cert", cert)?,
                read("--tls-key", key)?,
            ));
        }
        (None, None) => {}
        _ => return Err(DialError::HalfIdentity),
    }
    endpoint
        .tls_config(config)
        .map_err(|e| bad(format!("TLS: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_urls_refuse_tls_flags_and_remote_tokens() {
        let none = TlsOptions::default();
        assert!(endpoint("http://127.0.0.1:1", &none, true, false).is_ok());
        let e = endpoint("http://10.1.2.3:1", &none, true, false).unwrap_err();
        assert!(matches!(e, DialError::Plaintext(_)), "{e}");
        assert!(endpoint("http://10.1.2.3:1", &none, true, true).is_ok());
        let ca = TlsOptions {
            ca_file: Some("ca.pem".into()),
            ..TlsOptions::default()
        };
        let e = endpoint("http://127.0.0.1:1", &ca, false, false).unwrap_err();
        assert!(e.to_string().contains("--ca-file"), "{e}");
        let e = endpoint("ftp://x:1", &none, false, false).unwrap_err();
        assert!(e.to_string().contains("scheme"), "{e}");
        let half = TlsOptions {
            cert: Some("c.pem".into()),
            ..TlsOptions::default()
        };
        let e = endpoint("https://x:1", &half, false, false).unwrap_err();
        assert!(matches!(e, DialError::HalfIdentity), "{e}");
        let missing = TlsOptions {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..TlsOptions::default()
        };
        let e = endpoint("https://x:1", &missing, false, false).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }
}
