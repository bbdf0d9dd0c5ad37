//! Summaries rebuilt from trial outcomes: per-agent bucket counts and [`Rates`], rendered as
//! JSON, a markdown table and JUnit XML. Every rate goes through [`Rates`]: "n/a" (JSON
//! `null`) when nothing was graded, never 0%.

use crate::accounting::{Bucket, BucketCounts, Observation};
use crate::rates::{Pct, Rates};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One trial's outcome as a report sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportTrial {
    /// Trial key.
    pub key: String,
    /// Agent name.
    pub agent: String,
    /// Task id.
    pub task: String,
    /// The outcome.
    pub observation: Observation,
    /// Why it ended where it did, when known.
    pub cause: Option<String>,
}

/// Counts and rates of one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Trials.
    pub trials: u64,
    /// Per bucket.
    pub counts: BucketCounts,
    /// Rates over the counts.
    pub rates: Rates,
}

impl Row {
    fn from_counts(counts: BucketCounts) -> Row {
        Row {
            trials: counts.planned(),
            rates: Rates::from_counts(&counts),
            counts,
        }
    }
}

/// A summary by agent and in total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Per agent.
    pub by_agent: BTreeMap<String, Row>,
    /// All trials.
    pub total: Row,
}

/// Builds the summary of `trials`.
pub fn summarize(trials: &[ReportTrial]) -> Summary {
    let mut by_agent: BTreeMap<String, BucketCounts> = BTreeMap::new();
    let mut total = BucketCounts::default();
    for t in trials {
        let b = Bucket::of(&t.observation);
        by_agent.entry(t.agent.clone()).or_default().add(b);
        total.add(b);
    }
    Summary {
        by_agent: by_agent
            .into_iter()
            .map(|(k, v)| (k, Row::from_counts(v)))
            .collect(),
        total: Row::from_counts(total),
    }
}

impl Summary {
    /// A markdown table: one line per agent and a total.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from(
            "| agent | trials | solved | failed | agent failed | timed out | infra errors | eval errors | invalid | cancelled | not graded | pass rate | solve rate |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let line = |s: &mut String, name: &str, r: &Row| {
            let c = &r.counts;
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.trials,
                c.succeeded,
                c.failed,
                c.agent_failed,
                c.timed_out,
                c.infrastructure_error,
                c.evaluation_error,
                c.invalid,
                c.cancelled,
                c.not_graded,
                Pct(r.rates.pass_rate),
                Pct(r.rates.solve_rate)
            );
        };
        for (name, r) in &self.by_agent {
            line(&mut s, name, r);
        }
        line(&mut s, "**total**", &self.total);
        s
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JUnit XML: one `<testsuite>` per agent, one `<testcase>` per trial. Solved passes; graded
/// and unsolved is a `<failure>`; the agent's own failure and a timeout are `<failure>` too;
/// infrastructure, evaluation and configuration errors are `<error>` (not the agent's fault);
/// not graded and cancelled are `<skipped>`.
pub fn to_junit(trials: &[ReportTrial]) -> String {
    let mut by_agent: BTreeMap<&str, Vec<&ReportTrial>> = BTreeMap::new();
    for t in trials {
        by_agent.entry(&t.agent).or_default().push(t);
    }
    let mut s =
        String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"akbench\">\n");
    for (agent, ts) in by_agent {
        let mut failures = 0;
        let mut errors = 0;
        let mut skipped = 0;
        let mut cases = String::new();
        for t in ts.iter() {
            let cause = xml_escape(t.cause.as_deref().unwrap_or(""));
            let state = t.observation.state.as_str();
            let body = match Bucket::of(&t.observation) {
                Bucket::Succeeded => String::new(),
                Bucket::Failed | Bucket::AgentFailed | Bucket::TimedOut => {
                    failures += 1;
                    format!("<failure type=\"{state}\" message=\"{state}\">{cause}</failure>")
                }
                Bucket::NotGraded | Bucket::Cancelled => {
                    skipped += 1;
                    format!("<skipped message=\"{state}\"/>")
                }
                _ => {
                    errors += 1;
                    format!("<error type=\"{state}\" message=\"{state}\">{cause}</error>")
                }
            };
            let _ = writeln!(
                cases,
                "    <testcase classname=\"{}\" name=\"{}\">{body}</testcase>",
                xml_escape(agent),
                xml_escape(&t.key)
            );
        }
        let _ = write!(
            s,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n{cases}  </testsuite>\n",
            xml_escape(agent),
            ts.len()
        );
    }
    s.push_str("</testsuites>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::State;

    fn t(agent: &str, n: u8, state: State, ok: Option<bool>) -> ReportTrial {
        ReportTrial {
            key: format!("r/{agent}/{n}"),
            agent: agent.into(),
            task: "t".into(),
            observation: Observation {
                trial_id: uuid::Uuid::from_bytes([n; 16]),
                state,
                ok,
                score: ok.map(|o| if o { 1.0 } else { 0.0 }),
                attempt_id: None,
                source: None,
            },
            cause: None,
        }
    }

    #[test]
    fn zero_graded_is_na_in_json_markdown_and_junit() {
        let trials = vec![
            t("a", 1, State::NotGraded, None),
            t("a", 2, State::NotGraded, None),
            t("a", 3, State::Failed, None),
        ];
        let s = summarize(&trials);
        let row = &s.by_agent["a"];
        assert_eq!(row.rates.pass_rate, None);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["by_agent"]["a"]["rates"]["pass_rate"].is_null());
        assert!(json["total"]["rates"]["solve_rate"].is_null());
        let md = s.to_markdown();
        assert!(md.contains("| n/a | n/a |"), "{md}");
        assert!(!md.contains("0.0%"), "{md}");
        let junit = to_junit(&trials);
        assert_eq!(junit.matches("<skipped").count(), 2);
        assert!(junit.contains("skipped=\"2\""));
    }

    #[test]
    fn buckets_and_rates_per_agent() {
        let trials = vec![
            t("a", 1, State::Completed, Some(true)),
            t("a", 2, State::Completed, Some(false)),
            t("b", 3, State::InfrastructureError, None),
            t("b", 4, State::Completed, Some(true)),
        ];
        let s = summarize(&trials);
        assert_eq!(s.by_agent["a"].rates.pass_rate, Some(0.5));
        assert_eq!(s.by_agent["b"].rates.pass_rate, Some(1.0));
        assert_eq!(s.by_agent["b"].counts.infrastructure_error, 1);
        assert_eq!(s.total.trials, 4);
        let junit = to_junit(&trials);
        assert!(
            junit.contains("failures=\"1\"") && junit.contains("errors=\"1\""),
            "{junit}"
        );
        assert!(s.to_markdown().contains("| 50.0% |"));
    }
}
