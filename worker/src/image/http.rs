//! A minimal HTTP/1.1 client for registry requests: one connection per request over the
//! HTTP stack the workspace already has (hyper, tokio, rustls with ring and the system's
//! roots), so pulling images adds no HTTP library. Plain HTTP only for the hosts the caller
//! allows (`AKBENCH_INSECURE_REGISTRIES`); redirects followed up to 5 times, credentials
//! sent only to the registry's own host.

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use std::sync::{Arc, OnceLock};
use tokio::net::TcpStream;

/// A response whose body has not been read yet.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lowercase.
    pub headers: hyper::HeaderMap,
    body: hyper::body::Incoming,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Response({})", self.status)
    }
}

impl Response {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Reads the body in pieces into `sink`; stops with an error past `limit` bytes.
    pub async fn read_into(
        mut self,
        limit: u64,
        mut sink: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<u64, String> {
        let mut total = 0u64;
        while let Some(frame) = self.body.frame().await {
            let frame = frame.map_err(|e| format!("the response broke off: {e}"))?;
            if let Ok(data) = frame.into_data() {
                total += data.len() as u64;
                if total > limit {
                    return Err(format!("the response is larger than {limit} bytes"));
                }
                sink(&data)?;
            }
        }
        Ok(total)
    }

    /// The whole body, at most `limit` bytes.
    pub async fn bytes(self, limit: u64) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        self.read_into(limit, |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .await?;
        Ok(out)
    }
}

fn tls() -> Result<tokio_rustls::TlsConnector, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
                .map_err(|e| format!("failed to set up TLS: {e}"))
        })
        .clone()
        .map(tokio_rustls::TlsConnector::from)
}

/// One GET of `url` with `headers` (no redirect handling).
async fn get_once(url: &url::Url, headers: &[(String, String)]) -> Result<Response, String> {
    let host = url
        .host_str()
        .ok_or_else(|| format!("`{url}` has no host"))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("`{url}` has no port"))?;
    let tcp = TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| format!("failed to connect to {host}:{port}: {e}"))?;
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path = format!("{path}?{q}");
    }
    let mut req = hyper::Request::get(path).header(hyper::header::HOST, authority);
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("failed to build the request for {url}: {e}"))?;
    let send = |resp: Result<hyper::Response<hyper::body::Incoming>, hyper::Error>| {
        resp.map(|r| {
            let (parts, body) = r.into_parts();
            Response {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
            }
        })
        .map_err(|e| format!("the request to {url} failed: {e}"))
    };
    match url.scheme() {
        "http" => {
            let (mut s, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                    .await
                    .map_err(|e| format!("failed to talk HTTP to {url}: {e}"))?;
            tokio::spawn(conn);
            send(s.send_request(req).await)
        }
        "https" => {
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| format!("`{host}` is not a TLS server name: {e}"))?;
            let stream = tls()?
                .connect(name, tcp)
                .await
                .map_err(|e| format!("failed TLS with {host}:{port}: {e}"))?;
            let (mut s, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(|e| format!("failed to talk HTTP to {url}: {e}"))?;
            tokio::spawn(conn);
            send(s.send_request(req).await)
        }
        other => Err(format!("`{url}` uses `{other}`, not http or https")),
    }
}

/// GET `url`, following redirects (at most 5). `auth` goes only to `url`'s own host;
/// `insecure` lists the `host:port`s that may be reached over plain HTTP.
pub async fn get(
    url: &str,
    headers: &[(String, String)],
    auth: Option<&str>,
    insecure: &[String],
) -> Result<Response, String> {
    let first = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let mut at = first.clone();
    for _ in 0..6 {
        if at.scheme() == "http" {
            let hp = format!(
                "{}:{}",
                at.host_str().unwrap_or(""),
                at.port_or_known_default().unwrap_or(80)
            );
            if !insecure.contains(&hp) {
                return Err(format!(
                    "`{at}` is plain HTTP and {hp} is not in {}; fix: use https, or list {hp} there",
                    akbench_core::image::registry::INSECURE_VAR
                ));
            }
        }
        let mut h = headers.to_vec();
        if let Some(a) = auth {
            if at.host_str() == first.host_str() && at.port() == first.port() {
                h.push(("authorization".into(), a.to_string()));
            }
        }
        let resp = get_once(&at, &h).await?;
        if matches!(resp.status, 301 | 302 | 303 | 307 | 308) {
            let loc = resp
                .header("location")
                .ok_or_else(|| format!("{at} redirected without a location"))?;
            at = at
                .join(loc)
                .map_err(|e| format!("{at} redirected to `{loc}`: {e}"))?;
            continue;
        }
        return Ok(resp);
    }
    Err(format!("{first} redirected more than 5 times"))
}
