//! The steps of a multi-step attempt on the trial page (`attempts[].steps[]`, docs/record.md
//! "steps"): one section per step with its name, verdict, rewards, start, end and duration,
//! the agent's exit, tokens, cost, the gate that stopped the rest, the cause, the tripwire's
//! result, and its artifacts shown as the attempt's are. Every value is escaped (step names
//! come from the task, reward keys from a reward.json the grading wrote).

use crate::html::{badge, esc};
use crate::source::Artifacts;
use akbench_core::record::steps::StepResult;
use std::fmt::Write as _;

/// Appends the steps of attempt `number` to `b` (nothing for a one-step attempt); artifacts
/// are read from `dir` through `artifact` (the page's own renderer of an attempt artifact).
pub fn render(
    b: &mut String,
    number: u32,
    steps: &[StepResult],
    dir: &Artifacts,
    artifact: fn(&mut String, &Artifacts, &str, &str, &str),
) {
    if steps.is_empty() {
        return;
    }
    let solved = steps
        .iter()
        .filter(|s| s.verdict == akbench_core::record::steps::StepVerdict::Solved)
        .count();
    let _ = write!(b, "<h3>Steps ({solved} of {} solved)</h3>", steps.len());
    for (i, s) in steps.iter().enumerate() {
        let _ = write!(
            b,
            "<section class=\"step\" id=\"attempt-{number}-step-{n}\"><h4>Step {n}: <code>{name}</code> {v}</h4>",
            n = i + 1,
            name = esc(&s.name),
            v = badge(s.verdict.as_str()),
        );
        let facts = facts(s);
        if !facts.is_empty() {
            b.push_str("<dl class=\"facts step-facts\">");
            for (k, v) in facts {
                let _ = write!(b, "<dt>{k}</dt><dd>{}</dd>", esc(&v));
            }
            b.push_str("</dl>");
        }
        for path in &s.artifacts {
            artifact(
                b,
                dir,
                path,
                &format!("Step {} artifact {path}", s.name),
                "log",
            );
        }
        b.push_str("</section>");
    }
}

/// The step's facts that are known, in page order (values not yet escaped).
fn facts(s: &StepResult) -> Vec<(&'static str, String)> {
    let num = |n: Option<u64>| n.map(|n| n.to_string());
    let rewards = s.rewards.as_ref().map(|r| {
        r.iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    });
    let duration = match (s.started_at, s.ended_at) {
        (Some(a), Some(z)) => Some(format!(
            "{:.1}s",
            (z - a).num_milliseconds().max(0) as f64 / 1000.0
        )),
        _ => None,
    };
    let at = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
    };
    [
        ("rewards", rewards),
        ("started", at(s.started_at)),
        ("ended", at(s.ended_at)),
        ("duration", duration),
        ("agent exit", s.agent_exit.map(|c| c.to_string())),
        ("input tokens", num(s.input_tokens)),
        ("output tokens", num(s.output_tokens)),
        ("cost", s.cost_usd.map(akbench_core::spend::fmt_cost)),
        ("stopped the rest", s.gated_stop.clone()),
        ("cause", s.cause.clone()),
        ("tripwire", s.tripwire.as_ref().map(|t| t.result.clone())),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect()
}

#[cfg(test)]
mod tests;
