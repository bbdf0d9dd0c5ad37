//! The small helpers every command uses: a JSON document printed, a summary map as one
//! line, a stored run found (an unknown one is bad input), and the clock planning reads.
//! Layer: below every command module and `remote`; imports only `crate::exit` and other
//! crates.

/// The variable that fixes the instant a run is planned at (RFC 3339, e.g.
/// `2026-03-04T05:06:07Z`): run keys carry the planning date, so scripted replays and tests
/// that plan twice get keys that do not depend on when they ran (across UTC midnight).
pub const PLAN_TIME_ENV: &str = "AKBENCH_PLAN_TIME";

/// The clock planning reads: [`PLAN_TIME_ENV`] when set, else the system clock. A value that
/// is not an RFC 3339 instant is bad input (exit 2) naming the variable.
pub(crate) fn planning_clock() -> anyhow::Result<Box<dyn akbench_core::clock::Clock>> {
    match std::env::var(PLAN_TIME_ENV) {
        Ok(v) if !v.is_empty() => {
            let at = chrono::DateTime::parse_from_rfc3339(&v).map_err(|e| {
                crate::exit::InputError(format!(
                    "failed to read {PLAN_TIME_ENV}={v:?}: {e}; fix: give an RFC 3339 instant such as 2026-03-04T05:06:07Z, or unset it"
                ))
            })?;
            Ok(Box::new(akbench_core::clock::ManualClock::new(
                at.with_timezone(&chrono::Utc),
            )))
        }
        _ => Ok(Box::new(akbench_core::clock::SystemClock)),
    }
}

/// Finds a stored run; an unknown key or UUID is bad input (exit 2).
pub(crate) fn find_run(
    store: &akbench_core::evidence::EvidenceStore,
    run: &str,
) -> anyhow::Result<akbench_core::evidence::StoredRun> {
    use akbench_core::evidence::EvidenceError;
    store.find(run).map_err(|e| match e {
        EvidenceError::NotFound { .. } => crate::exit::InputError(e.to_string()).into(),
        other => anyhow::Error::new(other),
    })
}

/// Finds a stored run's spec and ready plan head (trials not read); an unknown key or UUID
/// is bad input (exit 2).
pub(crate) fn find_head(
    store: &akbench_core::evidence::EvidenceStore,
    run: &str,
) -> anyhow::Result<akbench_core::evidence::StoredHead> {
    use akbench_core::evidence::EvidenceError;
    store.find_head(run).map_err(|e| match e {
        EvidenceError::NotFound { .. } => crate::exit::InputError(e.to_string()).into(),
        other => anyhow::Error::new(other),
    })
}

/// Prints `value` as one JSON document.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Renders a summary map as `a=1 b=2`.
pub(crate) fn counts<K: std::fmt::Display, V: std::fmt::Display>(
    m: &std::collections::BTreeMap<K, V>,
) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
