//! The range of every numeric input, in one place: manifest fields (`compute.*`,
//! `execution.*`), task timeouts and the CLI's flags and their environment variables all
//! check their value here, where it is parsed, so a value that passes load never fails at
//! run time for being out of range. Each check returns the value or a problem that names the
//! value with its unit and the accepted range (callers add the field or flag name).
//! docs/manifest.md, docs/tasks.md and README.md list the same ranges.

/// Least `compute.memory_mb`, MiB: below it a sandboxed shell and git cannot start.
pub const MIN_MEMORY_MB: u64 = 64;
/// Most `compute.memory_mb`, MiB (16 TiB): far above any host, and `mb * 1024 * 1024`
/// bytes stays well inside the `i64` cgroups are written with.
pub const MAX_MEMORY_MB: u64 = 16 * 1024 * 1024;
/// Most `compute.cpus` per trial: the largest plausible host.
pub const MAX_CPUS: u32 = 1024;
/// Longest agent or evaluation timeout, seconds (a week).
pub const MAX_TIMEOUT_SEC: f64 = 7.0 * 86400.0;
/// Most trials running at once under one cap (`execution.concurrency.*`, `sweep --jobs`).
pub const MAX_CONCURRENCY: u64 = 100_000;
/// Most local workers `sweep` / `up` start (`--workers`).
pub const MAX_WORKERS: u64 = 256;
/// Most infrastructure retries per trial (the manifest, `run single
/// --infrastructure-retries`), the same as [`crate::dispatch::MAX_INFRASTRUCTURE_RETRIES`].
pub const MAX_RETRIES: u32 = crate::dispatch::MAX_INFRASTRUCTURE_RETRIES;

/// A number in a message: plain when short, else in scientific notation (`1e-300`, never a
/// 300-digit expansion).
pub fn show_f64(v: f64) -> String {
    let plain = format!("{v}");
    if plain.len() <= 20 {
        plain
    } else {
        format!("{v:e}")
    }
}

/// `compute.memory_mb`: [`MIN_MEMORY_MB`]..=[`MAX_MEMORY_MB`] MiB.
pub fn memory_mb(v: u64) -> Result<u64, String> {
    if (MIN_MEMORY_MB..=MAX_MEMORY_MB).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{v} MiB is outside {MIN_MEMORY_MB} to {MAX_MEMORY_MB} MiB (at least what a process needs to start, at most 16 TiB)"
        ))
    }
}

/// `compute.cpus`: 1..=[`MAX_CPUS`] CPUs.
pub fn cpus(v: u64) -> Result<u32, String> {
    match u32::try_from(v) {
        Ok(n) if (1..=MAX_CPUS).contains(&n) => Ok(n),
        _ => Err(format!("{v} CPUs is outside 1 to {MAX_CPUS} CPUs")),
    }
}

/// A timeout: a finite number of seconds above 0 and at most [`MAX_TIMEOUT_SEC`].
pub fn timeout_sec(v: f64) -> Result<f64, String> {
    // The least usable timeout is a millisecond: a shorter one cannot be enforced.
    if v.is_finite() && (0.001..=MAX_TIMEOUT_SEC).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{} seconds is outside 0.001 to {} seconds (a week)",
            show_f64(v),
            MAX_TIMEOUT_SEC
        ))
    }
}

/// A concurrency cap (`execution.concurrency.*`, `sweep --jobs`): 1..=[`MAX_CONCURRENCY`]
/// trials; 0 would leave trials queued forever.
pub fn concurrency(v: u64) -> Result<u64, String> {
    if (1..=MAX_CONCURRENCY).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{v} trials at once is outside 1 to {MAX_CONCURRENCY} (0 would never start a trial)"
        ))
    }
}

/// Infrastructure retries per trial: 0..=[`MAX_RETRIES`].
pub fn retries(v: u64) -> Result<u32, String> {
    crate::dispatch::check_retries(v)
        .map_err(|_| format!("{v} retries is outside 0 to {MAX_RETRIES} retries"))
}

/// Local workers (`--workers`): 1..=[`MAX_WORKERS`].
pub fn workers(v: u64) -> Result<usize, String> {
    if (1..=MAX_WORKERS).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("{v} workers is outside 1 to {MAX_WORKERS} workers"))
    }
}

/// Parses a whole number for a flag, naming the text when it is not one.
pub fn parse_whole(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .map_err(|_| format!("`{}` is not a whole number", crate::limits::elide(text)))
}

/// Parses a number of seconds for a flag.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{}` is not a number of seconds", elide(text)))?;
    timeout_sec(v)
}

/// The most characters of a value a message repeats.
pub const ELIDE_AT: usize = 200;

