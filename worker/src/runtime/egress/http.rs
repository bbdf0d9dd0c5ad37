//! Requests the egress proxy answers itself: an intercepted HTTPS connection (`CONNECT`
//! to port 443 while interception is on: TLS terminated with a leaf from the worker's CA,
//! [`super::intercept`]) and a cacheable plain-HTTP request. One request per connection
//! (`Connection: close` both ways, as the plain path). The phase's network was decided on
//! the host before this runs; here a request is answered from the worker's cache
//! ([`super::store`], what may be cached decided by `akbench_core::egress::cache`) or
//! fetched from the host, reached under the same address rules as a tunnel
//! ([`super::reach`]) and, for HTTPS, verified against the system's roots plus the
//! operator's. Every request is recorded with its method, URL, status, bytes and how it
//! used the cache.

use super::{answer_text, hold, reach, Active, Shared};
use akbench_core::egress::cache::{self, CacheRequest, KEPT_HEADERS};
use akbench_core::egress::http::{
    cached_response_head, parse_request, parse_response, OriginRequest,
};
use akbench_core::egress::request::{self, HeadError};
use akbench_core::egress::{CacheUse, Connection, Exchange, Outcome};
use rustls::pki_types::ServerName;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

/// Largest request body read when the proxy answers the request itself.
const MAX_BODY: u64 = 64 * 1024 * 1024;
/// Largest response head read from a host.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// What one answered request amounted to.
struct Answered {
    outcome: Outcome,
    detail: Option<String>,
    status: Option<u16>,
    up: u64,
    down: u64,
    from_cache: u64,
    cache: CacheUse,
}

impl Answered {
    fn failed(outcome: Outcome, status: u16, why: String, down: u64) -> Answered {
        Answered {
            outcome,
            detail: Some(why),
            status: Some(status),
            up: 0,
            down,
            from_cache: 0,
            cache: CacheUse::Bypass,
        }
    }
}

fn record(shared: &Shared, host: &str, port: u16, req: Option<(&str, String)>, a: Answered) {
    let requests = req
        .map(|(method, url)| Exchange {
            method: method.into(),
            url,
            status: a.status,
            bytes: a.down,
            cache: a.cache,
        })
        .into_iter()
        .collect();
    super::lock(&shared.log).add(Connection {
        host: host.into(),
        port,
        outcome: a.outcome,
        bytes_up: a.up,
        bytes_down: a.down,
        http_status: a.status,
        detail: a.detail,
        bytes_from_cache: a.from_cache,
        requests,
    });
}

/// An error answer written on `client` (any stream): its bytes.
fn fail_on(client: &mut impl Write, status: u16, why: &str) -> u64 {
    let text = answer_text(status, why);
    let _ = client.write_all(text.as_bytes());
    let _ = client.flush();
    text.len() as u64
}

