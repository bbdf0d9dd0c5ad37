//! A minimal HTTP/1.1 client for registry requests: one connection per request over the
//! HTTP stack the workspace already has (hyper, tokio, rustls with ring and the system's
//! roots), so pulling images adds no HTTP library. Plain HTTP only for the hosts the caller
//! allows (`AKBENCH_INSECURE_REGISTRIES`); redirects followed up to 5 times, credentials
//! sent only to the registry's own host. Every wait on the registry is bounded ([`STALL`]):
//! connecting, the TLS and HTTP handshakes, the response's headers, and each piece of its
//! body, so a registry that stops answering fails the pull, naming it, instead of holding
//! the attempt (and its slot) forever.

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpStream;

/// The longest a pull waits for the registry to make progress (a connection, a handshake,
/// the headers, the next piece of a body) before it fails.
pub const STALL: Duration = Duration::from_secs(60);

/// `what` bounded by `stall`: its result, or an error saying the registry `at` stalled.
async fn bounded<T>(
    stall: Duration,
    at: &str,
    doing: &str,
    what: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    match tokio::time::timeout(stall, what).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the registry {at} did not answer for {} s while {doing}; fix: check that it is up and reachable",
            stall.as_secs_f64()
        )),
    }
}

/// A response whose body has not been read yet.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lowercase.
    pub headers: hyper::HeaderMap,
    body: hyper::body::Incoming,
    /// Who answered, and how long a piece of the body may take.
    from: String,
    stall: Duration,
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
        let (from, stall) = (self.from.clone(), self.stall);
        while let Some(frame) = bounded(stall, &from, "sending a response body", async {
            Ok(self.body.frame().await)
        })
        .await?
        {
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

/// One GET of `url` with `headers` (no redirect handling), each wait bounded by `stall`.
async fn get_once(
    url: &url::Url,
    headers: &[(String, String)],
    stall: Duration,
) -> Result<Response, String> {
    let host = url
        .host_str()
        .ok_or_else(|| format!("`{url}` has no host"))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("`{url}` has no port"))?;
    let at = format!("{host}:{port}");
    let tcp = bounded(stall, &at, "connecting", async {
        TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| format!("failed to connect to {host}:{port}: {e}"))
    })
    .await?;
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
                from: at.clone(),
                stall,
            }
        })
        .map_err(|e| format!("the request to {url} failed: {e}"))
    };
    match url.scheme() {
        "http" => {
            let (mut s, conn) = bounded(stall, &at, "starting HTTP", async {
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                    .await
                    .map_err(|e| format!("failed to talk HTTP to {url}: {e}"))
            })
            .await?;
            tokio::spawn(conn);
            let resp = bounded(stall, &at, "sending the response headers", async {
                Ok(s.send_request(req).await)
            })
            .await?;
            send(resp)
        }
        "https" => {
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| format!("`{host}` is not a TLS server name: {e}"))?;
            let connector = tls()?;
            let stream = bounded(stall, &at, "the TLS handshake", async {
                connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("failed TLS with {host}:{port}: {e}"))
            })
            .await?;
            let (mut s, conn) = bounded(stall, &at, "starting HTTP", async {
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(|e| format!("failed to talk HTTP to {url}: {e}"))
            })
            .await?;
            tokio::spawn(conn);
            let resp = bounded(stall, &at, "sending the response headers", async {
                Ok(s.send_request(req).await)
            })
            .await?;
            send(resp)
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
    get_bounded(url, headers, auth, insecure, STALL).await
}

/// [`get`] with every wait bounded by `stall` instead of [`STALL`].
pub async fn get_bounded(
    url: &str,
    headers: &[(String, String)],
    auth: Option<&str>,
    insecure: &[String],
    stall: Duration,
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
        let resp = get_once(&at, &h, stall).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A loopback server that answers its first connection with `reply` (after reading the
    /// request) and then holds it open, silent, until the test ends.
    fn silent_after(reply: &'static [u8]) -> (String, std::sync::mpsc::Sender<()>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            c.write_all(reply).unwrap();
            let _ = wait.recv();
        });
        (addr, done)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_registry_that_never_answers_fails_the_request_naming_it() {
        let (addr, _hold) = silent_after(b"");
        let url = format!("http://{addr}/v2/");
        let err = runtime()
            .block_on(get_bounded(
                &url,
                &[],
                None,
                std::slice::from_ref(&addr),
                Duration::from_millis(300),
            ))
            .unwrap_err();
        assert!(
            err.contains(&addr) && err.contains("did not answer") && err.contains("headers"),
            "{err}"
        );
    }

    #[test]
    fn a_body_that_stops_midway_fails_the_read_naming_the_registry() {
        let (addr, _hold) =
            silent_after(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten b");
        let url = format!("http://{addr}/v2/blob");
        let rt = runtime();
        let resp = rt
            .block_on(get_bounded(
                &url,
                &[],
                None,
                std::slice::from_ref(&addr),
                Duration::from_millis(300),
            ))
            .unwrap();
        assert_eq!(resp.status, 200);
        let err = rt.block_on(resp.bytes(1000)).unwrap_err();
        assert!(
            err.contains(&addr) && err.contains("did not answer") && err.contains("body"),
            "{err}"
        );
    }
}
