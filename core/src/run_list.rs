//! `run list`: one row per run and the filters over them (experiment, state, since), pure.
//! The CLI builds rows from the local evidence store or a coordinator's `ListRuns`.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One run as `run list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    /// Run key.
    pub key: String,
    /// Run UUID.
    pub run_id: Uuid,
    /// Experiment name.
    pub experiment: String,
    /// State (local: resolved, draft, ready, running, finished, interrupted; coordinator: planned,
    /// running, cancelling, cancelled, finished).
    pub state: String,
    /// Planned trials.
    pub trials: u64,
    /// Settled trials: with an outcome, or cancelled without running (a spent budget, a
    /// cancelled run); `None` when unknown (a local run never executed here).
    pub finished: Option<u64>,
    /// When the run was created.
    pub created_at: DateTime<Utc>,
}

/// Which rows to keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Exact experiment name.
    pub experiment: Option<String>,
    /// Exact state name.
    pub state: Option<String>,
    /// Created at or after.
    pub since: Option<DateTime<Utc>>,
}

impl Filter {
    /// True when `row` passes every filter given.
    pub fn keep(&self, row: &RunRow) -> bool {
        self.experiment
            .as_ref()
            .is_none_or(|e| *e == row.experiment)
            && self.state.as_ref().is_none_or(|s| *s == row.state)
            && self.since.is_none_or(|t| row.created_at >= t)
    }
}

/// Every state a run can be in: the local store's (resolved, draft, ready, running while a
/// sweep executes it, finished, interrupted) and a coordinator's (planned, running,
/// cancelling, cancelled, finished).
pub const RUN_STATES: [&str; 9] = [
    "resolved",
    "draft",
    "ready",
    "finished",
    "interrupted",
    "planned",
    "running",
    "cancelling",
    "cancelled",
];

/// Parses `--state`: one of [`RUN_STATES`]; anything else names the valid states (a typo
/// must not list nothing and exit 0).
pub fn parse_state(text: &str) -> Result<String, String> {
    if RUN_STATES.contains(&text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{}` is not a run state; use one of {}",
            crate::limits::elide(text),
            RUN_STATES.join(", ")
        ))
    }
}

/// Parses `--since`: an RFC 3339 instant (`2026-11-30T12:00:00Z`), a date (`2026-11-30`,
/// midnight UTC) or an age before `now` (`90m`, `24h`, `7d`, `2w`).
pub fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let t = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(t) {
        return Ok(at.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    let bad = || {
        format!(
            "`{text}` is not a time; fix: give an RFC 3339 instant (2026-11-30T12:00:00Z), a date (2026-11-30) or an age (90m, 24h, 7d, 2w)"
        )
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = t.split_at(split);
    let n: i64 = n.parse().map_err(|_| bad())?;
    let age = match unit {
        "m" => Duration::try_minutes(n),
        "h" => Duration::try_hours(n),
        "d" => Duration::try_days(n),
        "w" => Duration::try_weeks(n),
        _ => None,
    }
    .ok_or_else(bad)?;
    now.checked_sub_signed(age).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_known_or_refused_with_the_list() {
        for s in RUN_STATES {
            assert_eq!(parse_state(s).unwrap(), s);
        }
        for bad in ["exploded", "", "Finished", "finished "] {
            let e = parse_state(bad).unwrap_err();
            assert!(e.contains("resolved") && e.contains("cancelled"), "{e}");
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn since_forms() {
        let now = at("2026-11-30T21:00:00Z");
        let table = [
            ("2026-11-29T08:30:00Z", Some("2026-11-29T08:30:00Z")),
            ("2026-11-29T09:30:00+01:00", Some("2026-11-29T08:30:00Z")),
            ("2026-11-01", Some("2026-11-01T00:00:00Z")),
            ("90m", Some("2026-11-30T19:30:00Z")),
            ("24h", Some("2026-11-29T21:00:00Z")),
            ("7d", Some("2026-11-23T21:00:00Z")),
            ("2w", Some("2026-11-16T21:00:00Z")),
            ("7", None),
            ("7y", None),
            ("yesterday", None),
            ("", None),
        ];
        for (text, want) in table {
            let got = parse_since(text, now).ok();
            assert_eq!(got, want.map(at), "{text}");
        }
        assert!(parse_since("x", now).unwrap_err().contains("fix:"));
    }

    #[test]
    fn filters() {
        let row = RunRow {
            key: "ex-20261130-ab12".into(),
            run_id: Uuid::nil(),
            experiment: "ex".into(),
            state: "finished".into(),
            trials: 4,
            finished: Some(4),
            created_at: at("2026-11-30T10:00:00Z"),
        };
        let f = |e: Option<&str>, s: Option<&str>, t: Option<&str>| Filter {
            experiment: e.map(str::to_string),
            state: s.map(str::to_string),
            since: t.map(at),
        };
        let table = [
            (f(None, None, None), true),
            (f(Some("ex"), None, None), true),
            (f(Some("e"), None, None), false),
            (f(None, Some("finished"), None), true),
            (f(None, Some("ready"), None), false),
            (f(None, None, Some("2026-11-30T10:00:00Z")), true),
            (f(None, None, Some("2026-11-30T10:00:01Z")), false),
            (
                f(Some("ex"), Some("finished"), Some("2026-11-01T00:00:00Z")),
                true,
            ),
        ];
        for (filter, want) in table {
            assert_eq!(filter.keep(&row), want, "{filter:?}");
        }
    }
}
