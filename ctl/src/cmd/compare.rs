//! `akbench run compare A B`: two runs side by side with paired statistics (methods in
//! docs/compare.md; the statistics live in `akbench_core::compare`).
//!
//! Exit 0 when the comparison was made; 2 when it is refused (the task releases or the
//! evaluation differ and `--allow-different` was not given, agents that cannot be paired,
//! an unknown run or an unreadable record): nothing is computed then.

use crate::cli::{CompareArgs, RemoteArgs};
use crate::cmd::shared::common::print_json;
use crate::cmd::shared::compare::{compute, Checked, Settings};
use crate::cmd::shared::source::{Finder, LoadedRun};
use crate::exit;
use akbench_core::compare::{Comparison, Flip, SideRates};
use akbench_core::evidence::EvidenceStore;
use akbench_core::rates::Pct;
use serde_json::{json, Value};

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
    // Where verdicts were graded, undeclared hosts, grading fetches, per agent of each side
    // (core::report::network), from the records at hand.
    let network = (
        crate::cmd::report::view(&left).network,
        crate::cmd::report::view(&right).network,
    );
    if args.store.json {
        let mut doc = to_json(&left, &right, &checked, &c, args.allow_different);
        doc["network"] = json!({"left": network.0, "right": network.1});
        print_json(&doc)?;
    } else {
        print_human(&left, &right, &checked, &c);
        print_network(&c, &network);
    }
    Ok(exit::OK)
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

type ByAgent = std::collections::BTreeMap<String, akbench_core::report::network::NetworkCounts>;

/// Per compared agent, each side's grading place, undeclared hosts and grading fetches.
fn print_network(c: &Comparison, (left, right): &(ByAgent, ByAgent)) {
    outln!("\ngrading place and network (per compared agent):");
    let line = |side: &ByAgent, a: &str| {
        side.get(a)
            .map_or_else(|| "no records".to_string(), |n| n.describe())
    };
    for (l, r) in &c.pairing {
        outln!("  left  {l}: {}", line(left, l));
        outln!("  right {r}: {}", line(right, r));
    }
}

fn print_human(left: &LoadedRun, right: &LoadedRun, checked: &Checked, c: &Comparison) {
    outln!("left   {} ({})", left.run_key, left.source);
    outln!("right  {} ({})", right.run_key, right.source);
    let agents: Vec<String> = c
        .pairing
        .iter()
        .map(|(l, r)| format!("{l} -> {r}"))
        .collect();
    outln!("agents {}", agents.join(", "));
    if checked.diff.is_empty() {
        outln!("conditions identical (checked from the {})", checked.by);
    } else {
        outln!("conditions differ (checked from the {}):", checked.by);
        for ch in &checked.diff.changes {
            outln!("  {ch}");
        }
    }
    outln!();
    outln!("{:<12}{:<36}right", "", "left");
    let (ls, lp) = rates_line(&c.left.total);
    let (rs, rp) = rates_line(&c.right.total);
    outln!("{:<12}{ls:<36}{rs}", "solve rate");
    outln!("{:<12}{lp:<36}{rp}", "pass rate");
    if c.pairing.len() > 1 {
        for (l, r) in &c.pairing {
            if let (Some(a), Some(b)) = (c.left.by_agent.get(l), c.right.by_agent.get(r)) {
                let (ls, _) = rates_line(a);
                let (rs, _) = rates_line(b);
                outln!("  {:<10}{ls:<36}{rs}", l);
            }
        }
    }
    let p = &c.paired;
    outln!();
    outln!(
        "paired     {} pairs: solved by both {}, by neither {}, lost {}, gained {}",
        p.pairs,
        p.both_solved,
        p.neither_solved,
        p.lost,
        p.gained
    );
    match (p.difference, p.bootstrap) {
        (Some(d), Some(b)) => outln!(
            "difference {} points (right - left; {} -> {}), 95% paired bootstrap [{}, {}] ({} resamples, seed {})",
            points(d),
            Pct(p.left_rate),
            Pct(p.right_rate),
            points(b.interval.low),
            points(b.interval.high),
            b.resamples,
            b.seed
        ),
        (Some(d), None) => outln!("difference {} points (right - left)", points(d)),
        _ => outln!("difference n/a (no pairs)"),
    }
    outln!(
        "McNemar    exact two-sided p = {:.4} over {} discordant pairs",
        p.mcnemar_p,
        p.lost + p.gained
    );
    if !c.flips.is_empty() {
        outln!("\nflips ({}):", c.flips.len());
        for f in &c.flips {
            let (dir, pair) = (&f.direction, &f.pair);
            let d = match dir {
                Flip::Lost => "solved -> not",
                Flip::Gained => "not -> solved",
            };
            outln!(
                "  {d:<14} {} r{}  {} | {}",
                pair.task,
                pair.repetition,
                pair.left_key,
                pair.right_key
            );
        }
    }
    if !c.unpaired.is_empty() {
        outln!(
            "\nnot paired ({}; excluded from the paired statistics, never counted as failures):",
            c.unpaired.len()
        );
        let b = |x: Option<akbench_core::accounting::Bucket>| x.map_or("-", |b| b.as_str());
        for u in &c.unpaired {
            outln!(
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
