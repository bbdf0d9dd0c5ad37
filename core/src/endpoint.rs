//! Network endpoints an agent may reach from its sandbox (`host:port` in the agent
//! descriptor's `network` list), parsed and checked here; the worker's runtime forwards them.

use std::fmt;

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
            format!("`{s}` is not a valid endpoint ({why}); fix: write host:port, e.g. api.anthropic.com:443")
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

#[cfg(test)]
mod tests {
    use super::*;

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
