//! Which failed grading fetches count as infrastructure (pure). A grading run executes the
//! agent's code, which can fetch an unreachable host on purpose; a failed fetch is the
//! infrastructure's fault only when its `host:port` is **vouched** for by someone other than
//! the code under test: declared by the task (the verifier's `allowed_hosts`), on the worker
//! operator's list of known upstreams ([`KNOWN_HOSTS_ENV`], default [`DEFAULT_KNOWN_HOSTS`]),
//! or contacted successfully by an earlier grading of the same task on this worker
//! ([`SeenUpstreams`]). Any other failed fetch, and any fetch the phase's network refused,
//! leaves the grader's verdict standing, with a note saying why ([`judge_grading_fetches`]).

use super::{AllowedHost, Contact, NetworkMode, Outcome};
use std::collections::BTreeSet;

/// The worker setting: known upstreams, comma-separated (`host`, `*.suffix`, `host:port`,
/// an address or range; `default` stands for [`DEFAULT_KNOWN_HOSTS`]).
pub const KNOWN_HOSTS_ENV: &str = "AKBENCH_EGRESS_KNOWN_HOSTS";

/// The ports a host named without one is vouched on (a task's `allowed_hosts` names no
/// port): HTTP and HTTPS.
pub const WEB_PORTS: [u16; 2] = [80, 443];

/// Package and installer hosts graders commonly fetch from (Terminal-Bench's test scripts:
/// `apt-get`, the `uv` installer, `uvx`/`pip`, `npm`, GitHub releases), vouched on
/// [`WEB_PORTS`] unless the operator sets [`KNOWN_HOSTS_ENV`].
pub const DEFAULT_KNOWN_HOSTS: &[&str] = &[
    "deb.debian.org",
    "security.debian.org",
    "archive.ubuntu.com",
    "security.ubuntu.com",
    "ports.ubuntu.com",
    "dl-cdn.alpinelinux.org",
    "pypi.org",
    "files.pythonhosted.org",
    "astral.sh",
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "release-assets.githubusercontent.com",
    "raw.githubusercontent.com",
    "registry.npmjs.org",
    "nodejs.org",
    "static.rust-lang.org",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "repo.maven.apache.org",
    "rubygems.org",
];

/// One known upstream: a host (name, `*.` suffix, address or range) and its port (`None`:
/// [`WEB_PORTS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownUpstream {
    /// The host.
    pub host: AllowedHost,
    /// The port; `None` = 80 and 443.
    pub port: Option<u16>,
}

impl KnownUpstream {
    /// Whether it covers `host:port`.
    pub fn covers(&self, host: &str, port: u16) -> bool {
        self.host.matches(host)
            && match self.port {
                Some(p) => p == port,
                None => WEB_PORTS.contains(&port),
            }
    }
}

/// The operator's list: `None` (unset) is [`DEFAULT_KNOWN_HOSTS`]; an empty setting is no
/// known upstream; every bad entry is an error naming the variable, the entry and the fix.
pub fn known_hosts(setting: Option<&str>) -> Result<Vec<KnownUpstream>, String> {
    let setting = setting.unwrap_or("default");
    let mut out = Vec::new();
    for entry in setting.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if entry == "default" {
            for h in DEFAULT_KNOWN_HOSTS {
                out.push(parse_entry(h)?);
            }
            continue;
        }
        out.push(parse_entry(entry).map_err(|why| {
            format!(
                "{KNOWN_HOSTS_ENV}: {why}; fix: write host names, `*.suffix`, addresses or ranges, each with an optional `:port` (e.g. `default,mirror.internal:3142`)"
            )
        })?);
    }
    Ok(out)
}

/// One entry; the error names it.
fn parse_entry(entry: &str) -> Result<KnownUpstream, String> {
    parse_unnamed(entry).map_err(|why| {
        if why.starts_with('`') {
            why
        } else {
            format!("`{}`: {why}", crate::limits::elide(entry))
        }
    })
}

