//! The egress proxy's reading of a client's request head, and the addresses it never
//! connects to. Pure: [`parse_head`] turns the bytes up to the blank line into a
//! [`Request`] (a `CONNECT host:port` tunnel, or a plain `http://` request rewritten to
//! origin form with `Connection: close`); [`address_refusal`] says why a resolved address is
//! out of reach.

use std::net::IpAddr;

/// Largest request head the proxy reads (request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;

/// What the client asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel (HTTPS, not intercepted).
    Connect {
        /// Host, lower case (an IPv6 literal without brackets).
        host: String,
        /// Port.
        port: u16,
    },
    /// A plain-HTTP request with an absolute `http://` URI.
    Forward {
        /// Host.
        host: String,
        /// Port (80 unless given).
        port: u16,
        /// The head to send upstream: origin-form request line, the client's headers
        /// without the proxy's own (`Proxy-*`, `Connection`, `Keep-Alive`), a `Host` header,
        /// `Connection: close`, and the blank line; the `Host` header is the URI's own.
        head: Vec<u8>,
    },
}

/// A head the proxy answers with an error status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {reason}")]
pub struct HeadError {
    /// The HTTP status to answer (400, 501).
    pub status: u16,
    /// Why, in words (sent to the client and recorded).
    pub reason: String,
}

fn bad(reason: impl Into<String>) -> HeadError {
    HeadError {
        status: 400,
        reason: reason.into(),
    }
}

/// Where the head ends (the index just past `\r\n\r\n`), if it has.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// A request line's method, target and version (`METHOD TARGET HTTP/1.x`), checked; the one reading
/// of a request line (the proxy's heads here, origin-form ones in [`super::http`]).
pub(super) fn request_line(line: &str) -> Result<(&str, &str, &str), HeadError> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(format!(
            "`{}` is not an HTTP request line",
            crate::limits::elide(line)
        )));
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(bad(format!(
            "unsupported version `{}`",
            crate::limits::elide(version)
        )));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(bad(format!(
            "`{}` is not a method",
            crate::limits::elide(method)
        )));
    }
    Ok((method, target, version))
}

