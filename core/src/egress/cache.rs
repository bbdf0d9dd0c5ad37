//! What the egress proxy's cache may keep and serve again. Pure: [`cache_key`] says whether
//! a request may be answered from (or stored in) the cache, and under which key;
//! [`storable`] whether its response may be stored. Only what is immutable by its URL is
//! cached: Debian `pool/` archives (never the `dists/` indexes), PyPI's
//! `files.pythonhosted.org/packages/...`, versioned GitHub release downloads (and the
//! release-asset URLs they redirect to, keyed without their expiring signature),
//! `astral.sh/uv/<version>/...`, and URLs that carry a sha256 digest. Never: another method
//! than GET, a request with credentials or cookies, a range request, `no-store`, a
//! `private` response, one setting a cookie, one in a content encoding, anything but 200.

/// Why a request or response is not cached (the record's words).
pub type Refusal = &'static str;

/// A request as the cache sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheRequest<'a> {
    /// The method, as sent.
    pub method: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The host, lower case.
    pub host: &'a str,
    /// The port.
    pub port: u16,
    /// The path and query (origin form: `/pool/main/c/curl/curl_7.88.deb`).
    pub target: &'a str,
    /// The request's headers (name, value).
    pub headers: &'a [(&'a str, &'a str)],
}

impl CacheRequest<'_> {
    /// `scheme://host[:port]target`, the port left out when it is the scheme's default.
    pub fn url(&self) -> String {
        let default = matches!((self.scheme, self.port), ("http", 80) | ("https", 443));
        if default {
            format!("{}://{}{}", self.scheme, self.host, self.target)
        } else {
            format!(
                "{}://{}:{}{}",
                self.scheme, self.host, self.port, self.target
            )
        }
    }
}

fn header<'a>(headers: &'a [(&'a str, &'a str)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

fn has_directive(headers: &[(&str, &str)], name: &str, directive: &str) -> bool {
    headers
        .iter()
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(','))
        .any(|d| {
            d.trim()
                .split('=')
                .next()
                .is_some_and(|d| d.trim().eq_ignore_ascii_case(directive))
        })
}

/// The cache key of `req` (its URL; a GitHub release asset's without the expiring query),
/// or why it is not cached.
pub fn cache_key(req: &CacheRequest<'_>) -> Result<String, Refusal> {
    if req.method != "GET" {
        return Err("not a GET");
    }
    for h in ["authorization", "cookie", "proxy-authorization"] {
        if header(req.headers, h).is_some() {
            return Err("a request with credentials");
        }
    }
    if header(req.headers, "range").is_some() {
        return Err("a range request");
    }
    if has_directive(req.headers, "cache-control", "no-store") {
        return Err("the request says no-store");
    }
    let (path, query) = match req.target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (req.target, None),
    };
    if path.split('/').any(|s| s == ".." || s == ".") {
        return Err("a path with dot segments");
    }
    match immutable(req.host, path, query) {
        Some(Keyed::Url) => Ok(req.url()),
        Some(Keyed::WithoutQuery) => Ok(CacheRequest {
            target: path,
            ..*req
        }
        .url()),
        None => Err("not immutable by its URL"),
    }
}

/// How an immutable URL is keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyed {
    /// By the whole URL.
    Url,
    /// By the URL without its query (a signed, expiring URL to a fixed object).
    WithoutQuery,
}

/// Whether `host` + `path` names content that never changes.
fn immutable(host: &str, path: &str, query: Option<&str>) -> Option<Keyed> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let last = segs.last().copied().unwrap_or_default();
    // Debian (and Ubuntu) archives: `.../pool/<component>/<x>/<package>/<file>.deb`; a
    // pool file's name carries its version and never changes. The `dists/` indexes do.
    let debian = segs.contains(&"pool")
        && !segs.contains(&"dists")
        && [".deb", ".udeb"].iter().any(|e| last.ends_with(e))
        && query.is_none();
    // PyPI's files (wheels, sdists, their PEP 658 metadata): paths made of their digest.
    let pypi = host == "files.pythonhosted.org" && segs.first() == Some(&"packages");
    // `github.com/OWNER/REPO/releases/download/TAG/FILE` with a tag (not `latest`).
    let github = host == "github.com"
        && segs.len() == 6
        && segs[2] == "releases"
        && segs[3] == "download"
        && segs[4] != "latest";
    // `astral.sh/uv/0.9.7/install.sh`: a version, not `latest` or an unversioned script.
    let astral = host == "astral.sh"
        && segs.len() >= 3
        && segs[1].chars().next().is_some_and(|c| c.is_ascii_digit())
        && segs[1]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.');
    let digest = segs.iter().any(|s| carries_sha256(s)) || query.is_some_and(carries_sha256);
    if debian || pypi || github || astral || digest {
        return Some(Keyed::Url);
    }
    // Where a GitHub release download redirects: a fixed asset behind an expiring signature.
    let asset = matches!(
        host,
        "objects.githubusercontent.com" | "release-assets.githubusercontent.com"
    ) && segs
        .first()
        .is_some_and(|s| s.starts_with("github-production-release-asset"));
    asset.then_some(Keyed::WithoutQuery)
}