/// `s` when short, else its first [`ELIDE_AT`] characters and `... (N bytes)`.
pub fn elide(s: &str) -> String {
    match s.char_indices().nth(ELIDE_AT) {
        None => s.to_string(),
        Some((i, _)) => format!("{}... ({} bytes)", &s[..i], s.len()),
    }
}

/// Each line of `s` through [`elide`]: a parser's message keeps its shape (position,
/// caret, expectation) while a long input line it quotes is cut.
pub fn elide_lines(s: &str) -> String {
    s.lines().map(elide).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_what_a_process_needs_and_cgroups_hold() {
        for (v, ok) in [
            (0, false),
            (1, false),
            (63, false),
            (64, true),
            (2048, true),
            (MAX_MEMORY_MB, true),
            (MAX_MEMORY_MB + 1, false),
            (17_592_186_044_416, false),
            (u64::MAX, false),
        ] {
            let r = memory_mb(v);
            assert_eq!(r.is_ok(), ok, "{v}: {r:?}");
            if let Err(e) = r {
                assert!(e.contains("MiB") && e.contains(&v.to_string()), "{e}");
            }
        }
        // Bytes of the largest accepted value fit in the i64 cgroups are written with.
        assert!(i64::try_from(MAX_MEMORY_MB * 1024 * 1024).is_ok());
    }

    #[test]
    fn cpus_workers_caps_and_retries_have_ranges() {
        type Check = fn(u64) -> Result<u64, String>;
        let cases: [(&str, Check, u64, bool); 18] = [
            ("cpus", |v| cpus(v).map(u64::from), 0, false),
            ("cpus", |v| cpus(v).map(u64::from), 1, true),
            ("cpus", |v| cpus(v).map(u64::from), 1024, true),
            ("cpus", |v| cpus(v).map(u64::from), 1025, false),
            ("cpus", |v| cpus(v).map(u64::from), 1_000_000_000, false),
            ("cap", concurrency, 0, false),
            ("cap", concurrency, 1, true),
            ("cap", concurrency, MAX_CONCURRENCY, true),
            ("cap", concurrency, MAX_CONCURRENCY + 1, false),
            ("retries", |v| retries(v).map(u64::from), 0, true),
            ("retries", |v| retries(v).map(u64::from), 10, true),
            ("retries", |v| retries(v).map(u64::from), 11, false),
            (
                "retries",
                |v| retries(v).map(u64::from),
                1_000_000_000,
                false,
            ),
            ("retries", |v| retries(v).map(u64::from), u64::MAX, false),
            ("workers", |v| workers(v).map(|n| n as u64), 0, false),
            ("workers", |v| workers(v).map(|n| n as u64), 1, true),
            ("workers", |v| workers(v).map(|n| n as u64), 256, true),
            (
                "workers",
                |v| workers(v).map(|n| n as u64),
                1_000_000_000,
                false,
            ),
        ];
        for (what, check, v, ok) in cases {
            let r = check(v);
            assert_eq!(r.is_ok(), ok, "{what} {v}: {r:?}");
            if let Ok(n) = r {
                assert_eq!(n, v);
            } else if let Err(e) = r {
                assert!(e.contains(&v.to_string()) && e.contains(" to "), "{e}");
            }
        }
    }

    #[test]
    fn timeouts_are_positive_finite_and_at_most_a_week() {
        for (v, ok) in [
            (0.0, false),
            (-1.0, false),
            (1e-300, false),
            (f64::NAN, false),
            (f64::INFINITY, false),
            (0.001, true),
            (600.0, true),
            (604_800.0, true),
            (604_800.5, false),
            (1e300, false),
        ] {
            let r = timeout_sec(v);
            assert_eq!(r.is_ok(), ok, "{v}: {r:?}");
            if let Err(e) = r {
                assert!(e.len() < 120 && e.contains("seconds"), "{e}");
            }
        }
        assert!(timeout_sec(1e-300)
            .unwrap_err()
            .starts_with("1e-300 seconds"));
        assert!(parse_seconds("1e-300").unwrap_err().contains("1e-300"));
        assert!(parse_seconds("soon").unwrap_err().contains("`soon`"));
        assert_eq!(parse_seconds("30").unwrap(), 30.0);
    }

    #[test]
    fn long_values_are_elided() {
        assert_eq!(elide("short"), "short");
        let long = "x".repeat(1_000_000);
        let e = elide(&long);
        assert!(e.len() < 300 && e.ends_with("... (1000000 bytes)"), "{e}");
        let multi = "é".repeat(300);
        assert!(elide(&multi).ends_with("(600 bytes)"));
        let msg = format!("error at line 1\n1 | {long}\n  | ^ expected `=`");
        let e = elide_lines(&msg);
        assert!(e.len() < 500 && e.ends_with("^ expected `=`"), "{e}");
        assert_eq!(parse_whole("12").unwrap(), 12);
        assert!(parse_whole("-1").is_err());
    }
}
