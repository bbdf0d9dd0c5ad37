//! The network a task's phase may reach, as Harbor 0.25 declares it: `network_mode`
//! (`public`, `no-network`, `allowlist`) with `allowed_hosts`, set in `[environment]` for
//! every phase and overridden per phase in `[agent]` and `[verifier]` (Harbor's
//! `PhaseNetworkPolicyConfig`); the deprecated `allow_internet` maps onto it. Pure: the
//! values, their parsing (Harbor's normalisation of `allowed_hosts`), the per-phase
//! resolution and host matching. The worker's egress proxy applies the result
//! (`worker/src/runtime/egress.rs`); what it records is [`contact`], how it reads a
//! request is [`request`]; which failed grading fetches count as infrastructure, [`vouch`].

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

pub mod cache;
pub mod contact;
pub mod declared;
pub mod http;
pub mod offer;
pub mod request;
pub mod settings;
pub mod vouch;

pub use contact::{
    grading_fetch_failure, CacheUse, Connection, Contact, ContactLog, Exchange, Outcome,
};

/// Harbor's `NetworkMode` as written in `task.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModeName {
    /// `public`: Harbor's default, any host.
    #[serde(rename = "public")]
    Public,
    /// `no-network`.
    #[serde(rename = "no-network")]
    NoNetwork,
    /// `allowlist`: only `allowed_hosts`.
    #[serde(rename = "allowlist")]
    Allowlist,
}

impl ModeName {
    /// Parses Harbor's spelling.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "public" => Ok(Self::Public),
            "no-network" => Ok(Self::NoNetwork),
            "allowlist" => Ok(Self::Allowlist),
            other => Err(format!(
                "`{}` is not a network mode; fix: write `public`, `no-network` or `allowlist`",
                crate::limits::elide(other)
            )),
        }
    }
}

/// One entry of `allowed_hosts`, normalised as Harbor normalises it (lower case, no trailing
/// dot, IPv6 and CIDR compressed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum AllowedHost {
    /// `example.com`: that host exactly.
    Hostname(String),
    /// `*.example.com`: any host under `example.com` (not `example.com` itself), stored
    /// as the suffix `example.com`.
    Wildcard(String),
    /// An IP address literal.
    Address(IpAddr),
    /// An IP range `addr/len` (the address has no bits past `len`, as Harbor's strict
    /// parse requires).
    Range(IpAddr, u8),
}

const INVALID: &str = "allowed_hosts entries must be hostnames, IP addresses, or IP CIDR ranges, not URLs, ports, or paths";

impl AllowedHost {
    /// Parses and normalises one entry; the error names the entry and says what is wrong.
    pub fn parse(entry: &str) -> Result<Self, String> {
        Self::parse_unnamed(entry)
            .map_err(|why| format!("`{}`: {why}", crate::limits::elide(entry.trim())))
    }

