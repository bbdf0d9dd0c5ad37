//! Whether a client may send a bearer token to a coordinator URL: the rule the CLI and the
//! worker share. `https://` always means TLS (the clients never fall back to plaintext); a
//! token goes over plain `http://` only to a loopback address, or anywhere when the user
//! said so explicitly (`--allow-plaintext-token`).

use std::net::IpAddr;

/// A URL scheme the clients speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP/2.
    Http,
    /// HTTP/2 over TLS.
    Https,
}

impl Scheme {
    /// `http` or `https`; anything else is `None`.
    pub fn parse(s: &str) -> Option<Scheme> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
}

/// True for `localhost` and loopback IP addresses (`127.0.0.0/8`, `::1`, bracketed or not).
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Why a token may not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "failed to send the token to {host}: `http://` is plaintext and {host} is not a loopback \
     address, so anyone on the path could read the token; fix: use an https:// URL (with \
     --ca-file if the coordinator's certificate is not signed by a system root), or pass \
     --allow-plaintext-token if this network is private"
)]
pub struct PlaintextToken {
    /// The host the token would have gone to.
    pub host: String,
}

/// Checks that a token may go to `host` over `scheme`.
pub fn check_token_transport(
    scheme: Scheme,
    host: &str,
    has_token: bool,
    allow_plaintext: bool,
) -> Result<(), PlaintextToken> {
    if !has_token || scheme == Scheme::Https || allow_plaintext || is_loopback_host(host) {
        return Ok(());
    }
    Err(PlaintextToken {
        host: host.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_go_in_plaintext_only_to_loopback_or_when_allowed() {
        use Scheme::*;
        // (scheme, host, has token, allow plaintext, allowed)
        let table = [
            (Https, "coord.example", true, false, true),
            (Http, "127.0.0.1", true, false, true),
            (Http, "127.8.9.1", true, false, true),
            (Http, "localhost", true, false, true),
            (Http, "LOCALHOST", true, false, true),
            (Http, "[::1]", true, false, true),
            (Http, "::1", true, false, true),
            (Http, "10.0.0.5", true, false, false),
            (Http, "coord.example", true, false, false),
            (Http, "localhost.example", true, false, false),
            (Http, "[::2]", true, false, false),
            (Http, "coord.example", true, true, true),
            (Http, "coord.example", false, false, true),
        ];
        for (scheme, host, token, allow, ok) in table {
            let r = check_token_transport(scheme, host, token, allow);
            assert_eq!(
                r.is_ok(),
                ok,
                "{scheme:?} {host} token={token} allow={allow}"
            );
            if let Err(e) = r {
                let m = e.to_string();
                assert!(
                    m.contains("--allow-plaintext-token") && m.contains("https://"),
                    "{m}"
                );
            }
        }
    }

    #[test]
    fn schemes() {
        assert_eq!(Scheme::parse("HTTPS"), Some(Scheme::Https));
        assert_eq!(Scheme::parse("http"), Some(Scheme::Http));
        assert_eq!(Scheme::parse("grpc"), None);
    }
}
