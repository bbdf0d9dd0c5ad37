//! `akbench run reconcile`: typed outcomes against a stored run's plan, and what the
//! observation lines say the planned trials spent (`spend`, e.g. from a Harbor import).
//! Exit 0 when the accounting is valid, 1 when invalid, 2 for a malformed observations file.

use crate::cli::ReconcileArgs;
use crate::cmd::{find_run, print_json};
use akbench_core::accounting::{
    load_lines, observed_spend, reconcile, Bucket, ObservedSpend, RunAccounting, ALL_BUCKETS,
};
use akbench_core::evidence::EvidenceStore;
use akbench_core::rates::Pct;

/// Reconciles a run.
pub fn run(args: ReconcileArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let r = find_run(&store, &args.run)?;
    let Some(plan) = r.ready.as_ref() else {
        return Err(crate::exit::InputError(format!(
            "failed to reconcile run {}: it has no ready plan; fix: plan it with `akbench run plan`",
            r.spec.run_key()
        ))
        .into());
    };
    let Some(path) = args.observations.as_ref() else {
        return Err(crate::exit::InputError(
            "failed to reconcile: --observations FILE is required locally; fix: pass the \
             observations file, or reconcile the coordinator's own records with --coordinator URL"
                .into(),
        )
        .into());
    };
    let lines = load_lines(path)?;
    let observations: Vec<_> = lines.iter().map(|l| l.observation.clone()).collect();
    let a = reconcile(plan, &observations);
    let planned = plan.trials.iter().map(|t| t.trial_id).collect();
    let spent = observed_spend(&planned, &lines);
    show(&a, Some(&spent), args.all, args.store.json)
}

/// Prints an accounting (with what the observations spent, when read from a file) and
/// returns the exit code (shared with remote mode and the Harbor import).
pub(crate) fn show(
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
        println!("run        {} ({})", a.run_key, a.run_id);
        println!(
            "accounting {} and {}",
            if a.valid { "valid" } else { "INVALID" },
            if a.complete { "complete" } else { "incomplete" }
        );
        println!("planned    {}   observations {}", a.planned, a.observations);
        for b in ALL_BUCKETS {
            println!("  {:<21}{}", b.as_str(), a.counts.get(b));
        }
        println!(
            "pass rate  {} ({} graded)   coverage {}   infrastructure errors {}",
            Pct(a.rates.pass_rate),
            a.rates.graded,
            Pct(a.rates.coverage),
            Pct(a.rates.infrastructure_error_rate)
        );
        if let Some(s) = spent {
            println!(
                "spend      {} ({} of {} observations without spend)",
                akbench_core::spend::fmt_spend(&s.spend),
                s.lines_without_spend,
                s.lines
            );
        }
        if let Some(c) = &a.candidates {
            println!("{c}");
        }
        // Only a coordinator reconciling its own records knows the grades.
        if let Some(flagged) = &a.flagged {
            println!("flagged    (core::grading::integrity)");
            for (agent, f) in flagged {
                println!(
                    "  {agent:<21}grading tampered {}, withheld paths {}",
                    f.tampered, f.withheld
                );
            }
        }
        let identical = a.duplicates.iter().filter(|d| d.identical).count();
        println!(
            "duplicates {} identical (counted once), {} conflicting (quarantined)",
            identical,
            a.duplicates.len() - identical
        );
        println!("unexpected {}", a.unexpected.len());
        for q in &a.quarantined {
            println!(
                "  quarantined {} {} ({} observations)",
                q.trial_id,
                q.reason,
                q.observations.len()
            );
        }
        // Without --all, list at most 20 missing or quarantined trials.
        let mut more = 0usize;
        let listed = a
            .trials
            .iter()
            .filter(|t| all || matches!(t.bucket, Bucket::Missing | Bucket::Quarantined));
        for (n, t) in listed.enumerate() {
            if all || n < 20 {
                let (o, b, id, k) = (t.ordinal, t.bucket.as_str(), t.trial_id, &t.key);
                println!("  {o:>6} {b:<21}{id} {k}");
            } else {
                more += 1;
            }
        }
        if more > 0 {
            println!("  ... {more} more (use --all or --json)");
        }
    }
    Ok(if a.valid {
        crate::exit::OK
    } else {
        crate::exit::NEGATIVE
    })
}