    fn parse_unnamed(entry: &str) -> Result<Self, String> {
        let host = entry.trim().to_ascii_lowercase();
        let host = host.trim_end_matches('.');
        if host.is_empty() {
            return Err("allowed_hosts entries must be non-empty hostnames".into());
        }
        if let Some((addr, len)) = host.split_once('/') {
            let addr: IpAddr = addr.parse().map_err(|_| INVALID.to_string())?;
            let len: u8 = len.parse().map_err(|_| INVALID.to_string())?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            if len > max || masked(addr, len) != addr {
                return Err("not a strict CIDR range (bits set past the prefix length)".to_string());
            }
            return Ok(Self::Range(addr, len));
        }
        if host.contains(':') {
            return match host.parse::<IpAddr>() {
                Ok(a @ IpAddr::V6(_)) => Ok(Self::Address(a)),
                _ => Err(INVALID.into()),
            };
        }
        if let Ok(a) = host.parse::<IpAddr>() {
            return Ok(Self::Address(a));
        }
        let (wild, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if name.contains('*') || (!wild && host.starts_with('*')) {
            return Err("allowed_hosts wildcard entries must use a leading '*.' prefix".into());
        }
        if name.is_empty() {
            return Err("allowed_hosts wildcard entries must include a hostname suffix".into());
        }
        if wild && name.parse::<IpAddr>().is_ok() {
            return Err(
                "allowed_hosts wildcard entries must target hostnames, not IP address literals"
                    .into(),
            );
        }
        if !name.split('.').all(valid_label) {
            return Err("allowed_hosts entries must be IP addresses, IP CIDR ranges, or hostnames (letters, digits, hyphens and dots) or `*.` patterns".to_string());
        }
        Ok(if wild {
            Self::Wildcard(name.to_string())
        } else {
            Self::Hostname(name.to_string())
        })
    }

    /// Whether a connection to `host` (a name or an address literal, as the client asked
    /// for it) is allowed by this entry. A name is matched as a name; an address entry or
    /// range matches only an address literal (the proxy resolves names itself and does not
    /// let a name through because of its address).
    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match self {
            Self::Hostname(h) => *h == host,
            Self::Wildcard(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            Self::Address(a) => host.parse::<IpAddr>().is_ok_and(|h| h == *a),
            Self::Range(a, len) => host
                .parse::<IpAddr>()
                .is_ok_and(|h| h.is_ipv4() == a.is_ipv4() && masked(h, *len) == *a),
        }
    }
}

fn valid_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

fn masked(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len.min(32)))
            };
            IpAddr::V4((bits & mask).into())
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len.min(128)))
            };
            IpAddr::V6((bits & mask).into())
        }
    }
}

/// The network one phase may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", content = "hosts", rename_all = "kebab-case")]
pub enum NetworkMode {
    /// Any host (through the egress proxy, every connection recorded).
    Public,
    /// Nothing beyond the sandbox's own loopback.
    NoNetwork,
    /// Only these hosts.
    Allowlist(Vec<AllowedHost>),
}

impl NetworkMode {
    /// Harbor's default when nothing is set.
    pub const HARBOR_DEFAULT: NetworkMode = NetworkMode::Public;

    /// Whether this phase needs any network at all.
    pub fn reaches_anything(&self) -> bool {
        match self {
            Self::Public => true,
            Self::NoNetwork => false,
            Self::Allowlist(hosts) => !hosts.is_empty(),
        }
    }

    /// Whether a connection to `host` is allowed.
    pub fn allows(&self, host: &str) -> bool {
        match self {
            Self::Public => true,
            Self::NoNetwork => false,
            Self::Allowlist(hosts) => hosts.iter().any(|h| h.matches(host)),
        }
    }
}

/// One section's `network_mode` / `allowed_hosts` as written (both optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared<'a> {
    /// `network_mode`.
    pub mode: Option<&'a str>,
    /// `allowed_hosts`.
    pub allowed_hosts: Option<&'a [String]>,
}

