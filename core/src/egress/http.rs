//! HTTP/1.1 heads as the egress proxy reads them when it answers a request itself (an
//! intercepted HTTPS request, or a cacheable plain one). Pure: [`parse_request`] reads an
//! origin-form request head (`GET /path HTTP/1.1`), [`OriginRequest::upstream_head`] writes
//! the head sent to the host (its `Host` the name the phase's network decided on, the
//! proxy's own headers removed, `Connection: close`), [`parse_response`] reads a response
//! head, [`cached_response_head`] writes the head of an answer from the cache.

use super::request::HeadError;

/// A request head in origin form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginRequest {
    /// Method.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: String,
    /// Headers, as sent (name, value trimmed).
    pub headers: Vec<(String, String)>,
}

fn bad(reason: impl Into<String>) -> HeadError {
    HeadError {
        status: 400,
        reason: reason.into(),
    }
}

fn lines(buf: &[u8]) -> Result<std::str::Split<'_, &'static str>, HeadError> {
    let text = std::str::from_utf8(buf).map_err(|_| bad("the head is not UTF-8"))?;
    Ok(text.split("\r\n"))
}

fn headers<'a>(rest: impl Iterator<Item = &'a str>) -> Result<Vec<(String, String)>, HeadError> {
    let mut out = Vec::new();
    for h in rest.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = h.split_once(':') else {
            return Err(bad(format!(
                "`{}` is not a header",
                crate::limits::elide(h)
            )));
        };
        out.push((name.trim().to_string(), value.trim().to_string()));
    }
    Ok(out)
}

/// Parses a complete origin-form request head (up to and including the blank line).
pub fn parse_request(buf: &[u8]) -> Result<OriginRequest, HeadError> {
    let mut l = lines(buf)?;
    let (method, target, version) = super::request::request_line(l.next().unwrap_or_default())?;
    if !target.starts_with('/') {
        return Err(bad(format!(
            "`{}` is not an origin-form target",
            crate::limits::elide(target)
        )));
    }
    Ok(OriginRequest {
        method: method.into(),
        target: target.into(),
        version: version.into(),
        headers: headers(l)?,
    })
}

impl OriginRequest {
    /// The value of header `name` (the first).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The headers as `(name, value)` slices.
    pub fn header_refs(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect()
    }

    /// The request body's length: `Ok(0)` without one; an error for a chunked body or an
    /// upgrade (not proxied when the proxy answers the request itself).
    pub fn body_len(&self) -> Result<u64, HeadError> {
        if self.header("transfer-encoding").is_some() || self.header("upgrade").is_some() {
            return Err(HeadError {
                status: 501,
                reason: "chunked request bodies and protocol upgrades are not proxied over intercepted HTTPS".into(),
            });
        }
        match self.header("content-length") {
            None => Ok(0),
            Some(v) => v
                .parse()
                .map_err(|_| bad(format!("`{}`: bad Content-Length", crate::limits::elide(v)))),
        }
    }

    /// The head sent to the host: the request line, `Host: authority`, the client's
    /// headers without the proxy's own (`Proxy-*`, `Connection`, `Keep-Alive`, `Host`,
    /// `TE`, `Upgrade`), `Connection: close`.
    pub fn upstream_head(&self, authority: &str) -> Vec<u8> {
        let mut head = format!(
            "{} {} {}\r\nHost: {authority}\r\n",
            self.method, self.target, self.version
        );
        for (n, v) in &self.headers {
            let l = n.to_ascii_lowercase();
            if l.starts_with("proxy-")
                || matches!(
                    l.as_str(),
                    "connection" | "keep-alive" | "host" | "te" | "upgrade"
                )
            {
                continue;
            }
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        head.into_bytes()
    }
}

/// A response head: status and headers.
pub fn parse_response(buf: &[u8]) -> Result<(u16, Vec<(String, String)>), HeadError> {
    let mut l = lines(buf)?;
    let line = l.next().unwrap_or_default();
    let status = super::request::response_status(line.as_bytes()).ok_or_else(|| {
        bad(format!(
            "`{}` is not a status line",
            crate::limits::elide(line)
        ))
    })?;
    Ok((status, headers(l)?))
}

/// The head of an answer from the cache: 200, the body's length, the kept headers,
/// `Connection: close` and `X-Akbench-Cache: hit`.
pub fn cached_response_head(len: u64, kept: &[(String, String)]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n");
    for (n, v) in kept {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("Connection: close\r\nX-Akbench-Cache: hit\r\n\r\n");
    head.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_requests_are_read_and_rewritten_for_the_host() {
        let r = parse_request(
            b"GET /packages/x.whl HTTP/1.1\r\nHost: evil.example\r\nUser-Agent: uv/0.9.7\r\nProxy-Authorization: x\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.target.as_str()),
            ("GET", "/packages/x.whl")
        );
        assert_eq!(r.header("user-agent"), Some("uv/0.9.7"));
        assert_eq!(r.body_len().unwrap(), 0);
        let up = String::from_utf8(r.upstream_head("files.pythonhosted.org")).unwrap();
        assert_eq!(
            up,
            "GET /packages/x.whl HTTP/1.1\r\nHost: files.pythonhosted.org\r\nUser-Agent: uv/0.9.7\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let cases: &[(&[u8], u16, &str)] = &[
            (
                b"GET http://x/ HTTP/1.1\r\n\r\n",
                400,
                "not an origin-form target",
            ),
            (b"GET / HTTP/2\r\n\r\n", 400, "unsupported version"),
            (b"get / HTTP/1.1\r\n\r\n", 400, "not a method"),
            (b"GET / HTTP/1.1\r\nnocolon\r\n\r\n", 400, "not a header"),
            (b"\xff\r\n\r\n", 400, "not UTF-8"),
        ];
        for (head, status, why) in cases {
            let e = parse_request(head).unwrap_err();
            assert!(e.status == *status && e.reason.contains(why), "{e:?}");
        }
        let chunked =
            parse_request(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        assert_eq!(chunked.body_len().unwrap_err().status, 501);
        let sized = parse_request(b"POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n").unwrap();
        assert_eq!(sized.body_len().unwrap(), 12);
    }

    #[test]
    fn responses_are_read_and_cached_answers_written() {
        let (s, h) =
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"a\"\r\n\r\n").unwrap();
        assert_eq!(s, 200);
        assert_eq!(h[1], ("ETag".to_string(), "\"a\"".to_string()));
        assert!(parse_response(b"garbage\r\n\r\n").is_err());
        let head = cached_response_head(5, &[("content-type".into(), "application/x".into())]);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-type: application/x\r\nConnection: close\r\nX-Akbench-Cache: hit\r\n\r\n"
        );
    }
}
