//! Every value range, in one table: each value a flag, an environment variable or a file
//! field gives (durations, counts, lengths) has one [`Range`] here (its name, where it is
//! given, its unit, its least and greatest value, and why), and every binary (`akbench`,
//! `akbench-worker`, `akbench-coordinator`) checks the value where it parses it through
//! that entry, so a value is refused the same way everywhere and never reaches a date, a
//! `Duration` or a database it would overflow. [`TABLE`] lists them all (the manifest's and
//! tasks' numeric ranges of [`crate::limits`] too); docs/limits.md ("Value ranges") shows
//! the same table, and a test keeps the two equal.

use std::fmt;

/// A bound of a range: a whole number or a real one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// A whole number (counts, milliseconds, bytes).
    Whole(u64),
    /// A real number (seconds).
    Real(f64),
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::Whole(n) => write!(f, "{n}"),
            Num::Real(x) => f.write_str(&crate::limits::show_f64(*x)),
        }
    }
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Whole(n) => n as f64,
            Num::Real(x) => x,
        }
    }
}

/// One value's range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// What the value is, e.g. `lease TTL`.
    pub name: &'static str,
    /// Where it is given: flags, environment variables, file fields, and which binaries.
    pub given_as: &'static str,
    /// Its unit (`ms`, `seconds`, `days`, `bytes`, ...).
    pub unit: &'static str,
    /// The least value accepted.
    pub min: Num,
    /// The greatest value accepted.
    pub max: Num,
    /// Why these bounds.
    pub why: &'static str,
}

/// A value outside its range, or text that is not a value of its kind: names the value (cut
/// short when long), the range with its unit, and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} {value} is outside {} to {} {} ({}); fix: give a value from {} to {} {}", .range.name, .range.min, .range.max, .range.unit, .range.why, .range.min, .range.max, .range.unit)]
pub struct OutOfRange {
    /// The value as given, with its unit (or the text, quoted, when it did not parse).
    pub value: String,
    /// Its range.
    pub range: Range,
}

impl Range {
    fn refuse(&self, value: String) -> OutOfRange {
        OutOfRange {
            value,
            range: *self,
        }
    }

    /// `v` when it is inside the range (a whole-number range).
    pub fn whole(&self, v: u64) -> Result<u64, OutOfRange> {
        match (self.min, self.max) {
            (Num::Whole(lo), Num::Whole(hi)) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(self.refuse(format!("{v} {}", self.unit))),
        }
    }

    /// `v` cut to the range (a whole-number range): for values built by hand rather than
    /// parsed, so they never overflow what they are used in.
    pub fn clamp(&self, v: u64) -> u64 {
        match (self.min, self.max) {
            (Num::Whole(lo), Num::Whole(hi)) => v.clamp(lo, hi),
            _ => v,
        }
    }

    /// `v` when it is a finite number inside the range.
    pub fn real(&self, v: f64) -> Result<f64, OutOfRange> {
        let (lo, hi) = (self.min.as_f64(), self.max.as_f64());
        if v.is_finite() && (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(self.refuse(format!("{} {}", crate::limits::show_f64(v), self.unit)))
        }
    }

    /// `s` when its length in bytes is inside the range (a `bytes` range).
    pub fn length<'a>(&self, s: &'a str) -> Result<&'a str, OutOfRange> {
        self.whole(s.len() as u64)
            .map(|_| s)
            .map_err(|e| OutOfRange {
                value: format!("`{}`: {}", crate::limits::elide(s), e.value),
                ..e
            })
    }

    /// Parses a whole number (a flag's text) and checks it.
    pub fn parse_whole(&self, text: &str) -> Result<u64, OutOfRange> {
        match text.trim().parse::<u64>() {
            Ok(v) => self.whole(v),
            Err(_) => Err(self.refuse(format!(
                "`{}`, not a whole number,",
                crate::limits::elide(text)
            ))),
        }
    }

    /// Parses a number (a flag's text) and checks it.
    pub fn parse_real(&self, text: &str) -> Result<f64, OutOfRange> {
        match text.trim().parse::<f64>() {
            Ok(v) => self.real(v),
            Err(_) => Err(self.refuse(format!("`{}`, not a number,", crate::limits::elide(text)))),
        }
    }
}

use crate::limits;

/// The lease TTL of a coordinator: how long a lease lives without a heartbeat.
pub const LEASE_TTL_MS: Range = Range {
    name: "lease TTL",
    given_as: "`--lease-ttl-ms` / `AKBENCH_LEASE_TTL_MS` (akbench-coordinator), `--lease-ttl-ms` (akbench sweep, up)",
    unit: "ms",
    min: Num::Whole(1_000),
    max: Num::Whole(86_400_000),
    why: "below a second a worker's heartbeats cannot keep its leases on a loaded host; above a day a silent worker's attempts wait more than a day to be rescued",
};

