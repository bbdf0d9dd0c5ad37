//! Which hosts the agent's phase reached for that the task did not declare (pure): the
//! worker marks them in the record ([`mark_undeclared`]), reports count the trials and the
//! hosts (`core::report::network`), so a user sees which agents went looking on the
//! internet.
//!
//! "Declared" is the task's `allowed_hosts` for the agent's phase. A `public` phase declares
//! no host (Harbor's `public` takes no `allowed_hosts`), so every host it reached counts:
//! the count then says which agents used the internet at all, the record's contacts say
//! where. Under `allowlist` only the hosts the proxy refused count.

use super::{Contact, NetworkMode, Outcome};

/// Whether the task declared `c`'s host for the phase whose network is `mode`. A request the
/// proxy could not read (`proxy_error`, host `-`) names no host and is never counted.
pub fn is_declared(mode: &NetworkMode, c: &Contact) -> bool {
    if c.outcome == Outcome::ProxyError && c.host == "-" {
        return true;
    }
    match mode {
        NetworkMode::Allowlist(hosts) => {
            c.outcome != Outcome::Denied && hosts.iter().any(|h| h.matches(&c.host))
        }
        NetworkMode::Public | NetworkMode::NoNetwork => false,
    }
}

/// Marks every contact of the agent's phase (network `mode`) the task did not declare.
pub fn mark_undeclared(mode: &NetworkMode, contacts: &mut [Contact]) {
    for c in contacts {
        c.undeclared = !is_declared(mode, c);
    }
}

/// The distinct hosts of `contacts` marked undeclared, sorted.
pub fn undeclared_hosts(contacts: &[Contact]) -> Vec<String> {
    let mut hosts: Vec<String> = contacts
        .iter()
        .filter(|c| c.undeclared)
        .map(|c| c.host.clone())
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::AllowedHost;

    fn c(host: &str, port: u16, outcome: Outcome) -> Contact {
        Contact {
            host: host.into(),
            port,
            outcome,
            connections: 1,
            bytes_up: 0,
            bytes_down: 0,
            http_statuses: Vec::new(),
            detail: None,
            undeclared: false,
            bytes_from_cache: 0,
            requests: Vec::new(),
        }
    }

    #[test]
    fn declared_is_the_phases_allowlist() {
        use Outcome::*;
        let allow = NetworkMode::Allowlist(vec![
            AllowedHost::parse("pypi.org").unwrap(),
            AllowedHost::parse("*.github.com").unwrap(),
        ]);
        let cases: &[(&NetworkMode, Contact, bool)] = &[
            (&allow, c("pypi.org", 443, Allowed), true),
            (&allow, c("pypi.org", 8443, Allowed), true),
            (&allow, c("pypi.org", 443, DnsFailed), true),
            (&allow, c("api.github.com", 443, Allowed), true),
            (&allow, c("github.com", 443, Denied), false),
            (&allow, c("evil.example", 443, Denied), false),
            (&NetworkMode::Public, c("pypi.org", 443, Allowed), false),
            (&NetworkMode::Public, c("evil.example", 443, Timeout), false),
            (&NetworkMode::NoNetwork, c("pypi.org", 443, Denied), false),
            (&NetworkMode::Public, c("-", 0, ProxyError), true),
            (&allow, c("-", 0, ProxyError), true),
        ];
        for (mode, contact, want) in cases {
            assert_eq!(is_declared(mode, contact), *want, "{mode:?} {contact:?}");
        }
    }

    #[test]
    fn marked_contacts_give_distinct_hosts() {
        let allow = NetworkMode::Allowlist(vec![AllowedHost::parse("pypi.org").unwrap()]);
        let mut cs = vec![
            c("pypi.org", 443, Outcome::Allowed),
            c("github.com", 443, Outcome::Denied),
            c("github.com", 80, Outcome::Denied),
            c("evil.example", 443, Outcome::Denied),
        ];
        mark_undeclared(&allow, &mut cs);
        assert_eq!(
            cs.iter().map(|c| c.undeclared).collect::<Vec<_>>(),
            [false, true, true, true]
        );
        assert_eq!(undeclared_hosts(&cs), ["evil.example", "github.com"]);
        let json = serde_json::to_value(&cs).unwrap();
        assert_eq!(json[0].get("undeclared"), None);
        assert_eq!(json[1]["undeclared"], true);
        mark_undeclared(&NetworkMode::Public, &mut cs);
        assert_eq!(undeclared_hosts(&cs).len(), 3);
    }
}