/// Resolves one section's declaration; `None` when it sets nothing (the phase inherits).
/// As in Harbor, `allowed_hosts` is valid only with `allowlist`.
pub fn resolve(declared: &Declared<'_>) -> Result<Option<NetworkMode>, String> {
    let mode = declared.mode.map(ModeName::parse).transpose()?;
    let hosts = declared
        .allowed_hosts
        .map(|hs| {
            hs.iter()
                .map(|h| AllowedHost::parse(h))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    match (mode, hosts) {
        (None, None) => Ok(None),
        (Some(ModeName::Allowlist), hosts) => Ok(Some(NetworkMode::Allowlist(hosts.unwrap_or_default()))),
        (_, Some(_)) => Err("allowed_hosts is only valid when network_mode = \"allowlist\"; fix: set network_mode = \"allowlist\" or remove allowed_hosts".into()),
        (Some(ModeName::Public), None) => Ok(Some(NetworkMode::Public)),
        (Some(ModeName::NoNetwork), None) => Ok(Some(NetworkMode::NoNetwork)),
    }
}

/// The deprecated `[environment] allow_internet` as a mode (Harbor: `true` = public,
/// `false` = no-network); an error when `network_mode` is also set in `[environment]`.
pub fn from_allow_internet(allow: bool, mode_set: bool) -> Result<NetworkMode, String> {
    if mode_set {
        return Err("set either allow_internet (deprecated) or network_mode in [environment], not both; fix: remove allow_internet".into());
    }
    Ok(if allow {
        NetworkMode::Public
    } else {
        NetworkMode::NoNetwork
    })
}

/// The network of each phase of a task: `[environment]`'s for every phase, unless
/// `[agent]` or `[verifier]` sets its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseNetworks {
    /// The agent's phase (and the reference solution's, which stands in for an agent).
    pub agent: NetworkMode,
    /// Every grading run.
    pub verifier: NetworkMode,
}

/// The network of a phase whose task sets none: Harbor's `public` for a task in Harbor's
/// layout (its graders download their tools, its agents install packages); `no-network`
/// for an akbench task with a `[source]`: its workspace is a pinned repository, nothing in it
/// needs the internet, and an agent given the internet could look for the fix upstream.
pub fn unset_default(has_source: bool) -> NetworkMode {
    if has_source {
        NetworkMode::NoNetwork
    } else {
        NetworkMode::HARBOR_DEFAULT
    }
}

impl PhaseNetworks {
    /// As [`PhaseNetworks::new`], with `default` for what `[environment]` leaves unset
    /// ([`unset_default`]).
    pub fn with_default(
        default: NetworkMode,
        environment: Option<NetworkMode>,
        agent: Option<NetworkMode>,
        verifier: Option<NetworkMode>,
    ) -> Self {
        Self::new(Some(environment.unwrap_or(default)), agent, verifier)
    }

    /// From the resolved sections (`None` = not set there).
    pub fn new(
        environment: Option<NetworkMode>,
        agent: Option<NetworkMode>,
        verifier: Option<NetworkMode>,
    ) -> Self {
        let base = environment.unwrap_or(NetworkMode::HARBOR_DEFAULT);
        Self {
            agent: agent.unwrap_or_else(|| base.clone()),
            verifier: verifier.unwrap_or(base),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_hosts_parse_as_harbor_normalises_them() {
        let ok: &[(&str, AllowedHost)] = &[
            ("Example.COM.", AllowedHost::Hostname("example.com".into())),
            (" pypi.org ", AllowedHost::Hostname("pypi.org".into())),
            ("*.github.com", AllowedHost::Wildcard("github.com".into())),
            (
                "10.0.0.1",
                AllowedHost::Address("10.0.0.1".parse().unwrap()),
            ),
            (
                "2001:DB8::1",
                AllowedHost::Address("2001:db8::1".parse().unwrap()),
            ),
            (
                "192.0.2.0/24",
                AllowedHost::Range("192.0.2.0".parse().unwrap(), 24),
            ),
            (
                "2001:db8::/32",
                AllowedHost::Range("2001:db8::".parse().unwrap(), 32),
            ),
        ];
        for (input, want) in ok {
            assert_eq!(AllowedHost::parse(input).as_ref(), Ok(want), "{input}");
        }
        for bad in [
            "",
            "  ",
            "https://example.com",
            "example.com:443",
            "example.com/path",
            "192.0.2.1/24",
            "10.0.0.0/33",
            "a*.example.com",
            "*.",
            "*.10.0.0.1",
            "exa_mple.com",
            "-bad.com",
            "[::1]",
            "fe80::1%eth0",
        ] {
            let e = AllowedHost::parse(bad).expect_err(bad);
            assert!(e.starts_with(&format!("`{}`", bad.trim())), "{bad:?}: {e}");
        }
    }

    #[test]
    fn hosts_match_by_name_suffix_and_range() {
        let cases: &[(&str, &str, bool)] = &[
            ("example.com", "example.com", true),
            ("example.com", "EXAMPLE.com.", true),
            ("example.com", "www.example.com", false),
            ("*.example.com", "www.example.com", true),
            ("*.example.com", "a.b.example.com", true),
            ("*.example.com", "example.com", false),
            ("*.example.com", "badexample.com", false),
            ("10.0.0.1", "10.0.0.1", true),
            ("10.0.0.1", "10.0.0.2", false),
            ("192.0.2.0/24", "192.0.2.77", true),
            ("192.0.2.0/24", "192.0.3.1", false),
            ("192.0.2.0/24", "example.com", false),
            ("2001:db8::/32", "[2001:db8::5]", true),
            ("2001:db8::/32", "10.0.0.1", false),
            ("0.0.0.0/0", "8.8.8.8", true),
        ];
        for (entry, host, want) in cases {
            let e = AllowedHost::parse(entry).unwrap();
            assert_eq!(e.matches(host), *want, "{entry} vs {host}");
        }
    }

    #[test]
    fn sections_resolve_as_harbor_resolves_them() {
        let hosts = vec!["pypi.org".to_string()];
        let d = |mode, allowed_hosts| Declared {
            mode,
            allowed_hosts,
        };
        assert_eq!(resolve(&d(None, None)), Ok(None));
        assert_eq!(
            resolve(&d(Some("public"), None)),
            Ok(Some(NetworkMode::Public))
        );
        assert_eq!(
            resolve(&d(Some("no-network"), None)),
            Ok(Some(NetworkMode::NoNetwork))
        );
        assert_eq!(
            resolve(&d(Some("allowlist"), Some(&hosts))),
            Ok(Some(NetworkMode::Allowlist(vec![AllowedHost::Hostname(
                "pypi.org".into()
            )])))
        );
        assert_eq!(
            resolve(&d(Some("allowlist"), None)),
            Ok(Some(NetworkMode::Allowlist(vec![])))
        );
        assert!(resolve(&d(Some("public"), Some(&hosts))).is_err());
        assert!(resolve(&d(None, Some(&hosts))).is_err());
        assert!(resolve(&d(Some("bridge"), None)).is_err());
        assert_eq!(from_allow_internet(true, false), Ok(NetworkMode::Public));
        assert_eq!(
            from_allow_internet(false, false),
            Ok(NetworkMode::NoNetwork)
        );
        assert!(from_allow_internet(true, true).is_err());
    }

    #[test]
    fn phases_inherit_the_environment_unless_they_set_their_own() {
        let native = PhaseNetworks::with_default(unset_default(true), None, None, None);
        assert_eq!(native.agent, NetworkMode::NoNetwork);
        assert_eq!(native.verifier, NetworkMode::NoNetwork);
        let native_open =
            PhaseNetworks::with_default(unset_default(true), None, Some(NetworkMode::Public), None);
        assert_eq!(native_open.agent, NetworkMode::Public);
        assert_eq!(native_open.verifier, NetworkMode::NoNetwork);
        let none = PhaseNetworks::with_default(unset_default(false), None, None, None);
        assert_eq!(none, PhaseNetworks::new(None, None, None));
        assert_eq!(none.agent, NetworkMode::Public);
        assert_eq!(none.verifier, NetworkMode::Public);
        let p = PhaseNetworks::new(
            Some(NetworkMode::NoNetwork),
            None,
            Some(NetworkMode::Public),
        );
        assert_eq!(p.agent, NetworkMode::NoNetwork);
        assert_eq!(p.verifier, NetworkMode::Public);
        let empty = NetworkMode::Allowlist(vec![]);
        assert!(!empty.reaches_anything());
        assert!(!empty.allows("example.com"));
        assert!(NetworkMode::Public.allows("anything.example"));
        assert!(!NetworkMode::NoNetwork.allows("localhost"));
    }
}