/// The time running attempts get to finish once a worker drains.
pub const DRAIN_GRACE_SEC: Range = Range {
    name: "drain grace",
    given_as: "`--grace` (akbench-worker)",
    unit: "seconds",
    min: Num::Real(0.0),
    max: Num::Real(limits::MAX_TIMEOUT_SEC),
    why: "0 cancels at once; at most the longest agent timeout, a week",
};

/// How long a worker lets an agent run on after its model provider failed.
pub const PROVIDER_GRACE_SEC: Range = Range {
    name: "provider grace",
    given_as: "`AKBENCH_PROVIDER_GRACE_SEC` (akbench-worker, akbench run single; default 20)",
    unit: "seconds",
    min: Num::Real(0.0),
    max: Num::Real(300.0),
    why: "an agent whose provider stays down longer only wastes its slot",
};

/// How long `akbench certs` makes server and worker certificates valid.
pub const CERT_DAYS: Range = Range {
    name: "certificate validity",
    given_as: "`--days` (akbench certs)",
    unit: "days",
    min: Num::Whole(1),
    max: Num::Whole(3_650),
    why: "development certificates: ten years at most, far inside the dates a certificate can hold",
};

/// A coordinator name a server certificate is made for.
pub const SERVER_NAME_BYTES: Range = Range {
    name: "server name",
    given_as: "`--server-name` (akbench certs)",
    unit: "bytes",
    min: Num::Whole(1),
    max: Num::Whole(253),
    why: "a DNS name is at most 253 bytes; an IP address is shorter",
};

/// A worker's identity.
pub const WORKER_ID_BYTES: Range = Range {
    name: "worker id",
    given_as: "`--worker-id` (akbench-worker), the id a worker sends the coordinator",
    unit: "bytes",
    min: Num::Whole(1),
    max: Num::Whole(crate::identity::MAX_WORKER_ID_BYTES as u64),
    why: "the coordinator refuses a longer id in every session, so a worker would retry forever",
};

/// The time limit of building a task's image (`akbench image build`).
pub const BUILD_TIMEOUT_SEC: Range = Range {
    name: "image build time limit",
    given_as: "`environment.build_timeout_sec` (task.toml)",
    unit: "seconds",
    min: Num::Real(1.0),
    max: Num::Real(limits::MAX_TIMEOUT_SEC),
    why: "no builder starts in less than a second; at most a week",
};

/// A task's version.
pub const TASK_VERSION_BYTES: Range = Range {
    name: "task version",
    given_as: "`version` (task.toml)",
    unit: "bytes",
    min: Num::Whole(1),
    max: Num::Whole(128),
    why: "it is part of the task's release in keys, records and file names; one line of printable text",
};

/// One folder name of a task's `environment.workdir`.
pub const WORKDIR_COMPONENT_BYTES: Range = Range {
    name: "workdir folder name",
    given_as: "each folder name of `environment.workdir` (task.toml)",
    unit: "bytes",
    min: Num::Whole(1),
    max: Num::Whole(255),
    why: "Linux file systems refuse a longer name (NAME_MAX)",
};

/// `compute.memory_mb`.
pub const MEMORY_MB: Range = Range {
    name: "trial memory",
    given_as: "`compute.memory_mb` (manifest)",
    unit: "MiB",
    min: Num::Whole(limits::MIN_MEMORY_MB),
    max: Num::Whole(limits::MAX_MEMORY_MB),
    why: "at least what a sandboxed shell and git need to start; 16 TiB keeps the bytes inside the i64 cgroups are written with",
};

/// `compute.cpus`.
pub const CPUS: Range = Range {
    name: "trial CPUs",
    given_as: "`compute.cpus` (manifest)",
    unit: "CPUs",
    min: Num::Whole(1),
    max: Num::Whole(limits::MAX_CPUS as u64),
    why: "the largest plausible host",
};

/// Agent and evaluation timeouts.
pub const TIMEOUT_SEC: Range = Range {
    name: "agent or evaluation timeout",
    given_as: "`compute.agent_timeout_sec`, `compute.verifier_timeout_sec` (manifest), `agent.timeout_sec`, `verifier.timeout_sec` (task.toml), `--agent-timeout` (akbench run single)",
    unit: "seconds",
    min: Num::Real(0.001),
    max: Num::Real(limits::MAX_TIMEOUT_SEC),
    why: "a shorter limit cannot be enforced; a week at most",
};