fn parse_unnamed(entry: &str) -> Result<KnownUpstream, String> {
    let bad_port = |p: &str| format!("the port `{p}` is not a number 1-65535");
    let port = |p: &str| match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad_port(p)),
    };
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        // `[v6]` or `[v6]:port`.
        let (addr, tail) = rest
            .split_once(']')
            .ok_or_else(|| "an IPv6 address opened with `[` is not closed".to_string())?;
        match tail {
            "" => (addr, None),
            t => match t.strip_prefix(':') {
                Some(p) => (addr, Some(port(p)?)),
                None => return Err("text after `]` other than `:port`".into()),
            },
        }
    } else if entry.matches(':').count() == 1 && !entry.contains('/') {
        let (h, p) = entry.split_once(':').unwrap_or((entry, ""));
        (h, Some(port(p)?))
    } else {
        (entry, None)
    };
    let host = AllowedHost::parse(host)?;
    Ok(KnownUpstream { host, port })
}

/// Who vouched for a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Voucher {
    /// The task's verifier network (`allowed_hosts`), on [`WEB_PORTS`].
    Declared,
    /// The operator's known upstreams.
    KnownUpstream,
    /// An earlier grading of the same task on this worker reached it.
    SeenBefore,
}

impl Voucher {
    /// Words for a cause.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Declared => "declared by the task",
            Self::KnownUpstream => "a known upstream of this worker",
            Self::SeenBefore => "reached by an earlier grading of this task on this worker",
        }
    }
}

/// What can vouch for a grading run's hosts.
#[derive(Clone, Copy)]
pub struct Vouchers<'a> {
    /// The task's network for grading.
    pub declared: &'a NetworkMode,
    /// The operator's known upstreams.
    pub known: &'a [KnownUpstream],
    /// Whether an earlier grading of the task reached `host:port`.
    pub seen: &'a dyn Fn(&str, u16) -> bool,
}

impl std::fmt::Debug for Vouchers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vouchers")
            .field("declared", self.declared)
            .field("known", &self.known)
            .finish_non_exhaustive()
    }
}

impl Vouchers<'_> {
    /// Who vouches for `host:port`, if anyone.
    pub fn vouch(&self, host: &str, port: u16) -> Option<Voucher> {
        let declared = match self.declared {
            NetworkMode::Allowlist(hosts) => {
                WEB_PORTS.contains(&port) && hosts.iter().any(|h| h.matches(host))
            }
            NetworkMode::Public | NetworkMode::NoNetwork => false,
        };
        if declared {
            Some(Voucher::Declared)
        } else if self.known.iter().any(|k| k.covers(host, port)) {
            Some(Voucher::KnownUpstream)
        } else if (self.seen)(host, port) {
            Some(Voucher::SeenBefore)
        } else {
            None
        }
    }
}

/// The start of every cause of an attempt ended `infrastructure_error` by a grading fetch
/// ([`judge_grading_fetches`]); reports count such attempts by it.
pub const FETCH_FAILED_CAUSE: &str = "the grader's fetch of ";

/// The start of the note on a verdict that stood despite failed or refused fetches.
pub const NOT_COUNTED_NOTE: &str = "not counted as infrastructure: ";

/// What a grading run's fetches make of its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GradingFetches {
    /// Nothing to say: the run's verdict stands.
    Clean,
    /// A vouched fetch failed and no passing reward was written: not a verdict
    /// (`infrastructure_error`); the cause names the fetch and its voucher.
    Infrastructure(String),
    /// The verdict stands although fetches failed or were refused: the note names them
    /// and why they were not counted.
    Stands(String),
}

/// The fail-closed rule with vouching: with a passing reward the verdict stands; without
/// one, a failed fetch ([`Contact::failed_fetch`]) of a vouched `host:port` makes the run
/// infrastructure; failed fetches of unvouched hosts and fetches the phase's network
/// refused leave the verdict standing with a note.
pub fn judge_grading_fetches(
    contacts: &[Contact],
    passing_reward: bool,
    vouchers: &Vouchers<'_>,
) -> GradingFetches {
    if passing_reward {
        return GradingFetches::Clean;
    }
    let failed: Vec<&Contact> = contacts.iter().filter(|c| c.failed_fetch()).collect();
    let vouched: Vec<(&Contact, Voucher)> = failed
        .iter()
        .filter_map(|c| Some((*c, vouchers.vouch(&c.host, c.port)?)))
        .collect();
    if let Some((first, by)) = vouched.first() {
        let more = match vouched.len() {
            1 => String::new(),
            n => format!(" (and {} more failed fetch(es) of vouched hosts)", n - 1),
        };
        return GradingFetches::Infrastructure(format!(
            "{FETCH_FAILED_CAUSE}{} failed: {}, {}{more}; no passing reward was written, so this is not a verdict",
            first.host,
            first.describe(),
            by.describe()
        ));
    }
    let mut notes: Vec<String> = failed
        .iter()
        .map(|c| {
            format!(
                "the fetch of {} failed, host not declared by the task nor a known upstream (nor reached by an earlier grading of this task here)",
                c.describe()
            )
        })
        .collect();
    notes.extend(
        contacts
            .iter()
            .filter(|c| c.outcome == Outcome::Denied)
            .map(|c| {
                format!(
                    "the fetch of {} was refused by the task's network for grading",
                    c.describe()
                )
            }),
    );
    if notes.is_empty() {
        return GradingFetches::Clean;
    }
    GradingFetches::Stands(format!("{NOT_COUNTED_NOTE}{}", notes.join("; ")))
}

