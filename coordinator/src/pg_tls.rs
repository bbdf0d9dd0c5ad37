//! PostgreSQL over TLS: the libpq `sslmode` values in a database URL, on rustls (the ring
//! provider, the one of the whole build).
//!
//! tokio-postgres itself knows only `disable`, `prefer` and `require` and no `sslrootcert`;
//! [`split_tls_params`] takes `sslmode` and `sslrootcert` out of the URL (URL or
//! `key=value` form) and [`PgTls`] does what libpq does with them:
//!
//! | sslmode | TLS | certificate checked |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (the default) | when the server offers it | no |
//! | `require` | always (fails if the server has no TLS) | no (with `sslrootcert`: as `verify-ca`) |
//! | `verify-ca` | always | signed by the roots |
//! | `verify-full` | always | signed by the roots and issued for the host name |
//!
//! The roots are `sslrootcert=FILE` (PEM) or, without it or with `sslrootcert=system`, the
//! system's roots.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

use crate::tls::{provider, read_certs};

/// What the URL asks of TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgSslMode {
    /// Never.
    Disable,
    /// When offered, unverified.
    Prefer,
    /// Always, unverified.
    Require,
    /// Always, chain verified.
    VerifyCa,
    /// Always, chain and host name verified.
    VerifyFull,
}

impl PgSslMode {
    fn parse(s: &str) -> Option<PgSslMode> {
        Some(match s {
            "disable" => PgSslMode::Disable,
            "allow" | "prefer" => PgSslMode::Prefer,
            "require" => PgSslMode::Require,
            "verify-ca" => PgSslMode::VerifyCa,
            "verify-full" => PgSslMode::VerifyFull,
            _ => return None,
        })
    }

    /// The mode tokio-postgres negotiates with.
    pub fn negotiation(self) -> SslMode {
        match self {
            PgSslMode::Disable => SslMode::Disable,
            PgSslMode::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        }
    }
}

/// The TLS parameters taken out of a database URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgTlsParams {
    /// `sslmode` (default `prefer`).
    pub mode: PgSslMode,
    /// `sslrootcert`, unless absent or `system`.
    pub root_cert: Option<PathBuf>,
}

/// Removes `sslmode` and `sslrootcert` from `url` (either form) and returns the rest with
/// them; `Err` names a bad `sslmode` value.
pub fn split_tls_params(url: &str) -> Result<(String, PgTlsParams), String> {
    let mut mode = None;
    let mut root = None;
    let mut take = |key: &str, value: &str| -> Result<bool, String> {
        match key {
            "sslmode" => {
                mode = Some(PgSslMode::parse(value).ok_or_else(|| {
                    format!(
                        "sslmode={value} is not one of disable, allow, prefer, require, \
                         verify-ca, verify-full"
                    )
                })?);
                Ok(true)
            }
            "sslrootcert" => {
                root = (value != "system").then(|| PathBuf::from(value));
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_string(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    let v = percent_decode(v);
                    if !take(k, &v)? {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for word in url.split_whitespace() {
            let (k, v) = word.split_once('=').unwrap_or((word, ""));
            if !take(k.trim(), v.trim().trim_matches('\''))? {
                kept.push(word);
            }
        }
        kept.join(" ")
    };
    Ok((
        rest,
        PgTlsParams {
            mode: mode.unwrap_or(PgSslMode::Prefer),
            root_cert: root,
        },
    ))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A rustls connector for tokio-postgres, configured from [`PgTlsParams`].
#[derive(Clone, Debug)]
pub struct PgTls {
    config: Arc<ClientConfig>,
}

impl PgTls {
    /// The connector for `params` (reads `sslrootcert` now).
    pub fn new(params: &PgTlsParams) -> Result<PgTls, crate::tls::TlsError> {
        let verify = matches!(params.mode, PgSslMode::VerifyCa | PgSslMode::VerifyFull)
            || (params.mode == PgSslMode::Require && params.root_cert.is_some());
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| crate::tls::TlsError::Usage(e.to_string()))?;
        let config = if verify {
            let mut roots = RootCertStore::empty();
            match &params.root_cert {
                Some(path) => {
                    for c in read_certs(
                        path,
                        "sslrootcert",
                        "name a PEM CA certificate in the database URL's sslrootcert",
                    )? {
                        roots.add(c).map_err(|e| {
                            crate::tls::TlsError::Usage(format!("sslrootcert: {e}"))
                        })?;
                    }
                }
                None => {
                    for c in rustls_native_certs::load_native_certs().certs {
                        let _ = roots.add(c);
                    }
                }
            }
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| crate::tls::TlsError::Usage(format!("sslrootcert: {e}")))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Verifier {
                    webpki: Some(webpki),
                    check_name: params.mode == PgSslMode::VerifyFull,
                }))
                .with_no_client_auth()
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Verifier {
                    webpki: None,
                    check_name: false,
                }))
                .with_no_client_auth()
        };
        Ok(PgTls {
            config: Arc::new(config),
        })
    }
}

/// libpq's checks: none (`prefer`, `require`), the chain (`verify-ca`), or the chain and
/// the name (`verify-full`). Handshake signatures are always verified.
#[derive(Debug)]
struct Verifier {
    webpki: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl<S> MakeTlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type TlsConnect = PgTlsConnect;
    type Error = std::io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<PgTlsConnect, std::io::Error> {
        // Called for every connection, unix sockets included: a name that is not a DNS name
        // or an address only fails if TLS is actually negotiated.
        Ok(PgTlsConnect {
            config: self.config.clone(),
            name: ServerName::try_from(domain.to_string()).ok(),
            domain: domain.to_string(),
        })
    }
}

/// One connection's TLS handshake.
#[derive(Debug)]
pub struct PgTlsConnect {
    config: Arc<ClientConfig>,
    name: Option<ServerName<'static>>,
    domain: String,
}

impl<S> TlsConnect<S> for PgTlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<PgTlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let name = self.name.ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("failed to start TLS: {:?} is not a host name", self.domain),
                )
            })?;
            let connector = tokio_rustls::TlsConnector::from(self.config);
            Ok(PgTlsStream(connector.connect(name, stream).await?))
        })
    }
}

/// A TLS connection to PostgreSQL.
#[derive(Debug)]
pub struct PgTlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for PgTlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for PgTlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PgTlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_come_out_of_both_url_forms() {
        let table = [
            (
                "postgres://u@h:5/db",
                "postgres://u@h:5/db",
                PgSslMode::Prefer,
                None,
            ),
            (
                "postgres://u@h:5/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
                "postgres://u@h:5/db",
                PgSslMode::VerifyFull,
                Some("/etc/ca.pem"),
            ),
            (
                "postgresql://u@h/db?application_name=x&sslmode=require",
                "postgresql://u@h/db?application_name=x",
                PgSslMode::Require,
                None,
            ),
            (
                "postgres://u@h/db?sslmode=verify-ca&sslrootcert=system",
                "postgres://u@h/db",
                PgSslMode::VerifyCa,
                None,
            ),
            (
                "host=h user=u sslmode=disable dbname=d",
                "host=h user=u dbname=d",
                PgSslMode::Disable,
                None,
            ),
        ];
        for (url, rest, mode, root) in table {
            let (r, p) = split_tls_params(url).unwrap();
            assert_eq!(r, rest, "{url}");
            assert_eq!(p.mode, mode, "{url}");
            assert_eq!(p.root_cert, root.map(PathBuf::from), "{url}");
        }
        let e = split_tls_params("postgres://h/db?sslmode=strict").unwrap_err();
        assert!(e.contains("verify-full"), "{e}");
    }
}
