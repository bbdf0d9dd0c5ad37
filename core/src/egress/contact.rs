//! What a sandboxed phase contacted through the worker's egress proxy, and the fail-closed
//! rule for grading. Pure: one [`Connection`] per proxied connection, aggregated per
//! `(host, port, outcome)` into bounded [`Contact`]s ([`ContactLog`]); [`grading_fetch_failure`]
//! says when a grading run's failed fetch makes its result an infrastructure error rather
//! than a verdict.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How one proxied connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The phase's network allowed the host and the connection was made.
    Allowed,
    /// The phase's network does not allow the host, or the address is one the proxy never
    /// reaches (the worker's loopback, link-local, a private range the worker did not open).
    Denied,
    /// The host's name did not resolve (or not in time).
    DnsFailed,
    /// Every address of the host refused or was unreachable.
    ConnectFailed,
    /// The connection could not be made before the proxy's deadline.
    Timeout,
    /// The proxy refused it: more tunnels at once than allowed, or a request it cannot
    /// read (too large a head, not HTTP); or the host's side of an answered request failed
    /// (no TLS to it, not HTTP back).
    ProxyError,
    /// The program inside broke the exchange with the host named: its TLS handshake with
    /// the proxy failed (it does not trust the worker's CA, or sent something else than
    /// TLS), or the request it sent could not be read (malformed, too large, cut short).
    /// Its own doing: never the network's fault ([`Contact::failed_fetch`]).
    ClientError,
}

impl Outcome {
    /// The record's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::DnsFailed => "dns_failed",
            Self::ConnectFailed => "connect_failed",
            Self::Timeout => "timeout",
            Self::ProxyError => "proxy_error",
            Self::ClientError => "client_error",
        }
    }
}

/// One proxied connection, as the proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The host as the client asked for it (lower case; an IP literal as written).
    pub host: String,
    /// Port.
    pub port: u16,
    /// How it ended.
    pub outcome: Outcome,
    /// Bytes from the sandbox to the host (after the proxy request's head).
    pub bytes_up: u64,
    /// Bytes from the host to the sandbox.
    pub bytes_down: u64,
    /// The response's status, for a plain-HTTP request (an HTTPS tunnel's is unseen).
    pub http_status: Option<u16>,
    /// Why it failed, when it did (the resolver's or the connect's error, the rule that
    /// denied it).
    pub detail: Option<String>,
    /// Of `bytes_down`, the bytes served from the worker's cache (not from the host).
    pub bytes_from_cache: u64,
    /// The requests read in it, when the proxy read them (plain HTTP; HTTPS intercepted).
    pub requests: Vec<Exchange>,
}

/// How a request used the worker's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheUse {
    /// Not cacheable (`core::egress::cache`): fetched from the host.
    Bypass,
    /// Cacheable, not in the cache: fetched from the host, not stored (the response was
    /// not storable, or the cache could not keep it).
    Miss,
    /// Cacheable, fetched from the host and stored.
    Stored,
    /// Served from the cache: nothing fetched from the host.
    Hit,
}

/// One request the proxy read and answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    /// The method.
    pub method: String,
    /// The URL (`https://files.pythonhosted.org/packages/...`; bounded).
    pub url: String,
    /// The response's status (`None`: no response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Bytes of the response sent to the sandbox (head and body).
    pub bytes: u64,
    /// How it used the cache.
    pub cache: CacheUse,
}

/// Requests kept per contact (the first ones; later ones are counted in its bytes only).
pub const MAX_REQUESTS: usize = 64;