/// Whether `s` holds a sha256 digest: 64 hex digits alone, or after `sha256` and one of
/// `:`, `=`, `-`, `_`.
fn carries_sha256(s: &str) -> bool {
    let hex64 = |t: &str| t.len() >= 64 && t.as_bytes()[..64].iter().all(u8::is_ascii_hexdigit);
    if s.len() == 64 && hex64(s) {
        return true;
    }
    let lower = s.to_ascii_lowercase();
    lower.match_indices("sha256").any(|(i, _)| {
        let rest = &lower[i + 6..];
        rest.starts_with([':', '=', '-', '_']) && hex64(&rest[1..])
    })
}

/// Whether a response to a cacheable request may be stored: 200, no `no-store` or
/// `private`, no cookie set, no content encoding, its length known (`Content-Length`).
pub fn storable(status: u16, headers: &[(&str, &str)]) -> Result<u64, Refusal> {
    if status != 200 {
        return Err("not a 200 response");
    }
    if has_directive(headers, "cache-control", "no-store") {
        return Err("the response says no-store");
    }
    if has_directive(headers, "cache-control", "private") {
        return Err("a private response");
    }
    if header(headers, "set-cookie").is_some() {
        return Err("a response setting a cookie");
    }
    if header(headers, "content-encoding").is_some_and(|e| !e.eq_ignore_ascii_case("identity")) {
        return Err("a response in a content encoding");
    }
    if header(headers, "transfer-encoding").is_some() {
        return Err("a response of unknown length");
    }
    header(headers, "content-length")
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or("a response of unknown length")
}

