//! Telling a refused client certificate apart from a network failure, without racing the
//! coordinator's alert.
//!
//! Under TLS 1.3 a client's handshake is done once it has sent its Finished; the server
//! checks the client's certificate after that and answers with an alert. The gRPC client
//! has by then written its first request, and when the server closes, hyper reports the
//! request as "connection closed" (the alert is only seen by its connection task). So a
//! refused certificate can look like a transport error, and a worker would retry it
//! forever. [`certificate_verdict`] asks again the one way that cannot race: a TLS
//! handshake with the same settings that then only reads. A server that refuses the
//! certificate sends its alert (read as rustls' error); one that accepts it sends its
//! HTTP/2 settings, or nothing within the wait.

use crate::dial::TlsOptions;
use akbench_core::bounded_read::{Links, ReadKind};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// What the read-only handshake saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The handshake or the first read failed with this TLS error (an alert, or this side
    /// not trusting the server's certificate).
    TlsError(String),
    /// The server accepted the connection (sent data, or nothing within the wait), or the
    /// probe could not be made (the network): nothing to learn about the certificate.
    NothingLearned,
}

/// Connects to `url` (an `https://` URL) with `tls`, completes the handshake, writes
/// nothing and reads for at most `wait`.
pub async fn certificate_verdict(url: &url::Url, tls: &TlsOptions, wait: Duration) -> Verdict {
    match tokio::time::timeout(wait, probe(url, tls, wait)).await {
        Ok(Ok(v)) => v,
        Ok(Err(_)) | Err(_) => Verdict::NothingLearned,
    }
}

async fn probe(url: &url::Url, tls: &TlsOptions, wait: Duration) -> Result<Verdict, String> {
    let host = url.host_str().ok_or("no host")?;
    let port = url.port_or_known_default().ok_or("no port")?;
    let name = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let server_name = ServerName::try_from(name.clone()).map_err(|e| e.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(client_config(tls)?);
    let tcp = tokio::net::TcpStream::connect((name.as_str(), port))
        .await
        .map_err(|e| e.to_string())?;
    let mut stream = match connector.connect(server_name, tcp).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Ok(Verdict::TlsError(tls_error_text(&e)))
        }
        Err(e) => return Err(e.to_string()),
    };
    let mut buf = [0u8; 64];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            Ok(Verdict::TlsError(tls_error_text(&e)))
        }
        _ => Ok(Verdict::NothingLearned),
    }
}

fn tls_error_text(e: &std::io::Error) -> String {
    match e.get_ref() {
        Some(inner) => inner.to_string(),
        None => e.to_string(),
    }
}

/// The rustls configuration equivalent to the one [`crate::dial::endpoint`] gives tonic.
fn client_config(tls: &TlsOptions) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match &tls.ca_file {
        Some(path) => {
            let pem = ReadKind::Certificate
                .read(path, Links::Follow)
                .map_err(|e| e.to_string())?;
            for c in CertificateDer::pem_slice_iter(&pem) {
                roots
                    .add(c.map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?;
            }
        }
        None => {
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            let cert_pem = ReadKind::Certificate
                .read(cert, Links::Follow)
                .map_err(|e| e.to_string())?;
            let key_pem = ReadKind::Certificate
                .read(key, Links::Follow)
                .map_err(|e| e.to_string())?;
            let chain = CertificateDer::pem_slice_iter(&cert_pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| e.to_string())?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}
