//! The worker operator's egress settings (pure parsing): the private ranges the egress proxy
//! may reach (`AKBENCH_EGRESS_OPEN_RANGES`, e.g. a cluster's package mirror) and names the
//! worker resolves itself (`AKBENCH_EGRESS_HOSTS`, `name=address`). Every bad entry is an
//! error naming the variable, the entry and the fix.

use super::AllowedHost;
use std::net::IpAddr;

/// Private ranges (or addresses) the proxy may reach, comma-separated.
pub const OPEN_RANGES_ENV: &str = "AKBENCH_EGRESS_OPEN_RANGES";
/// Static names, `name=address`, comma-separated.
pub const HOSTS_ENV: &str = "AKBENCH_EGRESS_HOSTS";

fn entries(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// `10.20.0.0/16, 192.168.5.7`: addresses and CIDR ranges only.
pub fn parse_open_ranges(s: &str) -> Result<Vec<AllowedHost>, String> {
    entries(s)
        .map(|e| match AllowedHost::parse(e) {
            Ok(h @ (AllowedHost::Address(_) | AllowedHost::Range(..))) => Ok(h),
            Ok(_) => Err(format!(
                "{OPEN_RANGES_ENV}: `{}` is not an IP address or CIDR range; fix: write e.g. 10.20.0.0/16",
                crate::limits::elide(e)
            )),
            Err(why) => Err(format!(
                "{OPEN_RANGES_ENV}: `{}`: {why}; fix: write e.g. 10.20.0.0/16",
                crate::limits::elide(e)
            )),
        })
        .collect()
}

/// `mirror.internal=10.20.0.5, pypi.internal=10.20.0.6`.
pub fn parse_hosts(s: &str) -> Result<Vec<(String, IpAddr)>, String> {
    entries(s)
        .map(|e| {
            let bad = |why: &str| {
                format!(
                    "{HOSTS_ENV}: `{}` {why}; fix: write name=address, e.g. mirror.internal=10.20.0.5",
                    crate::limits::elide(e)
                )
            };
            let (name, addr) = e.split_once('=').ok_or_else(|| bad("has no `=`"))?;
            let ip = addr
                .trim()
                .parse::<IpAddr>()
                .map_err(|_| bad("does not end in an IP address"))?;
            match AllowedHost::parse(name) {
                Ok(AllowedHost::Hostname(n)) => Ok((n, ip)),
                _ => Err(bad("does not start with a host name")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_settings_parse_or_name_the_entry_and_the_fix() {
        assert_eq!(
            parse_open_ranges(" 10.20.0.0/16, 192.168.5.7 ,"),
            Ok(vec![
                AllowedHost::Range("10.20.0.0".parse().unwrap(), 16),
                AllowedHost::Address("192.168.5.7".parse().unwrap()),
            ])
        );
        assert_eq!(parse_open_ranges(""), Ok(vec![]));
        for (bad, text) in [
            ("mirror.internal", "not an IP address or CIDR range"),
            ("10.20.0.1/16", "not a strict CIDR range"),
            ("10.0.0.0/8, https://x", "`https://x`"),
        ] {
            let e = parse_open_ranges(bad).unwrap_err();
            assert!(
                e.contains(OPEN_RANGES_ENV) && e.contains(text) && e.contains("fix:"),
                "{e}"
            );
        }
        assert_eq!(
            parse_hosts("Mirror.Internal=10.20.0.5, v6.internal = fd00::1"),
            Ok(vec![
                ("mirror.internal".into(), "10.20.0.5".parse().unwrap()),
                ("v6.internal".into(), "fd00::1".parse().unwrap()),
            ])
        );
        for (bad, text) in [
            ("mirror.internal", "has no `=`"),
            ("mirror.internal=nowhere", "IP address"),
            ("*.internal=10.0.0.1", "host name"),
            ("10.0.0.2=10.0.0.1", "host name"),
        ] {
            let e = parse_hosts(bad).unwrap_err();
            assert!(
                e.contains(HOSTS_ENV) && e.contains(text) && e.contains("fix:"),
                "{e}"
            );
        }
    }
}