/// Concurrency caps.
pub const CONCURRENCY: Range = Range {
    name: "trials at once",
    given_as: "`execution.concurrency.*` (manifest), `--jobs`, `--slots` (akbench sweep, up)",
    unit: "trials",
    min: Num::Whole(1),
    max: Num::Whole(limits::MAX_CONCURRENCY),
    why: "0 would never start a trial",
};

/// Local workers.
pub const WORKERS: Range = Range {
    name: "local workers",
    given_as: "`--workers` (akbench sweep, up)",
    unit: "workers",
    min: Num::Whole(1),
    max: Num::Whole(limits::MAX_WORKERS),
    why: "0 would never start a trial; each worker is a process with its own slots",
};

/// Infrastructure retries.
pub const RETRIES: Range = Range {
    name: "infrastructure retries",
    given_as: "`execution.infrastructure_retries` (manifest), `--infrastructure-retries` (akbench run single)",
    unit: "retries",
    min: Num::Whole(0),
    max: Num::Whole(limits::MAX_RETRIES as u64),
    why: "a trial that fails more often is broken, not unlucky",
};

/// Every range, in the order docs/limits.md lists them.
pub const TABLE: &[Range] = &[
    LEASE_TTL_MS,
    DRAIN_GRACE_SEC,
    PROVIDER_GRACE_SEC,
    CERT_DAYS,
    SERVER_NAME_BYTES,
    WORKER_ID_BYTES,
    BUILD_TIMEOUT_SEC,
    TASK_VERSION_BYTES,
    WORKDIR_COMPONENT_BYTES,
    MEMORY_MB,
    CPUS,
    TIMEOUT_SEC,
    CONCURRENCY,
    WORKERS,
    RETRIES,
];

/// A worker id, checked as the coordinator checks it ([`crate::ids::check_client_id`]):
/// [`WORKER_ID_BYTES`] long, printable ASCII without spaces.
pub fn worker_id(s: &str) -> Result<&str, String> {
    WORKER_ID_BYTES.length(s).map_err(|e| e.to_string())?;
    crate::ids::check_client_id(s).map_err(|why| {
        format!(
            "`{}` {why}; fix: give an id of letters, digits and `-._`",
            crate::limits::elide(s)
        )
    })?;
    Ok(s)
}

