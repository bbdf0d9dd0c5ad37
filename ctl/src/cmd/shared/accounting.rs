//! An accounting printed (`run reconcile`'s text and JSON and its exit code): the same for a
//! local run, a coordinator's (whole or streamed, `remote::reconcile`) and a Harbor import.

use crate::cmd::shared::common::print_json;
use akbench_core::accounting::{Bucket, ObservedSpend, RunAccounting, ALL_BUCKETS};
use akbench_core::rates::Pct;

/// Prints an accounting (with what the observations spent, when read from a file) and
/// returns the exit code (shared with remote mode and the Harbor import).
pub fn show(
    a: &RunAccounting,
    spent: Option<&ObservedSpend>,
    all: bool,
    json: bool,
) -> anyhow::Result<i32> {
    if json {
        match spent {
            Some(s) => {
                let mut v = serde_json::to_value(a)?;
                v["spend"] = serde_json::to_value(s)?;
                print_json(&v)?;
            }
            None => print_json(a)?,
        }
    } else {
        show_head(a, spent);
        // Without --all, list at most 20 missing or quarantined trials.
        let listed = a.trials.iter().filter(|t| all || is_unaccounted(t.bucket));
        for t in listed.take(if all { usize::MAX } else { LISTED }) {
            outln!("{}", trial_line(t));
        }
        show_more(a, all);
    }
    Ok(exit_code(a))
}

/// Missing or quarantined trials listed without --all.
pub const LISTED: usize = 20;

/// True for the buckets listed without --all.
pub fn is_unaccounted(b: Bucket) -> bool {
    matches!(b, Bucket::Missing | Bucket::Quarantined)
}

/// 0 when the accounting is valid, 1 when not.
pub fn exit_code(a: &RunAccounting) -> i32 {
    if a.valid {
        crate::exit::OK
    } else {
        crate::exit::NEGATIVE
    }
}

/// One listed trial.
pub fn trial_line(t: &akbench_core::accounting::AccountedTrial) -> String {
    let (o, b, id, k) = (t.ordinal, t.bucket.as_str(), t.trial_id, &t.key);
    format!("  {o:>6} {b:<21}{id} {k}")
}

/// Without --all, how many missing or quarantined trials were not listed.
pub fn show_more(a: &RunAccounting, all: bool) {
    let unaccounted = (a.counts.missing + a.counts.quarantined) as usize;
    let more = if all {
        0
    } else {
        unaccounted.saturating_sub(LISTED)
    };
    if more > 0 {
        outln!("  ... {more} more (use --all or --json)");
    }
}

/// The text before the listed trials: everything but `a.trials`.
pub fn show_head(a: &RunAccounting, spent: Option<&ObservedSpend>) {
    outln!("run        {} ({})", a.run_key, a.run_id);
    outln!(
        "accounting {} and {}",
        if a.valid { "valid" } else { "INVALID" },
        if a.complete { "complete" } else { "incomplete" }
    );
    outln!("planned    {}   observations {}", a.planned, a.observations);
    for b in ALL_BUCKETS {
        outln!("  {:<21}{}", b.as_str(), a.counts.get(b));
    }
    outln!(
        "pass rate  {} ({} graded)   coverage {}   infrastructure errors {}",
        Pct(a.rates.pass_rate),
        a.rates.graded,
        Pct(a.rates.coverage),
        Pct(a.rates.infrastructure_error_rate)
    );
    if let Some(s) = spent {
        outln!(
            "spend      {} ({} of {} observations without spend)",
            akbench_core::spend::fmt_spend(&s.spend),
            s.lines_without_spend,
            s.lines
        );
    }
    if let Some(c) = &a.candidates {
        outln!("{c}");
    }
    // Only a coordinator reconciling its own records knows the grades.
    if let Some(flagged) = &a.flagged {
        outln!("flagged    (core::grading::integrity)");
        for (agent, f) in flagged {
            outln!(
                "  {agent:<21}grading tampered {}, withheld paths {}, solved without tripwire {}",
                f.tampered,
                f.withheld,
                f.unguarded
            );
        }
    }
    let identical = a.duplicates.iter().filter(|d| d.identical).count();
    outln!(
        "duplicates {} identical (counted once), {} conflicting (quarantined)",
        identical,
        a.duplicates.len() - identical
    );
    outln!("unexpected {}", a.unexpected.len());
    for q in &a.quarantined {
        outln!(
            "  quarantined {} {} ({} observations)",
            q.trial_id,
            q.reason,
            q.observations.len()
        );
    }
}
