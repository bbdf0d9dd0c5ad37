//! Network endpoints an agent may reach from its sandbox (`host:port` in the agent
//! descriptor's `network` list), parsed and checked here; the worker's runtime forwards them.
//! Everything the runtime could not forward is refused here, when the descriptor loads:
//! IP literals other than `127.x.x.x` (the wildcard `0.0.0.0`, `[::]`, any IPv6 literal),
//! more than [`MAX_ENDPOINTS`] entries, and loopback ports of well-known local services
//! ([`LOCAL_SERVICE_PORTS`]) unless the descriptor allows that port by name.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

/// The most endpoints one descriptor may list (the sandbox gives each host name its own
/// `127.0.0.x` address).
pub const MAX_ENDPOINTS: usize = 250;

/// The longest host name accepted (DNS's limit).
pub const MAX_HOST_LEN: usize = 253;

/// Ports of services commonly listening on a host's loopback, with their names: a loopback
/// endpoint on one of them would forward the sandbox to that service, so it must be allowed
/// explicitly (`allow_local_ports` in the descriptor).
pub const LOCAL_SERVICE_PORTS: [(u16, &str); 16] = [
    (22, "ssh"),
    (25, "smtp"),
    (111, "rpcbind"),
    (2375, "docker"),
    (2376, "docker (TLS)"),
    (2379, "etcd"),
    (3306, "MySQL"),
    (5432, "PostgreSQL"),
    (5984, "CouchDB"),
    (6379, "Redis"),
    (6443, "Kubernetes API"),
    (7400, "the akbench coordinator (gRPC)"),
    (7401, "the akbench coordinator (HTTP)"),
    (9200, "Elasticsearch"),
    (11211, "memcached"),
    (27017, "MongoDB"),
];