/// Connections to one host and port that ended the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contact {
    /// Host as the client asked for it.
    pub host: String,
    /// Port.
    pub port: u16,
    /// How they ended.
    pub outcome: Outcome,
    /// How many connections.
    pub connections: u64,
    /// Bytes sent to the host, all connections together.
    pub bytes_up: u64,
    /// Bytes received from the host.
    pub bytes_down: u64,
    /// Distinct HTTP statuses of plain-HTTP requests, ascending (at most [`MAX_STATUSES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_statuses: Vec<u16>,
    /// The first failure's cause, when they failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Of `bytes_down`, the bytes served from the worker's cache; the rest came from the
    /// host ([`Contact::upstream_bytes`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_from_cache: u64,
    /// The requests read (plain HTTP, intercepted HTTPS), at most [`MAX_REQUESTS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<Exchange>,
    /// The agent's phase reached for a host the task did not declare
    /// ([`super::declared::mark_undeclared`]); reports count such trials. Set on the agent's
    /// contacts only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undeclared: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A host's answer that says it failed, whatever was asked: a 5xx other than 501 (Not
/// Implemented: the request's method) and 505 (HTTP Version Not Supported: its version),
/// which answer the form of the request, so the program that sent it chose them.
pub fn is_server_failure(status: u16) -> bool {
    (500..600).contains(&status) && status != 501 && status != 505
}

impl Contact {
    /// Bytes that came from the host (or the cluster's parent cache): `bytes_down` less what
    /// the worker's cache served.
    pub fn upstream_bytes(&self) -> u64 {
        self.bytes_down.saturating_sub(self.bytes_from_cache)
    }

    /// Whether this is a fetch that failed on the host's side: no connection (DNS,
    /// refused, timeout, a proxy fault) or a server error of the host
    /// ([`is_server_failure`]). Not: a host the phase's network denies (the task declared
    /// that network, and retrying cannot change it), nor an exchange the program inside
    /// broke itself ([`Outcome::ClientError`]: code under test could otherwise make any
    /// vouched host "fail" on purpose).
    pub fn failed_fetch(&self) -> bool {
        match self.outcome {
            Outcome::Allowed => self.http_statuses.iter().any(|s| is_server_failure(*s)),
            Outcome::Denied | Outcome::ClientError => false,
            Outcome::DnsFailed
            | Outcome::ConnectFailed
            | Outcome::Timeout
            | Outcome::ProxyError => true,
        }
    }

    /// One sentence: `HOST:PORT (N connection(s), outcome[, HTTP 503][: detail])`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{}:{} ({} connection(s), {}",
            self.host,
            self.port,
            self.connections,
            self.outcome.as_str()
        );
        let server_errors: Vec<String> = self
            .http_statuses
            .iter()
            .filter(|s| (500..600).contains(*s))
            .map(|s| format!("HTTP {s}"))
            .collect();
        if !server_errors.is_empty() {
            s.push_str(", ");
            s.push_str(&server_errors.join(", "));
        }
        if let Some(d) = &self.detail {
            s.push_str(": ");
            s.push_str(d);
        }
        s.push(')');
        s
    }
}

/// Distinct HTTP statuses kept per contact.
pub const MAX_STATUSES: usize = 16;
/// Distinct `(host, port, outcome)` kept per phase; connections past it are only counted
/// ([`ContactLog::dropped`]).
pub const MAX_CONTACTS: usize = 512;
/// Longest `detail` kept, in characters.
const MAX_DETAIL: usize = 300;

/// Connections aggregated as they end (bounded: at most [`MAX_CONTACTS`] entries).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContactLog {
    by_key: BTreeMap<(String, u16, Outcome), Contact>,
    /// Connections not kept because the log was full.
    pub dropped: u64,
}

impl ContactLog {
    /// Adds one ended connection.
    pub fn add(&mut self, c: Connection) {
        let host = crate::limits::elide(&c.host);
        let key = (host.clone(), c.port, c.outcome);
        if !self.by_key.contains_key(&key) && self.by_key.len() >= MAX_CONTACTS {
            self.dropped += 1;
            return;
        }
        let e = self.by_key.entry(key).or_insert_with(|| Contact {
            host,
            port: c.port,
            outcome: c.outcome,
            connections: 0,
            bytes_up: 0,
            bytes_down: 0,
            http_statuses: Vec::new(),
            detail: None,
            bytes_from_cache: 0,
            requests: Vec::new(),
            undeclared: false,
        });
        e.connections += 1;
        e.bytes_up = e.bytes_up.saturating_add(c.bytes_up);
        e.bytes_down = e.bytes_down.saturating_add(c.bytes_down);
        e.bytes_from_cache = e.bytes_from_cache.saturating_add(c.bytes_from_cache);
        for mut r in c.requests {
            if e.requests.len() >= MAX_REQUESTS {
                break;
            }
            r.url = crate::limits::elide(&r.url);
            e.requests.push(r);
        }
        if let Some(s) = c.http_status {
            if let Err(at) = e.http_statuses.binary_search(&s) {
                if e.http_statuses.len() < MAX_STATUSES {
                    e.http_statuses.insert(at, s);
                }
            }
        }
        if e.detail.is_none() {
            e.detail = c
                .detail
                .map(|d| d.chars().take(MAX_DETAIL).collect::<String>());
        }
    }

