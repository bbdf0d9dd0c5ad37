//! The run progress projection (`RunStatus`) as text and JSON. Every rate goes through
//! core's [`Pct`]: a rate over nothing is "n/a" (JSON `null`), never 0%. A run with
//! multi-step tasks gets `run aggregate`'s steps section (text and JSON `steps`, core's
//! `report::steps`); a run without prints no trace of it.

use super::state_name;
use akbench_core::rates::Pct;
use akbench_proto::v1 as pb;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Milliseconds since the Unix epoch as a UTC time (RFC 3339).
pub fn time(unix_ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(unix_ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

fn map(counts: &[pb::StateCount]) -> BTreeMap<&str, u64> {
    counts.iter().map(|c| (c.state.as_str(), c.count)).collect()
}

fn counts(counts: &[pb::StateCount]) -> String {
    let nonzero: Vec<String> = counts
        .iter()
        .filter(|c| c.count > 0)
        .map(|c| format!("{}={}", c.state, c.count))
        .collect();
    if nonzero.is_empty() {
        "-".into()
    } else {
        nonzero.join(" ")
    }
}

/// Outcome counts in the words of the results table: a trial of bucket `succeeded` is
/// `solved` there and here (the JSON keeps the bucket names).
fn outcomes(c: &[pb::StateCount]) -> String {
    let worded: Vec<pb::StateCount> = c
        .iter()
        .map(|c| pb::StateCount {
            state: if c.state == "succeeded" {
                "solved".into()
            } else {
                c.state.clone()
            },
            count: c.count,
        })
        .collect();
    counts(&worded)
}

fn rates_json(r: Option<&pb::Rates>) -> serde_json::Value {
    let r = r.copied().unwrap_or_default();
    serde_json::json!({
        "graded": r.graded,
        "pass_rate": r.pass_rate,
        "solve_rate": r.solve_rate,
        "coverage": r.coverage,
        "infrastructure_error_rate": r.infrastructure_error_rate,
    })
}

/// `priority 0  weight 1  12 live leases = 40.0% of all live (entitled to 50.0%)`.
fn share_text(h: &pb::RunShare) -> String {
    let entitled = match h.entitled {
        Some(e) => format!(" (entitled to {:.1}%)", e * 100.0),
        None => " (wants no workers)".to_string(),
    };
    format!(
        "priority {}  weight {}  {} live leases = {:.1}% of all live{entitled}",
        h.priority,
        h.weight,
        h.live,
        h.of_live * 100.0
    )
}

fn rates_text(r: Option<&pb::Rates>) -> String {
    let r = r.copied().unwrap_or_default();
    format!(
        "pass rate {} ({} graded)  solve rate {}  coverage {}  infrastructure errors {}",
        Pct(r.pass_rate),
        r.graded,
        Pct(r.solve_rate),
        Pct(r.coverage),
        Pct(r.infrastructure_error_rate)
    )
}

/// One status as JSON (the shape of the coordinator's `/api/runs/{run}/status`; absent
/// rates, throughput and ETA are `null`).
pub fn status_json(s: &pb::RunStatus) -> serde_json::Value {
    let mut v = serde_json::json!({
        "run": summary_json(s.run.as_ref()),
        "planned": s.planned,
        "queued": s.queued,
        "running": s.running,
        "prefetched": s.prefetched,
        "finished": s.finished,
        "work_items": map(&s.work_items),
        "phases": map(&s.phases),
        "outcomes": map(&s.outcomes),
        "retries": s.retries,
        "workers": s.workers,
        "rates": rates_json(s.rates.as_ref()),
        "agents": s.agents.iter().map(|a| serde_json::json!({
            "agent": a.agent,
            "planned": a.planned,
            "outcomes": map(&a.outcomes),
            "rates": rates_json(a.rates.as_ref()),
            "spend": spend_json(a.spend.as_ref()),
            "flagged": flagged_json(a.flagged.as_ref()),
            "network": network_counts(a.network.as_ref()),
        })).collect::<Vec<_>>(),
        "spend": spend_json(s.spend.as_ref()),
        "flagged": flagged_json(s.flagged.as_ref()),
        "network": network_counts(s.network.as_ref()),
        "budget": s.budget,
        "worker_labels": s.worker_labels,
        "placement": s.placement,
        "share": s.share.map(|h| serde_json::json!({
            "priority": h.priority,
            "weight": h.weight,
            "live": h.live,
            "of_live": h.of_live,
            "entitled": h.entitled,
        })),
        "paused_routes": s.paused_routes.iter().map(|p| serde_json::json!({
            "route": p.route,
            "consecutive_failures": p.consecutive_failures,
            "paused_until": time(p.paused_until_unix_ms),
            "last_error": p.last_error,
        })).collect::<Vec<_>>(),
        "throughput_per_minute": s.throughput_per_minute,
        "eta": s.eta_unix_ms.map(time),
        "as_of": time(s.as_of_unix_ms),
    });
    // Only for a run with multi-step tasks, in `run aggregate`'s shape (core's `TaskSteps`).
    if !s.steps.is_empty() {
        v["steps"] =
            serde_json::to_value(akbench_proto::steps::from_wire(&s.steps)).unwrap_or_default();
    }
    v
}

/// Core's counts of where verdicts were graded, undeclared hosts and grading fetches (its
/// JSON shape is `run aggregate`'s `network`; its text is core's).
fn network_counts(n: Option<&pb::Network>) -> akbench_core::report::network::NetworkCounts {
    let n = n.copied().unwrap_or_default();
    akbench_core::report::network::NetworkCounts {
        graded_shared: n.graded_shared,
        graded_clean_room: n.graded_clean_room,
        undeclared_trials: n.undeclared_trials,
        undeclared_hosts: n.undeclared_hosts,
        fetch_failed_attempts: n.fetch_failed_attempts,
    }
}

/// Flagged trials as JSON, the shape of core's `FlagCounts` (`run aggregate`'s `flagged`).
fn flagged_json(f: Option<&pb::Flagged>) -> serde_json::Value {
    let f = f.copied().unwrap_or_default();
    serde_json::json!({ "tampered": f.tampered, "withheld": f.withheld, "unguarded": f.unguarded })
}

/// "grading tampered 1, withheld paths 0" (core::grading::integrity's counts), and
/// ", solved without tripwire 2" when there are such verdicts.
fn flagged_text(f: Option<&pb::Flagged>) -> String {
    let f = f.copied().unwrap_or_default();
    let unguarded = if f.unguarded > 0 {
        format!(", solved without tripwire {}", f.unguarded)
    } else {
        String::new()
    };
    format!(
        "grading tampered {}, withheld paths {}{unguarded}",
        f.tampered, f.withheld
    )
}

/// `"; flagged: grading tampered 1, withheld paths 0"` when a trial is flagged, else empty:
/// the watch's lines and bars say it only when there is something to say.
pub fn flagged_suffix(f: Option<&pb::Flagged>) -> String {
    let c = f.copied().unwrap_or_default();
    if c.tampered == 0 && c.withheld == 0 && c.unguarded == 0 {
        return String::new();
    }
    format!("; flagged: {}", flagged_text(f))
}

/// Tokens and cost as JSON (absent values `null`).
fn spend_json(s: Option<&pb::Spend>) -> serde_json::Value {
    let s = s.cloned().unwrap_or_default();
    serde_json::json!({
        "input_tokens": s.input_tokens,
        "cached_input_tokens": s.cached_input_tokens,
        "output_tokens": s.output_tokens,
        "cost_usd": s.cost_usd,
        "trials_without_cost": s.trials_without_cost,
        "cost_per_solved_usd": s.cost_per_solved_usd,
    })
}

/// "tokens 1200 in, 300 cached, 80 out, cost $0.0120 ($0.0060/solved)"; `n/a` where absent.
fn spend_text(s: Option<&pb::Spend>) -> String {
    use akbench_core::spend::{fmt_count, fmt_usd};
    let s = s.cloned().unwrap_or_default();
    let mut cost = fmt_usd(s.cost_usd);
    if s.cost_usd.is_some() && s.trials_without_cost > 0 {
        cost.push_str(&format!(" ({} without)", s.trials_without_cost));
    }
    format!(
        "tokens {} in, {} cached, {} out, cost {cost} ({}/solved)",
        fmt_count(s.input_tokens),
        fmt_count(s.cached_input_tokens),
        fmt_count(s.output_tokens),
        fmt_usd(s.cost_per_solved_usd)
    )
}

fn throughput(s: &pb::RunStatus) -> String {
    match s.throughput_per_minute {
        Some(t) => format!("{t:.1} trials/min"),
        None => "n/a".into(),
    }
}

/// The ETA in words ("n/a" when it cannot be measured).
pub fn eta(s: &pb::RunStatus) -> String {
    match s.eta_unix_ms {
        Some(ms) => {
            let left = (ms - s.as_of_unix_ms).max(0) / 1000;
            let (h, m, sec) = (left / 3600, left / 60 % 60, left % 60);
            let within = if h > 0 {
                format!("{h}h{m:02}m")
            } else if m > 0 {
                format!("{m}m{sec:02}s")
            } else {
                format!("{sec}s")
            };
            format!("{} (in {within})", time(ms))
        }
        None => "n/a".into(),
    }
}

/// The full view, several lines (the terminal view redraws it in place).
pub fn block(s: &pb::RunStatus) -> String {
    let run = s.run.clone().unwrap_or_default();
    let mut o = String::new();
    let _ = writeln!(o, "run        {} ({})", run.run_key, run.run_id);
    let _ = writeln!(o, "state      {}", state_name(run.state));
    let _ = writeln!(
        o,
        "trials     {} planned  {} queued  {}  {} finished  {} retries",
        s.planned,
        s.queued,
        running(s, "  "),
        s.finished,
        s.retries
    );
    let _ = writeln!(o, "phases     {}", counts(&s.phases));
    let _ = writeln!(o, "outcomes   {}", outcomes(&s.outcomes));
    let _ = writeln!(o, "work       {}", counts(&s.work_items));
    let _ = writeln!(o, "workers    {} connected", s.workers);
    if !s.worker_labels.is_empty() {
        let _ = writeln!(
            o,
            "labels     {} (required of workers)",
            s.worker_labels.join(", ")
        );
    }
    if let Some(p) = &s.placement {
        let _ = writeln!(o, "waiting    {p}");
    }
    if let Some(h) = &s.share {
        let _ = writeln!(o, "share      {}", share_text(h));
    }
    let _ = writeln!(o, "rates      {}", rates_text(s.rates.as_ref()));
    let _ = writeln!(o, "spend      {}", spend_text(s.spend.as_ref()));
    let _ = writeln!(o, "flagged    {}", flagged_text(s.flagged.as_ref()));
    let _ = writeln!(
        o,
        "network    {}",
        network_counts(s.network.as_ref()).describe()
    );
    if let Some(b) = &s.budget {
        let _ = writeln!(o, "budget     {}", b.trim_start_matches("budget: "));
    }
    for p in &s.paused_routes {
        let _ = writeln!(
            o,
            "paused     provider route {} until {} ({} failures in a row): {}",
            p.route,
            time(p.paused_until_unix_ms),
            p.consecutive_failures,
            p.last_error
        );
    }
    if !s.agents.is_empty() {
        let width = s.agents.iter().map(|a| a.agent.len()).max().unwrap_or(0);
        let _ = writeln!(o, "agents");
        for a in &s.agents {
            let _ = writeln!(
                o,
                "  {:<width$}  {} planned  {}  {}  {}  {}",
                a.agent,
                a.planned,
                outcomes(&a.outcomes),
                rates_text(a.rates.as_ref()),
                spend_text(a.spend.as_ref()),
                flagged_text(a.flagged.as_ref())
            );
        }
        let _ = writeln!(o, "network by agent");
        for a in &s.agents {
            let _ = writeln!(
                o,
                "  {:<width$}  {}",
                a.agent,
                network_counts(a.network.as_ref()).describe()
            );
        }
    }
    let _ = writeln!(o, "throughput {}", throughput(s));
    let _ = writeln!(o, "eta        {}", eta(s));
    let _ = writeln!(o, "as of      {}", time(s.as_of_unix_ms));
    // A run with multi-step tasks: `run aggregate`'s steps section (core's renderer).
    if !s.steps.is_empty() {
        let _ = write!(
            o,
            "\n{}",
            akbench_core::report::steps::to_markdown(&akbench_proto::steps::from_wire(&s.steps))
        );
    }
    o
}

/// "N running", then "M prefetched" after `sep` when some are: a trial leased to a worker
/// whose attempt has not started waits for a slot and is never shown as running.
pub fn running(s: &pb::RunStatus, sep: &str) -> String {
    if s.prefetched > 0 {
        format!("{} running{sep}{} prefetched", s.running, s.prefetched)
    } else {
        format!("{} running", s.running)
    }
}

/// The view on one line (a watch whose output is not a terminal prints one per update).
pub fn line(s: &pb::RunStatus) -> String {
    let run = s.run.clone().unwrap_or_default();
    let r = s.rates.unwrap_or_default();
    format!(
        "{} {} {}: {}/{} finished, {} queued, {}; outcomes {}; workers {}; pass rate {} ({} graded); coverage {}; throughput {}; eta {}{}",
        time(s.as_of_unix_ms),
        run.run_key,
        state_name(run.state),
        s.finished,
        s.planned,
        s.queued,
        running(s, ", "),
        outcomes(&s.outcomes),
        s.workers,
        Pct(r.pass_rate),
        r.graded,
        Pct(r.coverage),
        throughput(s),
        eta(s),
        flagged_suffix(s.flagged.as_ref()),
    )
}

/// A run summary as JSON (the shape of the coordinator's HTTP status API).
pub fn summary_json(s: Option<&pb::RunSummary>) -> serde_json::Value {
    let Some(s) = s else {
        return serde_json::Value::Null;
    };
    serde_json::json!({
        "run_id": s.run_id,
        "run_key": s.run_key,
        "experiment": s.experiment,
        "state": state_name(s.state),
        "spec_digest": s.spec_digest,
        "plan_digest": s.plan_digest,
        "trial_count": s.trial_count,
        "created_at": time(s.created_at_unix_ms),
        "started_at": (s.started_at_unix_ms != 0).then(|| time(s.started_at_unix_ms)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_line_shows_in_text_and_json_only_when_the_run_has_one() {
        let none = pb::RunStatus::default();
        assert!(!block(&none).contains("budget"));
        assert!(status_json(&none)["budget"].is_null());
        let line =
            "budget: $0.0013 of $0.0010 (reached: spent $0.0013 of $0.0010; no new trial starts)";
        let s = pb::RunStatus {
            budget: Some(line.into()),
            ..Default::default()
        };
        assert!(
            block(&s).contains("budget     $0.0013 of $0.0010 (reached"),
            "{}",
            block(&s)
        );
        assert_eq!(status_json(&s)["budget"], line);
    }

    #[test]
    fn the_share_shows_in_text_and_json_when_the_coordinator_knows_it() {
        let none = pb::RunStatus::default();
        assert!(!block(&none).contains("share"));
        assert!(status_json(&none)["share"].is_null());
        let s = pb::RunStatus {
            share: Some(pb::RunShare {
                priority: 2,
                weight: 3,
                live: 12,
                of_live: 0.4,
                entitled: Some(0.75),
            }),
            ..Default::default()
        };
        assert!(
            block(&s).contains(
                "share      priority 2  weight 3  12 live leases = 40.0% of all live (entitled to 75.0%)"
            ),
            "{}",
            block(&s)
        );
        let j = &status_json(&s)["share"];
        assert_eq!(
            (
                j["priority"].as_i64(),
                j["weight"].as_u64(),
                j["live"].as_u64()
            ),
            (Some(2), Some(3), Some(12))
        );
        assert_eq!(j["entitled"].as_f64(), Some(0.75));
        let idle = pb::RunStatus {
            share: Some(pb::RunShare {
                weight: 1,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(
            block(&idle).contains("(wants no workers)"),
            "{}",
            block(&idle)
        );
    }

    #[test]
    fn progress_says_solved_like_the_table() {
        let n = |state: &str, count| pb::StateCount {
            state: state.into(),
            count,
        };
        let s = pb::RunStatus {
            outcomes: vec![n("succeeded", 3), n("failed", 1), n("cancelled", 0)],
            agents: vec![pb::AgentStatus {
                agent: "a".into(),
                outcomes: vec![n("succeeded", 3)],
                ..Default::default()
            }],
            ..Default::default()
        };
        for text in [line(&s), block(&s)] {
            assert!(text.contains("solved=3 failed=1"), "{text}");
            assert!(!text.contains("succeeded"), "{text}");
        }
        assert_eq!(
            status_json(&s)["outcomes"]["succeeded"],
            3,
            "JSON keeps buckets"
        );
    }

    #[test]
    fn nothing_graded_is_na_and_null() {
        let s = pb::RunStatus {
            planned: 4,
            rates: Some(pb::Rates::default()),
            ..Default::default()
        };
        assert!(block(&s).contains("pass rate n/a (0 graded)"));
        assert!(line(&s).contains("pass rate n/a"));
        assert!(status_json(&s)["rates"]["pass_rate"].is_null());
        let s = pb::RunStatus {
            rates: Some(pb::Rates {
                graded: 2,
                pass_rate: Some(0.5),
                solve_rate: Some(0.25),
                ..Default::default()
            }),
            ..s
        };
        assert!(block(&s).contains("pass rate 50.0% (2 graded)"));
        assert!(block(&s).contains("solve rate 25.0%"), "{}", block(&s));
        assert_eq!(status_json(&s)["rates"]["solve_rate"], 0.25);
    }
}