/// A `host:port` the agent may connect to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port, never 0.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl Endpoint {
    /// Parses `host:port` (`[v6]:port` for IPv6). The message names the input and the fix.
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let bad = |why: &str| {
            format!(
                "`{}` is not a valid endpoint ({why}); fix: write host:port, e.g. api.anthropic.com:443",
                crate::limits::elide(s)
            )
        };
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (h, p) = rest.split_once("]:").ok_or_else(|| bad("no port"))?;
            (h, p)
        } else {
            s.rsplit_once(':').ok_or_else(|| bad("no port"))?
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if host.len() > MAX_HOST_LEN {
            return Err(bad("the host is longer than 253 characters"));
        }
        let host_ok = host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
        if !host_ok || (host.contains(':') && !s.starts_with('[')) {
            return Err(bad("the host has characters a host name cannot have"));
        }
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        if port == 0 {
            return Err(bad("port 0"));
        }
        Ok(Endpoint {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl Endpoint {
    /// True when the host is the machine's own loopback (`127.x.x.x`, `localhost`).
    pub fn is_loopback(&self) -> bool {
        match self.host.parse::<Ipv4Addr>() {
            Ok(a) => a.is_loopback(),
            Err(_) => self.host == "localhost" || self.host.ends_with(".localhost"),
        }
    }

    /// Refuses what the sandbox cannot or must not forward (see the module doc);
    /// `allowed_local` are loopback service ports the descriptor allows explicitly.
    pub fn check_reachable(&self, allowed_local: &[u16]) -> Result<(), String> {
        let bad = |why: String| format!("`{self}` {why}");
        match self.host.parse::<IpAddr>() {
            Ok(a) if a.is_unspecified() => {
                return Err(bad(
                    "is the unspecified (wildcard) address, which names no host; fix: write the endpoint's host name".into(),
                ))
            }
            Ok(IpAddr::V4(a)) if a.is_loopback() => {}
            Ok(_) => {
                return Err(bad(
                    "is an IP address the sandbox cannot forward (only host names and 127.x.x.x); fix: write the endpoint's host name".into(),
                ))
            }
            Err(_) => {}
        }
        if self.is_loopback() && !allowed_local.contains(&self.port) {
            if let Some((_, name)) = LOCAL_SERVICE_PORTS.iter().find(|(p, _)| *p == self.port) {
                return Err(bad(format!(
                    "would reach {name} on the worker's own loopback; fix: if the agent really needs it, add `allow_local_ports = [{}]` to the descriptor",
                    self.port
                )));
            }
        }
        Ok(())
    }
}

/// Parses and checks a descriptor's `network` list: at most [`MAX_ENDPOINTS`] entries, each
/// parsed by [`Endpoint::parse`] and checked by [`Endpoint::check_reachable`].
pub fn check_list(list: &[String], allowed_local: &[u16]) -> Result<Vec<Endpoint>, String> {
    if list.len() > MAX_ENDPOINTS {
        return Err(format!(
            "lists {} endpoints, more than the maximum {MAX_ENDPOINTS}; fix: list only the endpoints the agent reaches",
            list.len()
        ));
    }
    list.iter()
        .map(|s| {
            let e = Endpoint::parse(s)?;
            e.check_reachable(allowed_local)?;
            Ok(e)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_the_sandbox_cannot_or_must_not_forward_are_refused() {
        let cases: [(&str, &[u16], Option<&str>); 14] = [
            ("api.anthropic.com:443", &[], None),
            ("127.0.0.1:8080", &[], None),
            ("127.0.0.5:9000", &[], None),
            ("localhost:3000", &[], None),
            ("[::]:1", &[], Some("unspecified")),
            ("0.0.0.0:443", &[], Some("unspecified")),
            ("[::1]:443", &[], Some("cannot forward")),
            ("10.0.0.1:443", &[], Some("cannot forward")),
            ("127.0.0.1:5432", &[], Some("PostgreSQL")),
            ("localhost:6379", &[], Some("Redis")),
            ("127.1.2.3:22", &[], Some("ssh")),
            ("127.0.0.1:2375", &[], Some("docker")),
            ("127.0.0.1:5432", &[5432], None),
            ("db.example.com:5432", &[], None),
        ];
        for (input, allowed, want) in cases {
            let r = check_list(&[input.to_string()], allowed);
            match (want, r) {
                (None, Ok(v)) => assert_eq!(v.len(), 1, "{input}"),
                (Some(w), Err(e)) => assert!(e.contains(w), "{input}: {e}"),
                (w, r) => panic!("{input}: wanted {w:?}, got {r:?}"),
            }
        }
        let many: Vec<String> = (0..10_000).map(|i| format!("h{i}.example:443")).collect();
        let e = check_list(&many, &[]).unwrap_err();
        assert!(e.contains("10000") && e.contains("250"), "{e}");
        assert!(check_list(&many[..250], &[]).is_ok());
        let long = format!("{}:443", "a".repeat(300_000));
        let e = check_list(&[long], &[]).unwrap_err();
        assert!(e.len() < 400 && e.contains("253"), "{e}");
    }

    #[test]
    fn endpoints_parse_or_name_the_problem() {
        let ok = [
            ("api.anthropic.com:443", "api.anthropic.com", 443),
            ("127.0.0.1:8080", "127.0.0.1", 8080),
            ("[::1]:443", "::1", 443),
            ("Proxy.Local:3128", "proxy.local", 3128),
        ];
        for (input, host, port) in ok {
            let e = Endpoint::parse(input).unwrap();
            assert_eq!((e.host.as_str(), e.port), (host, port), "{input}");
        }
        assert_eq!(
            Endpoint::parse("[::1]:443").unwrap().to_string(),
            "[::1]:443"
        );
        let bad = [
            ("api.anthropic.com", "no port"),
            (":443", "no host"),
            ("h:0", "port 0"),
            ("h:https", "not a number"),
            ("h h:1", "characters"),
            ("::1:443", "characters"),
        ];
        for (input, why) in bad {
            let e = Endpoint::parse(input).unwrap_err();
            assert!(e.contains(why) && e.contains(input), "{input}: {e}");
        }
    }
}