/// A server name for a certificate: [`SERVER_NAME_BYTES`] long, an IP address or a DNS name
/// (letters, digits, `-`, `_`, `.`, a leading `*.` for a wildcard).
pub fn server_name(s: &str) -> Result<&str, String> {
    SERVER_NAME_BYTES.length(s).map_err(|e| e.to_string())?;
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Ok(s);
    }
    let name = s.strip_prefix("*.").unwrap_or(s);
    let ok = !name.is_empty()
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if ok {
        Ok(s)
    } else {
        Err(format!(
            "`{}` is neither an IP address nor a DNS name (labels of 1 to 63 letters, digits, `-` or `_`, joined by `.`); fix: give the host name or address workers dial",
            crate::limits::elide(s)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_range_accepts_its_bounds_and_refuses_beyond_them_naming_the_unit_and_fix() {
        for r in TABLE {
            match (r.min, r.max) {
                (Num::Whole(lo), Num::Whole(hi)) => {
                    assert!(lo <= hi, "{}", r.name);
                    assert_eq!(r.whole(lo), Ok(lo), "{}", r.name);
                    assert_eq!(r.whole(hi), Ok(hi), "{}", r.name);
                    let mut bad = vec![u64::MAX];
                    if hi < u64::MAX {
                        bad.push(hi + 1);
                    }
                    if lo > 0 {
                        bad.push(lo - 1);
                    }
                    for v in bad {
                        let e = r.whole(v).unwrap_err().to_string();
                        assert!(
                            e.starts_with(&format!("{} {v} {}", r.name, r.unit))
                                && e.contains(&format!("{lo} to {hi} {}", r.unit))
                                && e.contains("fix:"),
                            "{e}"
                        );
                    }
                }
                (Num::Real(lo), Num::Real(hi)) => {
                    assert!(lo <= hi, "{}", r.name);
                    assert_eq!(r.real(lo), Ok(lo));
                    assert_eq!(r.real(hi), Ok(hi));
                    for v in [f64::NAN, f64::INFINITY, -1.0, 1e20, hi * 2.0 + 1.0] {
                        let e = r.real(v).unwrap_err().to_string();
                        assert!(e.contains(r.unit) && e.contains("fix:"), "{e}");
                    }
                }
                _ => panic!("{}: mixed bounds", r.name),
            }
            assert!(!r.why.is_empty() && r.given_as.contains('`'), "{}", r.name);
        }
    }

    #[test]
    fn the_reported_inputs_are_refused() {
        // (range, text, accepted)
        let cases: &[(Range, &str, bool)] = &[
            (LEASE_TTL_MS, "18446744073709551615", false),
            (LEASE_TTL_MS, "0", false),
            (LEASE_TTL_MS, "999", false),
            (LEASE_TTL_MS, "30000", true),
            (LEASE_TTL_MS, "-1", false),
            (LEASE_TTL_MS, "soon", false),
            (CERT_DAYS, "100000000", false),
            (CERT_DAYS, "0", false),
            (CERT_DAYS, "90", true),
            (DRAIN_GRACE_SEC, "1e20", false),
            (DRAIN_GRACE_SEC, "NaN", false),
            (DRAIN_GRACE_SEC, "-0.5", false),
            (DRAIN_GRACE_SEC, "0", true),
            (DRAIN_GRACE_SEC, "60", true),
            (BUILD_TIMEOUT_SEC, "0.001", false),
            (BUILD_TIMEOUT_SEC, "600", true),
        ];
        for (r, text, ok) in cases {
            let got = match r.min {
                Num::Whole(_) => r.parse_whole(text).map(|_| ()),
                Num::Real(_) => r.parse_real(text).map(|_| ()),
            };
            assert_eq!(got.is_ok(), *ok, "{} {text}: {got:?}", r.name);
            if let Err(e) = got {
                let e = e.to_string();
                assert!(
                    e.len() < 400 && e.contains(" to ") && e.contains("fix:"),
                    "{e}"
                );
            }
        }
        // Whatever is accepted fits a Duration, a date and a signed millisecond count.
        assert!(i64::try_from(86_400_000u64).is_ok());
        let grace = DRAIN_GRACE_SEC.parse_real("604800").unwrap();
        let _ = std::time::Duration::from_secs_f64(grace);
        let days = CERT_DAYS.parse_whole("3650").unwrap();
        assert!(std::time::SystemTime::now()
            .checked_add(std::time::Duration::from_secs(days * 86_400))
            .is_some());
    }

    #[test]
    fn worker_ids_and_server_names_are_bounded_and_printable() {
        assert_eq!(worker_id("w-1"), Ok("w-1"));
        let long = "w".repeat(10_000);
        let e = worker_id(&long).unwrap_err();
        assert!(
            e.contains("10000 bytes") && e.contains("1 to 200 bytes"),
            "{e}"
        );
        assert!(e.len() < 600, "{e}");
        assert!(worker_id("").unwrap_err().contains("0 bytes"));
        assert!(worker_id("a b").unwrap_err().contains("0x20"));
        for ok in [
            "coordinator",
            "c1.example.com",
            "127.0.0.1",
            "::1",
            "*.svc.local",
        ] {
            assert_eq!(server_name(ok), Ok(ok));
        }
        for bad in ["", "a b", "a..b", "-x\n", &"x".repeat(10_000)] {
            let e = server_name(bad).unwrap_err();
            assert!(e.contains("fix:") && e.len() < 600, "{e}");
        }
        assert!(server_name(&"x".repeat(10_000))
            .unwrap_err()
            .contains("1 to 253 bytes"));
    }

    #[test]
    fn the_table_agrees_with_the_checks_of_limits() {
        assert_eq!(MEMORY_MB.whole(63).is_ok(), limits::memory_mb(63).is_ok());
        assert_eq!(CPUS.whole(1025).is_ok(), limits::cpus(1025).is_ok());
        assert_eq!(WORKERS.whole(256).is_ok(), limits::workers(256).is_ok());
        assert_eq!(RETRIES.whole(11).is_ok(), limits::retries(11).is_ok());
        assert_eq!(CONCURRENCY.whole(0).is_ok(), limits::concurrency(0).is_ok());
        for v in [0.0005, 0.001, 604_800.0, 604_801.0] {
            assert_eq!(TIMEOUT_SEC.real(v).is_ok(), limits::timeout_sec(v).is_ok());
        }
    }

    #[test]
    fn docs_limits_lists_every_range() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/limits.md"))
                .expect("docs/limits.md");
        let section = doc
            .split("## Value ranges")
            .nth(1)
            .expect("a `## Value ranges` section")
            .split("\n## ")
            .next()
            .unwrap_or_default();
        for r in TABLE {
            let row = section
                .lines()
                .find(|l| l.starts_with(&format!("| {} |", r.name)))
                .unwrap_or_else(|| panic!("no row for `{}` in docs/limits.md", r.name));
            let cells = [
                r.unit.to_string(),
                r.min.to_string(),
                r.max.to_string(),
                r.why.to_string(),
            ];
            for cell in cells {
                assert!(
                    row.contains(&format!("| {cell} |")),
                    "docs/limits.md row `{}` lacks `{cell}`: {row}",
                    r.name
                );
            }
        }
    }
}
