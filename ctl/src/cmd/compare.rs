//! `akbench run compare A B`: two runs side by side with paired statistics (methods in
//! docs/compare.md; the statistics live in `akbench_core::compare`).
//!
//! Exit 0 when the comparison was made; 2 when it is refused (the task releases or the
//! evaluation differ and `--allow-different` was not given, agents that cannot be paired,
//! an unknown run or an unreadable record): nothing is computed then.

use crate::cli::{CompareArgs, RemoteArgs};
use crate::cmd::print_json;
use crate::cmd::source::{Finder, LoadedRun};
use crate::exit::{self, InputError};
use akbench_core::compare::{
    blocking_changes, compare, diff_flat, AgentPairing, Comparison, Flip, Options, SideRates,
};
use akbench_core::evidence::EvidenceStore;
use akbench_core::rates::Pct;
use akbench_core::spec_diff::{diff, Change, SpecDiff};
use serde_json::{json, Value};
use std::collections::BTreeMap;

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

/// Compares two runs.
pub fn run(args: CompareArgs, remote: &RemoteArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let finder = Finder {
        store: &store,
        out: &args.out,
        remote,
    };
    let left = finder.load(&args.left)?;
    let right = finder.load(&args.right)?;
    let (checked, c) = compute(&left, &right, &Settings::from(&args))?;
    if args.store.json {
        print_json(&to_json(&left, &right, &checked, &c, args.allow_different))?;
    } else {
        print_human(&left, &right, &checked, &c);
    }
    Ok(exit::OK)
}

/// Checks comparability and computes the comparison (shared with `run report --compare`).
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

fn run_json(r: &LoadedRun) -> Value {
    // Best-of-N: trials are compared on their selected bucket; pass@k shown beside.
    let candidates = r.candidates().map(
        |c| json!({"selection": c.selection, "candidates": c.candidates, "pass_at": c.pass_at}),
    );
    json!({"run_key": r.run_key, "run_id": r.run_id, "source": r.source,
           "plan_known": r.accounting.is_some(), "candidates": candidates})
}

/// The JSON document of a comparison.
pub fn to_json(
    left: &LoadedRun,
    right: &LoadedRun,
    checked: &Checked,
    c: &Comparison,
    allowed: bool,
) -> Value {
    json!({
        "left": run_json(left),
        "right": run_json(right),
        "conditions": {
            "checked_from": checked.by,
            "identical": checked.diff.is_empty(),
            "changes": checked.diff.changes,
            "blocking": checked.blocking,
            "compared_anyway": allowed && !checked.blocking.is_empty(),
        },
        "comparison": c,
    })
}

fn interval(i: Option<akbench_core::compare::stats::Interval>) -> String {
    match i {
        Some(i) => format!("[{}, {}]", Pct(Some(i.low)), Pct(Some(i.high))),
        None => String::new(),
    }
}

fn rates_line(s: &SideRates) -> (String, String) {
    let solved_over = s.rates.graded + s.counts.agent_failed + s.counts.timed_out;
    (
        format!(
            "{} {} ({}/{})",
            Pct(s.rates.solve_rate),
            interval(s.solve_interval),
            s.counts.succeeded,
            solved_over
        ),
        format!(
            "{} {} ({}/{})",
            Pct(s.rates.pass_rate),
            interval(s.pass_interval),
            s.counts.succeeded,
            s.rates.graded
        ),
    )
}

fn points(x: f64) -> String {
    format!("{:+.1}", x * 100.0)
}

fn print_human(left: &LoadedRun, right: &LoadedRun, checked: &Checked, c: &Comparison) {
    println!("left   {} ({})", left.run_key, left.source);
    println!("right  {} ({})", right.run_key, right.source);
    let agents: Vec<String> = c
        .pairing
        .iter()
        .map(|(l, r)| format!("{l} -> {r}"))
        .collect();
    println!("agents {}", agents.join(", "));
    if checked.diff.is_empty() {
        println!("conditions identical (checked from the {})", checked.by);
    } else {
        println!("conditions differ (checked from the {}):", checked.by);
        for ch in &checked.diff.changes {
            println!("  {ch}");
        }
    }
    println!();
    println!("{:<12}{:<36}right", "", "left");
    let (ls, lp) = rates_line(&c.left.total);
    let (rs, rp) = rates_line(&c.right.total);
    println!("{:<12}{ls:<36}{rs}", "solve rate");
    println!("{:<12}{lp:<36}{rp}", "pass rate");
    if c.pairing.len() > 1 {
        for (l, r) in &c.pairing {
            if let (Some(a), Some(b)) = (c.left.by_agent.get(l), c.right.by_agent.get(r)) {
                let (ls, _) = rates_line(a);
                let (rs, _) = rates_line(b);
                println!("  {:<10}{ls:<36}{rs}", l);
            }
        }
    }
    let p = &c.paired;
    println!();
    println!(
        "paired     {} pairs: solved by both {}, by neither {}, lost {}, gained {}",
        p.pairs, p.both_solved, p.neither_solved, p.lost, p.gained
    );
    match (p.difference, p.bootstrap) {
        (Some(d), Some(b)) => println!(
            "difference {} points (right - left; {} -> {}), 95% paired bootstrap [{}, {}] ({} resamples, seed {})",
            points(d),
            Pct(p.left_rate),
            Pct(p.right_rate),
            points(b.interval.low),
            points(b.interval.high),
            b.resamples,
            b.seed
        ),
        (Some(d), None) => println!("difference {} points (right - left)", points(d)),
        _ => println!("difference n/a (no pairs)"),
    }
    println!(
        "McNemar    exact two-sided p = {:.4} over {} discordant pairs",
        p.mcnemar_p,
        p.lost + p.gained
    );
    if !c.flips.is_empty() {
        println!("\nflips ({}):", c.flips.len());
        for f in &c.flips {
            let (dir, pair) = (&f.direction, &f.pair);
            let d = match dir {
                Flip::Lost => "solved -> not",
                Flip::Gained => "not -> solved",
            };
            println!(
                "  {d:<14} {} r{}  {} | {}",
                pair.task, pair.repetition, pair.left_key, pair.right_key
            );
        }
    }
    if !c.unpaired.is_empty() {
        println!(
            "\nnot paired ({}; excluded from the paired statistics, never counted as failures):",
            c.unpaired.len()
        );
        let b = |x: Option<akbench_core::accounting::Bucket>| x.map_or("-", |b| b.as_str());
        for u in &c.unpaired {
            println!(
                "  {:<11} {} r{}  left {} | right {}",
                u.reason,
                u.task,
                u.repetition,
                b(u.left),
                b(u.right)
            );
        }
    }
}