/// `(task, host, port)` reached successfully by grading runs of this worker, bounded: past
/// [`MAX_SEEN`] entries nothing more is learned (a worker that grades that many distinct
/// upstreams leans on the declared and known lists instead). In memory only: a restarted
/// worker starts empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeenUpstreams {
    entries: BTreeSet<(String, String, u16)>,
}

/// Most entries [`SeenUpstreams`] keeps.
pub const MAX_SEEN: usize = 4096;

impl SeenUpstreams {
    /// Learns the hosts `contacts` (of one grading run of `task`) reached: allowed, no
    /// server error.
    pub fn learn(&mut self, task: &str, contacts: &[Contact]) {
        for c in contacts {
            if c.outcome != Outcome::Allowed || c.failed_fetch() {
                continue;
            }
            if self.entries.len() >= MAX_SEEN {
                return;
            }
            self.entries
                .insert((task.to_string(), c.host.to_ascii_lowercase(), c.port));
        }
    }

    /// Whether a grading run of `task` reached `host:port`.
    pub fn contains(&self, task: &str, host: &str, port: u16) -> bool {
        self.entries
            .contains(&(task.to_string(), host.to_ascii_lowercase(), port))
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing was learned.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contact(host: &str, port: u16, outcome: Outcome, statuses: &[u16]) -> Contact {
        Contact {
            host: host.into(),
            port,
            outcome,
            connections: 1,
            bytes_up: 1,
            bytes_down: 1,
            http_statuses: statuses.to_vec(),
            detail: (outcome != Outcome::Allowed).then(|| "cause".to_string()),
            undeclared: false,
            bytes_from_cache: 0,
            requests: Vec::new(),
        }
    }

    #[test]
    fn known_hosts_parse_with_ports_and_the_default() {
        let d = known_hosts(None).unwrap();
        assert_eq!(d.len(), DEFAULT_KNOWN_HOSTS.len());
        assert_eq!(known_hosts(Some("")).unwrap(), vec![]);
        let l = known_hosts(Some(
            "default, mirror.internal:3142, *.corp.example, 10.0.0.0/8, [fd00::1]:8443, fd00::2",
        ))
        .unwrap();
        assert_eq!(l.len(), DEFAULT_KNOWN_HOSTS.len() + 5);
        let tail = &l[DEFAULT_KNOWN_HOSTS.len()..];
        assert_eq!(tail[0].port, Some(3142));
        assert_eq!(tail[1].host, AllowedHost::Wildcard("corp.example".into()));
        assert_eq!(tail[2].port, None);
        assert_eq!(
            (tail[3].host.clone(), tail[3].port),
            (AllowedHost::Address("fd00::1".parse().unwrap()), Some(8443))
        );
        assert_eq!(tail[4].port, None);
        for (bad, text) in [
            ("pypi.org:0", "`pypi.org:0`: the port `0` is not a number"),
            ("pypi.org:https", "the port `https`"),
            (
                "https://pypi.org",
                "`https://pypi.org`: allowed_hosts entries must be",
            ),
            ("[fd00::1", "not closed"),
            ("[fd00::1]x", "`:port`"),
            ("pypi.org/simple", "`pypi.org/simple`"),
        ] {
            let e = known_hosts(Some(bad)).unwrap_err();
            assert!(
                e.starts_with(KNOWN_HOSTS_ENV) && e.contains(text) && e.contains("fix:"),
                "{bad}: {e}"
            );
        }
    }

    /// Every voucher, its port rule, and what vouches nothing.
    #[test]
    fn hosts_are_vouched_by_the_task_the_operator_or_an_earlier_grading() {
        let allow = NetworkMode::Allowlist(vec![
            AllowedHost::parse("mirror.test").unwrap(),
            AllowedHost::parse("*.cdn.test").unwrap(),
        ]);
        let known = known_hosts(Some("default,up.test:8443")).unwrap();
        let seen = |h: &str, p: u16| h == "seen.test" && p == 443;
        let cases: &[(&NetworkMode, &str, u16, Option<Voucher>)] = &[
            (&allow, "mirror.test", 443, Some(Voucher::Declared)),
            (&allow, "mirror.test", 80, Some(Voucher::Declared)),
            (&allow, "mirror.test", 12345, None),
            (&allow, "a.cdn.test", 443, Some(Voucher::Declared)),
            (&allow, "cdn.test", 443, None),
            (&NetworkMode::Public, "mirror.test", 443, None),
            (&NetworkMode::NoNetwork, "mirror.test", 443, None),
            (
                &NetworkMode::Public,
                "pypi.org",
                443,
                Some(Voucher::KnownUpstream),
            ),
            (
                &NetworkMode::Public,
                "PyPI.org",
                80,
                Some(Voucher::KnownUpstream),
            ),
            (&NetworkMode::Public, "pypi.org", 12345, None),
            (&NetworkMode::Public, "evil.pypi.org", 443, None),
            (
                &NetworkMode::Public,
                "up.test",
                8443,
                Some(Voucher::KnownUpstream),
            ),
            (&NetworkMode::Public, "up.test", 443, None),
            (
                &NetworkMode::Public,
                "seen.test",
                443,
                Some(Voucher::SeenBefore),
            ),
            (&NetworkMode::Public, "seen.test", 80, None),
            (&NetworkMode::Public, "nowhere.invalid", 443, None),
            (&allow, "pypi.org", 443, Some(Voucher::KnownUpstream)),
        ];
        for (mode, host, port, want) in cases {
            let v = Vouchers {
                declared: mode,
                known: &known,
                seen: &seen,
            };
            assert_eq!(v.vouch(host, *port), *want, "{mode:?} {host}:{port}");
        }
    }

    #[test]
    fn only_a_vouched_failed_fetch_without_a_passing_reward_is_infrastructure() {
        use Outcome::*;
        let known = known_hosts(None).unwrap();
        let allow = NetworkMode::Allowlist(vec![AllowedHost::parse("mirror.test").unwrap()]);
        let never = |_: &str, _: u16| false;
        let seen = |h: &str, _: u16| h == "seen.test";
        // (network, seen, contacts, passing, expected: I = infrastructure containing,
        // S = stands with a note containing, C = clean)
        type Case<'a> = (&'a NetworkMode, bool, Vec<Contact>, bool, char, &'a str);
        let cases: Vec<Case> = vec![
            (&NetworkMode::Public, false, vec![], false, 'C', ""),
            (
                &NetworkMode::Public,
                false,
                vec![contact("pypi.org", 443, Allowed, &[])],
                false,
                'C',
                "",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![contact("pypi.org", 443, DnsFailed, &[])],
                false,
                'I',
                "the grader's fetch of pypi.org failed: pypi.org:443 (1 connection(s), dns_failed: cause), a known upstream of this worker; no passing reward",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![contact("pypi.org", 443, DnsFailed, &[])],
                true,
                'C',
                "",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![contact("deb.debian.org", 80, Allowed, &[200, 503])],
                false,
                'I',
                "HTTP 503), a known upstream",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![contact("pypi.org", 12345, ConnectFailed, &[])],
                false,
                'S',
                "not counted as infrastructure: the fetch of pypi.org:12345 (1 connection(s), connect_failed: cause) failed, host not declared by the task nor a known upstream",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![contact("nowhere.invalid", 443, DnsFailed, &[])],
                false,
                'S',
                "nowhere.invalid:443",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![contact("nowhere.invalid", 443, DnsFailed, &[])],
                true,
                'C',
                "",
            ),
            (
                &allow,
                false,
                vec![contact("mirror.test", 443, Timeout, &[])],
                false,
                'I',
                "mirror.test:443 (1 connection(s), timeout: cause), declared by the task",
            ),
            (
                &NetworkMode::Public,
                true,
                vec![contact("seen.test", 443, ProxyError, &[])],
                false,
                'I',
                "reached by an earlier grading of this task on this worker",
            ),
            (
                &allow,
                false,
                vec![contact("elsewhere.test", 443, Denied, &[])],
                false,
                'S',
                "elsewhere.test:443 (1 connection(s), denied: cause) was refused by the task's network",
            ),
            // The program inside broke its exchange with a known upstream (a handshake it
            // failed on purpose, a malformed request) or asked it for a method or version
            // it does not take: its doing, never the network's; the verdict stands.
            (
                &NetworkMode::Public,
                false,
                vec![contact("deb.debian.org", 443, ClientError, &[])],
                false,
                'C',
                "",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![contact("pypi.org", 80, Allowed, &[501, 505])],
                false,
                'C',
                "",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![contact("pypi.org", 80, Allowed, &[200, 503])],
                false,
                'I',
                "pypi.org:80",
            ),
            // A vouched failure wins over unvouched ones; the count names the others.
            (
                &NetworkMode::Public,
                false,
                vec![
                    contact("nowhere.invalid", 443, DnsFailed, &[]),
                    contact("pypi.org", 443, Timeout, &[]),
                    contact("astral.sh", 443, Timeout, &[]),
                ],
                false,
                'I',
                "fetch of pypi.org failed: pypi.org:443 (1 connection(s), timeout: cause), a known upstream of this worker (and 1 more failed fetch(es) of vouched hosts)",
            ),
            (
                &NetworkMode::Public,
                false,
                vec![
                    contact("nowhere.invalid", 443, DnsFailed, &[]),
                    contact("other.invalid", 8080, Denied, &[]),
                ],
                false,
                'S',
                "nowhere.invalid:443 (1 connection(s), dns_failed: cause) failed, host not declared by the task nor a known upstream (nor reached by an earlier grading of this task here); the fetch of other.invalid:8080",
            ),
        ];
        for (mode, use_seen, contacts, passing, kind, text) in cases {
            let v = Vouchers {
                declared: mode,
                known: &known,
                seen: if use_seen { &seen } else { &never },
            };
            let got = judge_grading_fetches(&contacts, passing, &v);
            let ok = match (&got, kind) {
                (GradingFetches::Clean, 'C') => true,
                (GradingFetches::Infrastructure(c), 'I') => c.contains(text),
                (GradingFetches::Stands(n), 'S') => c_starts(n) && n.contains(text),
                _ => false,
            };
            assert!(
                ok,
                "{contacts:?} passing={passing}: got {got:?}, want {kind} {text:?}"
            );
        }
    }

    fn c_starts(note: &str) -> bool {
        note.starts_with(NOT_COUNTED_NOTE)
    }

    #[test]
    fn an_infrastructure_cause_starts_as_reports_count_it() {
        let known = known_hosts(None).unwrap();
        let v = Vouchers {
            declared: &NetworkMode::Public,
            known: &known,
            seen: &|_, _| false,
        };
        let GradingFetches::Infrastructure(c) = judge_grading_fetches(
            &[contact("astral.sh", 443, Outcome::DnsFailed, &[])],
            false,
            &v,
        ) else {
            panic!()
        };
        assert!(c.starts_with(FETCH_FAILED_CAUSE), "{c}");
    }

    #[test]
    fn seen_upstreams_learn_successes_per_task_and_are_bounded() {
        let mut s = SeenUpstreams::default();
        s.learn(
            "t@1",
            &[
                contact("Up.test", 443, Outcome::Allowed, &[200]),
                contact("bad.test", 80, Outcome::Allowed, &[502]),
                contact("gone.test", 443, Outcome::DnsFailed, &[]),
                contact("no.test", 443, Outcome::Denied, &[]),
            ],
        );
        assert!(s.contains("t@1", "up.test", 443));
        assert!(!s.contains("t@1", "up.test", 8443));
        assert!(!s.contains("t@2", "up.test", 443));
        for h in ["bad.test", "gone.test", "no.test"] {
            assert!(
                !s.contains("t@1", h, 443) && !s.contains("t@1", h, 80),
                "{h}"
            );
        }
        for i in 0..(MAX_SEEN + 10) {
            s.learn(
                "t@1",
                &[contact(&format!("h{i}.test"), 443, Outcome::Allowed, &[])],
            );
        }
        assert_eq!(s.len(), MAX_SEEN);
        assert!(s.contains("t@1", "up.test", 443));
    }
}
