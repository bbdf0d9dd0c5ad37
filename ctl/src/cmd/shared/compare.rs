//! Two loaded runs checked for comparability and compared (`run compare`, `run report
//! --compare` and the viewer's compare page over a folder): the statistics are
//! `akbench_core::compare`'s, methods in docs/compare.md.

use crate::cli::CompareArgs;
use crate::exit::InputError;
use akbench_core::compare::{
    blocking_changes, compare, diff_flat, AgentPairing, Comparison, Options,
};
use akbench_core::spec_diff::{diff, Change, SpecDiff};
use serde_json::{json, Value};
use std::collections::BTreeMap;

use super::source::LoadedRun;

/// What was checked before comparing.
#[derive(Debug)]
pub struct Checked {
    /// `spec` (both specs at hand) or `records` (the task releases and evaluation that the
    /// records state).
    pub by: &'static str,
    /// Every difference found.
    pub diff: SpecDiff,
    /// The ones that make the runs incomparable.
    pub blocking: Vec<Change>,
}

/// How to compare (from `run compare`'s or `run report --compare`'s flags).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Left agent label to compare.
    pub left_agent: Option<String>,
    /// Right agent label to compare.
    pub right_agent: Option<String>,
    /// Compare even when the conditions differ.
    pub allow_different: bool,
    /// Bootstrap seed.
    pub seed: u64,
    /// Bootstrap resamples.
    pub resamples: u32,
}

impl From<&CompareArgs> for Settings {
    fn from(a: &CompareArgs) -> Settings {
        Settings {
            left_agent: a.left_agent.clone(),
            right_agent: a.right_agent.clone(),
            allow_different: a.allow_different,
            seed: a.seed,
            resamples: a.resamples,
        }
    }
}

/// Checks comparability and computes the comparison.
pub fn compute(
    left: &LoadedRun,
    right: &LoadedRun,
    args: &Settings,
) -> anyhow::Result<(Checked, Comparison)> {
    let checked = check(left, right);
    if !checked.blocking.is_empty() {
        let list: String = checked
            .blocking
            .iter()
            .map(|c| format!("\n  {c}"))
            .collect();
        if !args.allow_different {
            return Err(InputError(format!(
                "failed to compare {} with {}: their task releases or evaluation differ (checked from the {}):{list}\nfix: compare runs of the same tasks and evaluation, or pass --allow-different to compare anyway (the paired trials are then not the same measurement)",
                left.run_key, right.run_key, checked.by
            ))
            .into());
        }
        eprintln!(
            "WARNING: {} and {} differ in task releases or evaluation; compared anyway (--allow-different), so a difference may come from the tasks or the grading, not the agents:{list}",
            left.run_key, right.run_key
        );
    }
    let pairing = match (&args.left_agent, &args.right_agent) {
        (Some(l), Some(r)) => AgentPairing::Named {
            left: l.clone(),
            right: r.clone(),
        },
        _ => AgentPairing::Shared,
    };
    let options = Options {
        resamples: args.resamples,
        seed: args.seed,
    };
    let c = compare(&left.trials, &right.trials, &pairing, options)
        .map_err(|e| InputError(e.to_string()))?;
    Ok((checked, c))
}

/// The spec diff when both specs are known, else the conditions the records state.
fn check(left: &LoadedRun, right: &LoadedRun) -> Checked {
    let (by, d) = match (&left.spec, &right.spec) {
        (Some(l), Some(r)) => ("spec", diff(l, r)),
        _ => ("records", diff_flat(&flat(left), &flat(right))),
    };
    Checked {
        by,
        blocking: blocking_changes(&d),
        diff: d,
    }
}

/// The task releases and evaluation that a run's records state.
fn flat(run: &LoadedRun) -> BTreeMap<String, Value> {
    let mut m = BTreeMap::new();
    for r in &run.records {
        m.entry(format!("tasks.{}", r.task.release.id))
            .or_insert_with(
                || json!({"release": r.task.release, "tests_digest": r.task.tests_digest}),
            );
        m.entry("evaluation.grade".into())
            .or_insert_with(|| json!(r.options.grade));
    }
    m
}