/// The response headers kept with a stored body (replayed on a hit; the length is the
/// stored body's own).
pub const KEPT_HEADERS: &[&str] = &["content-type", "etag", "last-modified"];

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(
        method: &'a str,
        url: &'a str,
        headers: &'a [(&'a str, &'a str)],
    ) -> CacheRequest<'a> {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (auth, target) = rest.split_at(rest.find('/').unwrap());
        let (host, port) = match auth.split_once(':') {
            Some((h, p)) => (h, p.parse().unwrap()),
            None => (auth, if scheme == "https" { 443 } else { 80 }),
        };
        CacheRequest {
            method,
            scheme,
            host,
            port,
            target,
            headers,
        }
    }

    /// `(method, url, request headers, key or refusal)`.
    type KeyCase<'a> = (
        &'a str,
        &'a str,
        Vec<(&'a str, &'a str)>,
        Result<&'a str, &'a str>,
    );
    /// `(status, response headers, length or refusal)`.
    type StoreCase<'a> = (u16, &'a [(&'a str, &'a str)], Result<u64, &'a str>);

    #[test]
    fn only_what_is_immutable_by_its_url_is_cached() {
        let sha = "a".repeat(64);
        let digest_url = format!("https://example.com/blobs/sha256:{sha}");
        let hex_url = format!("http://mirror.internal/x/{sha}");
        let query_url = format!("https://example.com/get?sha256={sha}");
        let cases: Vec<KeyCase> = vec![
            ("GET", "http://deb.debian.org/debian/pool/main/c/curl/curl_7.88.1-10+deb12u8_amd64.deb", vec![], Ok("http://deb.debian.org/debian/pool/main/c/curl/curl_7.88.1-10+deb12u8_amd64.deb")),
            ("GET", "http://security.debian.org/debian-security/pool/updates/main/o/openssl/libssl3_3.0.15-1~deb12u1_amd64.deb", vec![], Ok("http://security.debian.org/debian-security/pool/updates/main/o/openssl/libssl3_3.0.15-1~deb12u1_amd64.deb")),
            ("GET", "http://deb.debian.org/debian/dists/bookworm/InRelease", vec![], Err("not immutable by its URL")),
            ("GET", "http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/Packages.xz", vec![], Err("not immutable by its URL")),
            ("GET", "http://deb.debian.org/debian/pool/main/c/curl/", vec![], Err("not immutable by its URL")),
            ("GET", "https://files.pythonhosted.org/packages/29/8a/pytest-8.4.1-py3-none-any.whl", vec![], Ok("https://files.pythonhosted.org/packages/29/8a/pytest-8.4.1-py3-none-any.whl")),
            ("GET", "https://files.pythonhosted.org/packages/29/8a/pytest-8.4.1-py3-none-any.whl.metadata", vec![], Ok("https://files.pythonhosted.org/packages/29/8a/pytest-8.4.1-py3-none-any.whl.metadata")),
            ("GET", "https://pypi.org/simple/pytest/", vec![], Err("not immutable by its URL")),
            ("GET", "https://github.com/astral-sh/uv/releases/download/0.9.7/uv-x86_64-unknown-linux-gnu.tar.gz", vec![], Ok("https://github.com/astral-sh/uv/releases/download/0.9.7/uv-x86_64-unknown-linux-gnu.tar.gz")),
            ("GET", "https://github.com/astral-sh/uv/releases/latest/download/uv-x86_64-unknown-linux-gnu.tar.gz", vec![], Err("not immutable by its URL")),
            ("GET", "https://github.com/astral-sh/uv/archive/refs/heads/main.tar.gz", vec![], Err("not immutable by its URL")),
            ("GET", "https://release-assets.githubusercontent.com/github-production-release-asset/1/abc-def?sp=r&sig=XYZ&se=2026", vec![], Ok("https://release-assets.githubusercontent.com/github-production-release-asset/1/abc-def")),
            ("GET", "https://astral.sh/uv/0.9.7/install.sh", vec![], Ok("https://astral.sh/uv/0.9.7/install.sh")),
            ("GET", "https://astral.sh/uv/install.sh", vec![], Err("not immutable by its URL")),
            ("GET", "https://astral.sh/uv/latest/install.sh", vec![], Err("not immutable by its URL")),
            ("GET", &digest_url, vec![], Ok(&digest_url)),
            ("GET", &hex_url, vec![], Ok(&hex_url)),
            ("GET", &query_url, vec![], Ok(&query_url)),
            ("GET", "https://example.com/sha256-short-abc", vec![], Err("not immutable by its URL")),
            ("GET", "https://deb.example:8443/pool/main/x_1_amd64.deb", vec![], Ok("https://deb.example:8443/pool/main/x_1_amd64.deb")),
            // Never, whatever the URL.
            ("HEAD", "https://astral.sh/uv/0.9.7/install.sh", vec![], Err("not a GET")),
            ("POST", "https://files.pythonhosted.org/packages/x.whl", vec![], Err("not a GET")),
            ("GET", "https://files.pythonhosted.org/packages/x.whl", vec![("Authorization", "Basic eDp5")], Err("a request with credentials")),
            ("GET", "https://files.pythonhosted.org/packages/x.whl", vec![("cookie", "a=b")], Err("a request with credentials")),
            ("GET", "https://files.pythonhosted.org/packages/x.whl", vec![("Range", "bytes=0-10")], Err("a range request")),
            ("GET", "https://files.pythonhosted.org/packages/x.whl", vec![("Cache-Control", "max-age=0, no-store")], Err("the request says no-store")),
            ("GET", "https://files.pythonhosted.org/packages/x.whl", vec![("Cache-Control", "no-cache")], Ok("https://files.pythonhosted.org/packages/x.whl")),
            ("GET", "https://files.pythonhosted.org/packages/../simple/x", vec![], Err("a path with dot segments")),
        ];
        for (method, url, headers, want) in &cases {
            let got = cache_key(&req(method, url, headers));
            assert_eq!(
                got.as_deref(),
                want.as_deref(),
                "{method} {url} {headers:?}"
            );
        }
    }

    #[test]
    fn only_plain_complete_200_responses_are_stored() {
        let cases: &[StoreCase] = &[
            (200, &[("Content-Length", "12")], Ok(12)),
            (
                200,
                &[
                    ("content-length", " 7 "),
                    ("Cache-Control", "public, max-age=31536000, immutable"),
                ],
                Ok(7),
            ),
            (
                200,
                &[("Content-Encoding", "identity"), ("Content-Length", "3")],
                Ok(3),
            ),
            (206, &[("Content-Length", "12")], Err("not a 200 response")),
            (
                302,
                &[("Location", "https://x/")],
                Err("not a 200 response"),
            ),
            (404, &[("Content-Length", "0")], Err("not a 200 response")),
            (
                200,
                &[("Cache-Control", "no-store"), ("Content-Length", "1")],
                Err("the response says no-store"),
            ),
            (
                200,
                &[
                    ("Cache-Control", "private, max-age=60"),
                    ("Content-Length", "1"),
                ],
                Err("a private response"),
            ),
            (
                200,
                &[("Set-Cookie", "s=1"), ("Content-Length", "1")],
                Err("a response setting a cookie"),
            ),
            (
                200,
                &[("Content-Encoding", "gzip"), ("Content-Length", "1")],
                Err("a response in a content encoding"),
            ),
            (
                200,
                &[("Transfer-Encoding", "chunked")],
                Err("a response of unknown length"),
            ),
            (200, &[], Err("a response of unknown length")),
            (
                200,
                &[("Content-Length", "x")],
                Err("a response of unknown length"),
            ),
        ];
        for (status, headers, want) in cases {
            assert_eq!(storable(*status, headers), *want, "{status} {headers:?}");
        }
    }

    #[test]
    fn a_url_leaves_out_the_default_port() {
        let r = req("GET", "http://h:80/a", &[]);
        assert_eq!(r.url(), "http://h/a");
        let r = req("GET", "https://h:8443/a?b", &[]);
        assert_eq!(r.url(), "https://h:8443/a?b");
    }
}