    /// The contacts, by host, port and outcome.
    pub fn contacts(&self) -> Vec<Contact> {
        self.by_key.values().cloned().collect()
    }
}

/// The fail-closed rule for a grading run: when a fetch of the run failed
/// ([`Contact::failed_fetch`]) and the run wrote no passing reward, its result is not a
/// verdict but an infrastructure error; the returned cause names the first failed fetch.
/// A passing reward stands (the fetch was not needed to pass). Every host counts here; the
/// evaluator counts only vouched ones ([`super::vouch::judge_grading_fetches`]).
pub fn grading_fetch_failure(contacts: &[Contact], passing_reward: bool) -> Option<String> {
    if passing_reward {
        return None;
    }
    let failed: Vec<&Contact> = contacts.iter().filter(|c| c.failed_fetch()).collect();
    let first = failed.first()?;
    let more = match failed.len() {
        1 => String::new(),
        n => format!(" (and {} more failed fetch(es))", n - 1),
    };
    Some(format!(
        "the grader's fetch of {} failed: {}{more}; no passing reward was written, so this is not a verdict",
        first.host,
        first.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(host: &str, outcome: Outcome, status: Option<u16>) -> Connection {
        Connection {
            host: host.into(),
            port: 443,
            outcome,
            bytes_up: 10,
            bytes_down: 100,
            http_status: status,
            detail: (outcome != Outcome::Allowed).then(|| format!("{} cause", outcome.as_str())),
            bytes_from_cache: 0,
            requests: Vec::new(),
        }
    }

    fn log(conns: &[Connection]) -> Vec<Contact> {
        let mut l = ContactLog::default();
        for c in conns {
            l.add(c.clone());
        }
        l.contacts()
    }

    #[test]
    fn connections_aggregate_per_host_port_and_outcome() {
        let cs = log(&[
            conn("pypi.org", Outcome::Allowed, None),
            conn("pypi.org", Outcome::Allowed, Some(200)),
            conn("pypi.org", Outcome::Allowed, Some(200)),
            conn("pypi.org", Outcome::Allowed, Some(404)),
            conn("pypi.org", Outcome::Timeout, None),
            conn("evil.example", Outcome::Denied, None),
        ]);
        assert_eq!(cs.len(), 3, "{cs:?}");
        let ok = cs
            .iter()
            .find(|c| c.host == "pypi.org" && c.outcome == Outcome::Allowed)
            .unwrap();
        assert_eq!((ok.connections, ok.bytes_up, ok.bytes_down), (4, 40, 400));
        assert_eq!(ok.http_statuses, [200, 404]);
        assert_eq!(ok.detail, None);
        let denied = cs.iter().find(|c| c.outcome == Outcome::Denied).unwrap();
        assert_eq!(denied.detail.as_deref(), Some("denied cause"));
        let json = serde_json::to_value(denied).unwrap();
        assert_eq!(json["outcome"], "denied");
    }

    #[test]
    fn cache_bytes_and_requests_aggregate_and_are_bounded() {
        let mut l = ContactLog::default();
        for i in 0..(MAX_REQUESTS + 3) {
            let mut c = conn("files.pythonhosted.org", Outcome::Allowed, Some(200));
            c.bytes_from_cache = if i % 2 == 0 { 100 } else { 0 };
            c.requests = vec![Exchange {
                method: "GET".into(),
                url: format!("https://files.pythonhosted.org/packages/{i}.whl"),
                status: Some(200),
                bytes: 100,
                cache: if i % 2 == 0 {
                    CacheUse::Hit
                } else {
                    CacheUse::Stored
                },
            }];
            l.add(c);
        }
        let c = &l.contacts()[0];
        assert_eq!(c.requests.len(), MAX_REQUESTS);
        assert_eq!(c.bytes_down, 100 * (MAX_REQUESTS as u64 + 3));
        assert_eq!(c.bytes_from_cache, 100 * 34);
        assert_eq!(c.upstream_bytes(), 100 * 33);
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(json["requests"][0]["cache"], "hit");
        assert_eq!(json["bytes_from_cache"], 3400);
        // Absent when nothing was cached or read: older records read the same.
        let plain = &log(&[conn("a", Outcome::Allowed, None)])[0];
        let json = serde_json::to_value(plain).unwrap();
        assert!(json.get("bytes_from_cache").is_none() && json.get("requests").is_none());
        let back: Contact = serde_json::from_value(json).unwrap();
        assert_eq!(&back, plain);
    }

    #[test]
    fn the_log_is_bounded() {
        let mut l = ContactLog::default();
        for i in 0..(MAX_CONTACTS + 5) {
            l.add(conn(&format!("h{i}.example"), Outcome::Denied, None));
        }
        l.add(conn("h0.example", Outcome::Denied, None));
        assert_eq!(l.contacts().len(), MAX_CONTACTS);
        assert_eq!(l.dropped, 5);
        let mut one = ContactLog::default();
        for s in 100..200 {
            one.add(conn("a", Outcome::Allowed, Some(s)));
        }
        assert_eq!(one.contacts()[0].http_statuses.len(), MAX_STATUSES);
    }

    #[test]
    fn a_failed_fetch_without_a_passing_reward_is_not_a_verdict() {
        use Outcome::*;
        // (connections, passing reward, infrastructure error expected, text expected)
        let cases: &[(&[Connection], bool, Option<&str>)] = &[
            (&[], false, None),
            (&[conn("astral.sh", Allowed, None)], false, None),
            (&[conn("astral.sh", Allowed, Some(200))], false, None),
            (&[conn("astral.sh", Allowed, Some(404))], false, None),
            (
                &[conn("astral.sh", Allowed, Some(503))],
                false,
                Some("the grader's fetch of astral.sh failed: astral.sh:443 (1 connection(s), allowed, HTTP 503)"),
            ),
            (&[conn("astral.sh", Allowed, Some(503))], true, None),
            (
                &[conn("astral.sh", DnsFailed, None)],
                false,
                Some("astral.sh:443 (1 connection(s), dns_failed: dns_failed cause)"),
            ),
            (&[conn("astral.sh", DnsFailed, None)], true, None),
            (
                &[conn("deb.debian.org", ConnectFailed, None)],
                false,
                Some("fetch of deb.debian.org failed"),
            ),
            (
                &[conn("pypi.org", Timeout, None)],
                false,
                Some("pypi.org:443 (1 connection(s), timeout"),
            ),
            (
                &[conn("pypi.org", ProxyError, None)],
                false,
                Some("proxy_error"),
            ),
            (&[conn("undeclared.example", Denied, None)], false, None),
            (
                &[
                    conn("a.example", Allowed, None),
                    conn("b.example", Timeout, None),
                    conn("c.example", DnsFailed, None),
                ],
                false,
                Some("fetch of b.example failed: b.example:443 (1 connection(s), timeout: timeout cause) (and 1 more failed fetch(es))"),
            ),
        ];
        for (conns, passing, want) in cases {
            let got = grading_fetch_failure(&log(conns), *passing);
            match (want, &got) {
                (None, None) => {}
                (Some(w), Some(g)) => assert!(g.contains(w), "{g:?} should contain {w:?}"),
                _ => panic!("{conns:?} passing={passing}: got {got:?}, want {want:?}"),
            }
        }
    }
}