/// Reads a head (up to `max` bytes) from `from`: `(head, bytes past it)`.
fn read_head(from: &mut impl Read, mut buf: Vec<u8>, max: usize) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = request::head_end(&buf) {
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        if buf.len() > max {
            return Err(io::Error::other(format!("a head over {max} bytes")));
        }
        let n = from.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the head ended early",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `host` or `host:port` when the port is not the scheme's.
fn authority(scheme: &str, host: &str, port: u16) -> String {
    let h = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    match (scheme, port) {
        ("http", 80) | ("https", 443) => h,
        _ => format!("{h}:{port}"),
    }
}

/// An intercepted `CONNECT host:443`: TLS with the client as `host`, then one request.
pub(super) fn intercept(inside: TcpStream, rest: Vec<u8>, host: &str, port: u16, active: &Active) {
    let shared = &*active.shared;
    let Some(i) = shared.policy.intercept.clone() else {
        return;
    };
    let limits = shared.policy.limits;
    let config = match i.authority.server_config(host) {
        Ok(c) => c,
        Err(why) => {
            super::answer(&inside, 502, &why, true);
            return record(
                shared,
                host,
                port,
                None,
                Answered::failed(Outcome::ProxyError, 502, why, 0),
            );
        }
    };
    if (&inside)
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let _ = inside.set_read_timeout(Some(limits.head));
    let _ = inside.set_write_timeout(Some(limits.idle));
    let Ok(mut conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    if !rest.is_empty() {
        let _ = conn.read_tls(&mut &rest[..]);
    }
    let mut tls = rustls::StreamOwned::new(conn, inside);
    while tls.conn.is_handshaking() {
        if tls.conn.complete_io(&mut tls.sock).is_err() {
            // The client did not trust the worker's CA, or left: nothing was asked.
            let why = format!(
                "the client's TLS handshake for {host} failed (does it trust the worker's CA?)"
            );
            return record(
                shared,
                host,
                port,
                None,
                Answered::failed(Outcome::ClientError, 502, why, 0),
            );
        }
    }
    if let Some(sni) = tls.conn.server_name() {
        if !sni.eq_ignore_ascii_case(host) {
            let why = format!("the TLS name {sni} is not the CONNECT host {host}");
            let down = fail_on(&mut tls, 421, &why);
            return record(
                shared,
                host,
                port,
                None,
                Answered::failed(Outcome::Denied, 421, why, down),
            );
        }
    }
    let (head, body_start) = match read_head(&mut tls, Vec::new(), request::MAX_HEAD) {
        Ok(h) => h,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return,
        Err(e) => {
            let why = format!("cannot read the request: {e}");
            let down = fail_on(&mut tls, 400, &why);
            return record(
                shared,
                host,
                port,
                None,
                Answered::failed(Outcome::ClientError, 400, why, down),
            );
        }
    };
    let _ = tls.sock.set_read_timeout(Some(limits.idle));
    let req = match parse_request(&head) {
        Ok(r) => r,
        Err(HeadError { status, reason }) => {
            let down = fail_on(&mut tls, status, &reason);
            return record(
                shared,
                host,
                port,
                None,
                Answered::failed(Outcome::ClientError, status, reason, down),
            );
        }
    };
    let url = CacheRequest {
        method: &req.method,
        scheme: "https",
        host,
        port,
        target: &req.target,
        headers: &[],
    }
    .url();
    let named = (req.method.as_str(), akbench_core::limits::elide(&url));
    // The Host header names the host the phase's network decided on, or none.
    if let Some(h) = req.header("host") {
        let (name, _) = h
            .rsplit_once(':')
            .filter(|(_, p)| p.parse::<u16>().is_ok())
            .unwrap_or((h, ""));
        if !name.trim_end_matches('.').eq_ignore_ascii_case(host) {
            let why = format!("the request's Host {h} is not the CONNECT host {host}");
            let down = fail_on(&mut tls, 421, &why);
            return record(
                shared,
                host,
                port,
                Some(named),
                Answered::failed(Outcome::Denied, 421, why, down),
            );
        }
    }
    let body = match read_body(&req, body_start, &mut tls) {
        Ok(b) => b,
        Err(HeadError { status, reason }) => {
            let down = fail_on(&mut tls, status, &reason);
            return record(
                shared,
                host,
                port,
                Some(named),
                Answered::failed(Outcome::ClientError, status, reason, down),
            );
        }
    };
    let a = exchange(&mut tls, &req, &body, "https", host, port, active);
    tls.conn.send_close_notify();
    let _ = tls.flush();
    let _ = tls.sock.shutdown(std::net::Shutdown::Both);
    record(shared, host, port, Some(named), a);
}

/// The request body (its announced length, at most [`MAX_BODY`]).
fn read_body(
    req: &OriginRequest,
    mut have: Vec<u8>,
    from: &mut impl Read,
) -> Result<Vec<u8>, HeadError> {
    let len = req.body_len()?;
    if len > MAX_BODY {
        return Err(HeadError {
            status: 413,
            reason: format!("a request body over {MAX_BODY} bytes"),
        });
    }
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let mut chunk = [0u8; 8192];
    while have.len() < len {
        match from.read(&mut chunk) {
            Ok(0) | Err(_) => {
                return Err(HeadError {
                    status: 400,
                    reason: "the request body ended early".into(),
                })
            }
            Ok(n) => have.extend_from_slice(&chunk[..n]),
        }
    }
    have.truncate(len);
    Ok(have)
}

/// A plain-HTTP request the cache may answer (`head`: the rewritten head, origin form):
/// answered and recorded, `true`; `false`: not cacheable, the caller forwards it as
/// before.
pub(super) fn plain(
    inside: &TcpStream,
    head: &[u8],
    rest: &[u8],
    host: &str,
    port: u16,
    active: &Active,
) -> bool {
    let shared = &*active.shared;
    if shared.policy.cache.is_none() {
        return false;
    }
    let Ok(req) = parse_request(head) else {
        return false;
    };
    let refs = req.header_refs();
    let creq = CacheRequest {
        method: &req.method,
        scheme: "http",
        host,
        port,
        target: &req.target,
        headers: &refs,
    };
    if cache::cache_key(&creq).is_err() || !rest.is_empty() {
        return false;
    }
    let named = (
        req.method.as_str(),
        akbench_core::limits::elide(&creq.url()),
    );
    let _ = inside.set_read_timeout(Some(shared.policy.limits.idle));
    let _ = inside.set_write_timeout(Some(shared.policy.limits.idle));
    let mut client = inside;
    let a = exchange(&mut client, &req, &[], "http", host, port, active);
    let _ = inside.shutdown(std::net::Shutdown::Both);
    record(shared, host, port, Some(named), a);
    true
}

/// Answers `req` on `client`: from the cache when it holds it, else from the host (and
/// stored when it may be).
fn exchange<C: Read + Write>(
    client: &mut C,
    req: &OriginRequest,
    body: &[u8],
    scheme: &str,
    host: &str,
    port: u16,
    active: &Active,
) -> Answered {
    let shared = &*active.shared;
    let refs = req.header_refs();
    let creq = CacheRequest {
        method: &req.method,
        scheme,
        host,
        port,
        target: &req.target,
        headers: &refs,
    };
    let store = shared.policy.cache.clone();
    let key = store.as_ref().map(|_| cache::cache_key(&creq));
    let _claim;
    if let (Some(store), Some(Ok(key))) = (&store, &key) {
        _claim = store.claim(key);
        if let Some(mut hit) = store.get(key) {
            let head = cached_response_head(hit.len, &hit.headers);
            let mut down = 0;
            if client.write_all(&head).is_ok() {
                down += head.len() as u64;
                down += super::store::copy_body(&mut hit, client).unwrap_or(0);
                let _ = client.flush();
            }
            return Answered {
                outcome: Outcome::Allowed,
                detail: None,
                status: Some(200),
                up: 0,
                down,
                from_cache: down,
                cache: CacheUse::Hit,
            };
        }
    }
    let tcp = match reach(shared, host, port) {
        Ok(s) => s,
        Err((status, outcome, why)) => {
            let down = fail_on(client, status, &why);
            return Answered::failed(outcome, status, why, down);
        }
    };
    hold(active, &tcp);
    let idle = shared.policy.limits.idle;
    let _ = tcp.set_read_timeout(Some(idle));
    let _ = tcp.set_write_timeout(Some(idle));
    let mut upstream: Box<dyn ReadWrite> = if scheme == "https" {
        let Some(i) = &shared.policy.intercept else {
            return Answered::failed(Outcome::ProxyError, 502, "no TLS configuration".into(), 0);
        };
        let name = match ServerName::try_from(host.to_string()) {
            Ok(n) => n,
            Err(e) => return Answered::failed(Outcome::ProxyError, 502, format!("{host}: {e}"), 0),
        };
        match rustls::ClientConnection::new(Arc::clone(&i.upstream), name) {
            Ok(c) => Box::new(rustls::StreamOwned::new(c, tcp)),
            Err(e) => {
                return Answered::failed(Outcome::ProxyError, 502, format!("TLS to {host}: {e}"), 0)
            }
        }
    } else {
        Box::new(tcp)
    };
    let up_head = req.upstream_head(&authority(scheme, host, port));
    if let Err(e) = upstream
        .write_all(&up_head)
        .and_then(|_| upstream.write_all(body))
        .and_then(|_| upstream.flush())
    {
        let why = format!("cannot send the request to {host}: {e}");
        let down = fail_on(client, 502, &why);
        return Answered::failed(Outcome::ConnectFailed, 502, why, down);
    }
    let up = (up_head.len() + body.len()) as u64;
    let (head, first) = match read_head(&mut upstream, Vec::new(), MAX_RESPONSE_HEAD) {
        Ok(h) => h,
        Err(e) => {
            let why = format!("no response from {host}: {e}");
            let down = fail_on(client, 502, &why);
            return Answered {
                up,
                ..Answered::failed(Outcome::ConnectFailed, 502, why, down)
            };
        }
    };
    let (status, headers) = match parse_response(&head) {
        Ok(r) => r,
        Err(e) => {
            let why = format!("{host} answered something else than HTTP: {}", e.reason);
            let down = fail_on(client, 502, &why);
            return Answered {
                up,
                ..Answered::failed(Outcome::ProxyError, 502, why, down)
            };
        }
    };
    let hrefs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let no_body = req.method == "HEAD" || matches!(status, 100..=199 | 204 | 304);
    let chunked = hrefs
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"));
    let length = if no_body {
        Some(0)
    } else if chunked {
        None
    } else {
        hrefs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<u64>().ok())
    };
    let mut cache_use = match &key {
        None | Some(Err(_)) => CacheUse::Bypass,
        Some(Ok(_)) => CacheUse::Miss,
    };
    let mut writer = match (&store, &key) {
        (Some(store), Some(Ok(key))) if !no_body => match cache::storable(status, &hrefs) {
            Ok(len) => {
                let kept = headers
                    .iter()
                    .filter(|(n, _)| KEPT_HEADERS.iter().any(|k| n.eq_ignore_ascii_case(k)))
                    .cloned()
                    .collect();
                store.writer(key, len, kept).ok()
            }
            Err(_) => None,
        },
        _ => None,
    };
    let mut down = 0u64;
    if client.write_all(&head).is_err() {
        return Answered {
            up,
            ..Answered::failed(Outcome::Allowed, status, String::new(), 0)
        };
    }
    down += head.len() as u64;
    let mut body_seen = 0u64;
    let mut pending = first;
    let mut buf = vec![0u8; 64 * 1024];
    let mut client_gone = false;
    loop {
        if let Some(l) = length {
            let left = l.saturating_sub(body_seen);
            let keep = usize::try_from(left)
                .unwrap_or(usize::MAX)
                .min(pending.len());
            pending.truncate(keep);
        }
        if !pending.is_empty() {
            body_seen += pending.len() as u64;
            if let Some(w) = &mut writer {
                if w.write(&pending).is_err() {
                    writer = None;
                }
            }
            if !client_gone {
                if client.write_all(&pending).is_err() {
                    client_gone = true;
                    // A stored body needs the rest; a passed-through one does not.
                    if writer.is_none() {
                        break;
                    }
                } else {
                    down += pending.len() as u64;
                }
            }
        }
        if length.is_some_and(|l| body_seen >= l) {
            break;
        }
        match upstream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => pending = buf[..n].to_vec(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => pending.clear(),
            // A TLS peer that closes without close_notify ends the body as EOF does.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(_) => break,
        }
    }
    let _ = client.flush();
    if let Some(w) = writer {
        if w.finish().is_ok() {
            cache_use = CacheUse::Stored;
        }
    }
    Answered {
        outcome: Outcome::Allowed,
        detail: None,
        status: Some(status),
        up,
        down,
        from_cache: 0,
        cache: cache_use,
    }
}

/// A stream both ways (a TCP socket, or TLS over one).
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}