/// Parses a complete head (`buf` up to and including the blank line).
pub fn parse_head(buf: &[u8]) -> Result<Request, HeadError> {
    let text = std::str::from_utf8(buf).map_err(|_| bad("the request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let (method, target, version) = request_line(lines.next().unwrap_or_default())?;
    if method == "CONNECT" {
        let (host, port) = authority(target, None)?;
        return Ok(Request::Connect { host, port });
    }
    let Some(rest) = strip_prefix_ci(target, "http://") else {
        return Err(HeadError {
            status: 501,
            reason: format!(
                "only CONNECT and absolute http:// URIs are proxied, not `{}`",
                crate::limits::elide(target)
            ),
        });
    };
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let (host, port) = authority(auth, Some(80))?;
    // The Host header is always the URI's: a client's own (another name served by the same
    // server, a CDN) would reach a host the phase's network did not decide on.
    let mut head = format!("{method} {path} {version}\r\nHost: {auth}\r\n");
    for h in lines.take_while(|l| !l.is_empty()) {
        let Some((name, _)) = h.split_once(':') else {
            return Err(bad(format!(
                "`{}` is not a header",
                crate::limits::elide(h)
            )));
        };
        let name = name.trim().to_ascii_lowercase();
        if name.starts_with("proxy-")
            || name == "connection"
            || name == "keep-alive"
            || name == "host"
        {
            continue;
        }
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("Connection: close\r\n\r\n");
    Ok(Request::Forward {
        host,
        port,
        head: head.into_bytes(),
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// `host:port` (`[v6]:port`); `default` when the port may be left out.
fn authority(a: &str, default: Option<u16>) -> Result<(String, u16), HeadError> {
    let named = || crate::limits::elide(a);
    if a.contains('@') {
        return Err(bad(format!(
            "`{}`: credentials in the URI are not proxied",
            named()
        )));
    }
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| bad(format!("`{}`: unclosed `[`", named())))?;
        (h, after.strip_prefix(':'))
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad(format!("`{}`: bad port", named())))?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad(format!("`{}`: CONNECT needs host:port", named()))),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let ok_name = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    if !ok_name && host.parse::<IpAddr>().is_err() {
        return Err(bad(format!("`{}`: not a host name or IP address", named())));
    }
    Ok((host, port))
}

/// The status of an HTTP response from its first bytes (`HTTP/1.1 200 ...`), once at least
/// 12 bytes arrived; `None` when they are not a status line.
pub fn response_status(prefix: &[u8]) -> Option<u16> {
    let rest = prefix.strip_prefix(b"HTTP/")?;
    let sp = rest.iter().position(|b| *b == b' ')?;
    let code = rest.get(sp + 1..sp + 4)?;
    if !code.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(code).ok()?.parse().ok()
}

/// Why the proxy never connects to `addr`, whatever the phase's network says: the worker's
/// own loopback (PostgreSQL, the coordinator), unspecified, link-local (cloud metadata at
/// 169.254.169.254), multicast and broadcast; and private ranges (10/8, 172.16/12,
/// 192.168/16, 100.64/10, fc00::/7) unless the worker opened them (`open_ranges`, the
/// operator's setting). `None`: reachable.
pub fn address_refusal(addr: IpAddr, open_ranges: &[super::AllowedHost]) -> Option<&'static str> {
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    };
    let opened = || open_ranges.iter().any(|r| r.matches(&addr.to_string()));
    match addr {
        IpAddr::V4(a) => {
            let o = a.octets();
            if a.is_loopback() {
                Some("the worker's own loopback")
            } else if a.is_unspecified() || o[0] == 0 {
                Some("an unspecified address")
            } else if a.is_link_local() {
                Some("a link-local address (cloud metadata)")
            } else if a.is_multicast() || a.is_broadcast() || o[0] >= 240 {
                Some("a multicast, broadcast or reserved address")
            } else if (a.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64)) && !opened() {
                Some("a private network the worker did not open (egress open_ranges)")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            if a.is_loopback() {
                Some("the worker's own loopback")
            } else if a.is_unspecified() {
                Some("an unspecified address")
            } else if (s[0] & 0xffc0) == 0xfe80 {
                Some("a link-local address")
            } else if a.is_multicast() {
                Some("a multicast address")
            } else if (s[0] & 0xfe00) == 0xfc00 && !opened() {
                Some("a private network the worker did not open (egress open_ranges)")
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fwd(head: &str) -> (String, u16, String) {
        match parse_head(head.as_bytes()).unwrap() {
            Request::Forward { host, port, head } => (host, port, String::from_utf8(head).unwrap()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn heads_parse_into_tunnels_and_forwards() {
        assert_eq!(
            parse_head(b"CONNECT Example.COM.:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
            Ok(Request::Connect {
                host: "example.com".into(),
                port: 443
            })
        );
        assert_eq!(
            parse_head(b"CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n"),
            Ok(Request::Connect {
                host: "2001:db8::1".into(),
                port: 8443
            })
        );
        let (h, p, head) = fwd(
            "GET http://deb.debian.org/debian/dists/x?y=1 HTTP/1.1\r\nHost: elsewhere.example\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic x\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        );
        assert_eq!((h.as_str(), p), ("deb.debian.org", 80));
        assert_eq!(
            head,
            "GET /debian/dists/x?y=1 HTTP/1.1\r\nHost: deb.debian.org\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let (h, p, head) = fwd("HEAD http://10.0.0.1:8080?q HTTP/1.0\r\n\r\n");
        assert_eq!((h.as_str(), p), ("10.0.0.1", 8080));
        assert_eq!(
            head,
            "HEAD /?q HTTP/1.0\r\nHost: 10.0.0.1:8080\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn bad_heads_get_an_error_status_naming_the_input() {
        let cases: &[(&[u8], u16, &str)] = &[
            (b"GET / HTTP/1.1\r\n\r\n", 501, "only CONNECT"),
            (
                b"GET https://x.example/ HTTP/1.1\r\n\r\n",
                501,
                "https://x.example/",
            ),
            (
                b"CONNECT example.com HTTP/1.1\r\n\r\n",
                400,
                "needs host:port",
            ),
            (b"CONNECT example.com:0 HTTP/1.1\r\n\r\n", 400, "bad port"),
            (
                b"CONNECT example.com:99999 HTTP/1.1\r\n\r\n",
                400,
                "bad port",
            ),
            (
                b"CONNECT a b:1 HTTP/1.1\r\n\r\n",
                400,
                "not an HTTP request line",
            ),
            (b"CONNECT ex ample:1 HTTP/1.1\r\n\r\n", 400, "request line"),
            (b"CONNECT a/b:1 HTTP/1.1\r\n\r\n", 400, "not a host name"),
            (b"CONNECT [::1:1 HTTP/1.1\r\n\r\n", 400, "unclosed"),
            (
                b"GET http://u:p@x.example/ HTTP/1.1\r\n\r\n",
                400,
                "credentials",
            ),
            (b"GET http://x.example/ HTTP/2\r\n\r\n", 400, "version"),
            (
                b"get http://x.example/ HTTP/1.1\r\n\r\n",
                400,
                "not a method",
            ),
            (
                b"GET http://x.example/ HTTP/1.1\r\nnocolon\r\n\r\n",
                400,
                "not a header",
            ),
            (b"\xff\xfe\r\n\r\n", 400, "UTF-8"),
            (b"\r\n\r\n", 400, "request line"),
        ];
        for (head, status, text) in cases {
            let e = parse_head(head).unwrap_err();
            assert_eq!(
                e.status,
                *status,
                "{:?}: {e}",
                String::from_utf8_lossy(head)
            );
            assert!(e.reason.contains(text), "{e} should contain {text}");
        }
        assert_eq!(head_end(b"GET x HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(head_end(b"GET x HTTP/1.1\r\n"), None);
    }

    #[test]
    fn response_statuses_are_read_from_the_status_line() {
        let cases: &[(&[u8], Option<u16>)] = &[
            (b"HTTP/1.1 200 OK\r\n", Some(200)),
            (b"HTTP/1.0 503 Service Unavailable", Some(503)),
            (b"HTTP/1.1 404", Some(404)),
            (b"HTTP/1.1 20", None),
            (b"HTTP/1.1 2x0 OK", None),
            (b"SSH-2.0-OpenSSH", None),
            (b"", None),
        ];
        for (bytes, want) in cases {
            assert_eq!(
                response_status(bytes),
                *want,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn the_workers_own_networks_are_out_of_reach() {
        let open = [super::super::AllowedHost::parse("10.214.0.0/16").unwrap()];
        let cases: &[(&str, bool, bool)] = &[
            // (address, reachable with nothing opened, reachable with 10.214/16 opened)
            ("93.184.216.34", true, true),
            ("2606:2800:220:1::1", true, true),
            ("127.0.0.1", false, false),
            ("127.1.2.3", false, false),
            ("::1", false, false),
            ("::ffff:127.0.0.1", false, false),
            ("0.0.0.0", false, false),
            ("::", false, false),
            ("169.254.169.254", false, false),
            ("fe80::1", false, false),
            ("224.0.0.1", false, false),
            ("255.255.255.255", false, false),
            ("10.214.3.2", false, true),
            ("::ffff:10.214.3.2", false, true),
            ("10.1.0.1", false, false),
            ("192.168.1.1", false, false),
            ("172.16.0.1", false, false),
            ("100.64.0.1", false, false),
            ("fd00::1", false, false),
        ];
        for (a, closed, opened) in cases {
            let ip: IpAddr = a.parse().unwrap();
            assert_eq!(address_refusal(ip, &[]).is_none(), *closed, "{a}");
            assert_eq!(address_refusal(ip, &open).is_none(), *opened, "{a} opened");
        }
    }
}
