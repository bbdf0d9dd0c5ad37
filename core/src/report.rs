//! Summaries rebuilt from trial outcomes: per-agent bucket counts and [`Rates`], rendered as
//! JSON, a markdown table and JUnit XML. Every rate goes through [`Rates`]: "n/a" (JSON
//! `null`) when nothing was graded, never 0%. Each row also counts the trials whose grade
//! was flagged `grading tampered`, those graded with paths withheld and those solved without
//! a tripwire that failed as it must ([`crate::grading::integrity`]).

pub mod network;
pub mod steps;

use crate::accounting::{Bucket, BucketCounts, Observation};
use crate::grading::integrity::{FlagCounts, GradeFlags};
use crate::rates::{Pct, Rates};
use crate::spend::{fmt_count, fmt_usd, Spend, SpendTotals};
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
    /// Tokens and cost over all its attempts (absent where not reported).
    #[serde(default)]
    pub spend: Spend,
    /// Attempts it made (0: it never started; see [`crate::spend::is_without_cost`]).
    #[serde(default)]
    pub attempts: u32,
    /// What its deciding grade says about tampering and withheld paths
    /// ([`GradeFlags::of_record`]).
    #[serde(default)]
    pub grading: GradeFlags,
    /// Where its verdict was graded, the undeclared hosts its agent reached for, its
    /// attempts ended by a grading fetch ([`network::TrialNetwork::of_attempts`]).
    #[serde(default)]
    pub network: network::TrialNetwork,
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
    /// Tokens and cost, summed over the trials, and the cost per solved trial.
    pub spend: SpendTotals,
    /// Trials flagged `grading tampered`, and trials graded with withheld paths.
    #[serde(default)]
    pub flagged: FlagCounts,
    /// Verdicts graded in the agent's environment and in a clean room, trials whose agent
    /// reached for undeclared hosts, attempts ended by a grading fetch.
    #[serde(default)]
    pub network: network::NetworkCounts,
}

/// What one group's row is summed from.
#[derive(Default)]
struct Acc {
    counts: BucketCounts,
    spend: SpendTotals,
    flagged: FlagCounts,
    network: network::NetworkAcc,
}

impl Acc {
    fn add(&mut self, t: &ReportTrial) {
        let b = Bucket::of(&t.observation);
        self.counts.add(b);
        self.spend
            .add_trial(&t.spend, t.attempts, b == Bucket::Succeeded);
        self.flagged.add(t.grading);
        self.network.add(&t.network);
    }

    fn finish(self) -> Row {
        Row {
            trials: self.counts.planned(),
            rates: Rates::from_counts(&self.counts),
            spend: self.spend.finish(),
            counts: self.counts,
            flagged: self.flagged,
            network: self.network.finish(),
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
    let mut by_agent: BTreeMap<String, Acc> = BTreeMap::new();
    let mut total = Acc::default();
    for t in trials {
        by_agent.entry(t.agent.clone()).or_default().add(t);
        total.add(t);
    }
    Summary {
        by_agent: by_agent.into_iter().map(|(k, a)| (k, a.finish())).collect(),
        total: total.finish(),
    }
}

impl Summary {
    /// A markdown table: one line per agent and a total.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from(
            "| agent | trials | solved | failed | agent failed | timed out | infra errors | eval errors | invalid | cancelled | not graded | pass rate | solve rate | input tokens | cached tokens | output tokens | cost | cost per solved | grading tampered | withheld paths | solved without tripwire |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let line = |s: &mut String, name: &str, r: &Row| {
            let c = &r.counts;
            let sp = &r.spend;
            let mut cost = fmt_usd(sp.spend.cost_usd);
            if sp.spend.cost_usd.is_some() && sp.trials_without_cost > 0 {
                // A partial sum says so.
                let _ = write!(cost, " ({} without)", sp.trials_without_cost);
            }
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {cost} | {} | {} | {} | {} |",
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
                Pct(r.rates.solve_rate),
                fmt_count(sp.spend.input_tokens),
                fmt_count(sp.spend.cached_input_tokens),
                fmt_count(sp.spend.output_tokens),
                fmt_usd(sp.cost_per_solved_usd),
                r.flagged.tampered,
                r.flagged.withheld,
                r.flagged.unguarded,
            );
        };
        for (name, r) in &self.by_agent {
            line(&mut s, name, r);
        }
        line(&mut s, "**total**", &self.total);
        s
    }

    /// A second markdown table: per agent, verdicts graded in the agent's environment and
    /// in a clean room, trials whose agent reached for hosts the task did not declare and
    /// how many hosts, attempts ended `infrastructure_error` by a grading fetch
    /// ([`network`]).
    pub fn network_markdown(&self) -> String {
        let mut s = String::from(
            "| agent | graded in agent's environment | graded in clean room | trials reaching undeclared hosts | undeclared hosts | attempts ended by a grading fetch |\n\
             |---|---:|---:|---:|---:|---:|\n",
        );
        let line = |s: &mut String, name: &str, n: &network::NetworkCounts| {
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {} | {} | {} |",
                n.graded_shared,
                n.graded_clean_room,
                n.undeclared_trials,
                n.undeclared_hosts,
                n.fetch_failed_attempts
            );
        };
        for (name, r) in &self.by_agent {
            line(&mut s, name, &r.network);
        }
        line(&mut s, "**total**", &self.total.network);
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
/// not graded and cancelled are `<skipped>`. Tokens and cost are `<properties>` of each
/// suite (summed over its trials) and of each case; an unreported value is left out.
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
        let mut spend = SpendTotals::default();
        for t in ts.iter() {
            spend.add_trial(
                &t.spend,
                t.attempts,
                Bucket::of(&t.observation) == Bucket::Succeeded,
            );
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
                "    <testcase classname=\"{}\" name=\"{}\">{}{body}</testcase>",
                xml_escape(agent),
                xml_escape(&t.key),
                junit_properties(&t.spend, "")
            );
        }
        let _ = write!(
            s,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n{}{cases}  </testsuite>\n",
            xml_escape(agent),
            ts.len(),
            junit_properties(&spend.spend, "    ")
        );
    }
    s.push_str("</testsuites>\n");
    s
}

/// `<properties>` with the reported tokens and cost; empty when none was reported.
fn junit_properties(spend: &Spend, indent: &str) -> String {
    let mut props = String::new();
    for (name, v) in [
        ("input_tokens", spend.input_tokens),
        ("cached_input_tokens", spend.cached_input_tokens),
        ("output_tokens", spend.output_tokens),
    ] {
        if let Some(v) = v {
            let _ = write!(props, "<property name=\"{name}\" value=\"{v}\"/>");
        }
    }
    if let Some(c) = spend.cost_usd {
        let _ = write!(props, "<property name=\"cost_usd\" value=\"{c}\"/>");
    }
    if props.is_empty() {
        return String::new();
    }
    if indent.is_empty() {
        format!("<properties>{props}</properties>")
    } else {
        format!("{indent}<properties>{props}</properties>\n")
    }
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
            spend: Spend::default(),
            attempts: 1,
            grading: GradeFlags::default(),
            network: Default::default(),
        }
    }

    #[test]
    fn tampered_and_withheld_trials_are_counted_per_agent_in_json_and_markdown() {
        let flags = |tampered, withheld| GradeFlags {
            tampered,
            withheld,
            unguarded: false,
        };
        let mut trials = vec![
            t("a", 1, State::Completed, Some(false)),
            t("a", 2, State::Completed, Some(false)),
            t("a", 3, State::Completed, Some(true)),
            t("b", 4, State::Completed, Some(false)),
            t("b", 5, State::Completed, Some(true)),
        ];
        trials[0].grading = flags(true, false);
        trials[1].grading = flags(true, true);
        trials[2].grading = flags(false, true);
        let s = summarize(&trials);
        assert_eq!(
            s.by_agent["a"].flagged,
            FlagCounts {
                tampered: 2,
                withheld: 2,
                unguarded: 0
            }
        );
        assert_eq!(s.by_agent["b"].flagged, FlagCounts::default());
        assert_eq!(s.total.flagged.tampered, 2);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["by_agent"]["a"]["flagged"]["tampered"], 2);
        assert_eq!(json["by_agent"]["a"]["flagged"]["withheld"], 2);
        assert_eq!(json["by_agent"]["b"]["flagged"]["tampered"], 0);
        let md = s.to_markdown();
        assert!(
            md.contains("| grading tampered | withheld paths | solved without tripwire |\n"),
            "{md}"
        );
        assert!(md.contains("| n/a | n/a | 2 | 2 | 0 |\n| b |"), "{md}");
        assert!(
            md.contains("| n/a | n/a | 0 | 0 | 0 |\n| **total** |"),
            "{md}"
        );
        // A summary stored before the counts existed still reads.
        let mut old = json.clone();
        old["by_agent"]["a"]
            .as_object_mut()
            .unwrap()
            .remove("flagged");
        let back: Summary = serde_json::from_value(old).unwrap();
        assert_eq!(back.by_agent["a"].flagged, FlagCounts::default());
    }

    #[test]
    fn network_facts_are_counted_per_agent_in_json_and_markdown() {
        use network::{GradedIn, TrialNetwork};
        let mut trials = vec![
            t("a", 1, State::Completed, Some(false)),
            t("a", 2, State::Completed, Some(true)),
            t("a", 3, State::InfrastructureError, None),
            t("b", 4, State::Completed, Some(true)),
        ];
        trials[0].network = TrialNetwork {
            graded_in: Some(GradedIn::Shared),
            undeclared_hosts: vec!["evil.example".into(), "github.com".into()],
            fetch_failed_attempts: 1,
        };
        trials[1].network = TrialNetwork {
            graded_in: Some(GradedIn::Shared),
            undeclared_hosts: vec!["github.com".into()],
            fetch_failed_attempts: 0,
        };
        trials[2].network.fetch_failed_attempts = 2;
        trials[3].network.graded_in = Some(GradedIn::CleanRoom);
        let s = summarize(&trials);
        let a = &s.by_agent["a"].network;
        assert_eq!(
            (
                a.graded_shared,
                a.graded_clean_room,
                a.undeclared_trials,
                a.undeclared_hosts,
                a.fetch_failed_attempts
            ),
            (2, 0, 2, 2, 3)
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["by_agent"]["b"]["network"]["graded_clean_room"], 1);
        assert_eq!(json["total"]["network"]["undeclared_hosts"], 2);
        let md = s.network_markdown();
        assert!(md.contains("| a | 2 | 0 | 2 | 2 | 3 |\n"), "{md}");
        assert!(md.contains("| b | 0 | 1 | 0 | 0 | 0 |\n"), "{md}");
        assert!(md.contains("| **total** | 2 | 1 | 2 | 2 | 3 |\n"), "{md}");
        // A summary stored before the counts existed still reads.
        let mut old = json.clone();
        old["by_agent"]["a"]
            .as_object_mut()
            .unwrap()
            .remove("network");
        let back: Summary = serde_json::from_value(old).unwrap();
        assert_eq!(back.by_agent["a"].network, Default::default());
    }

    #[test]
    fn one_definition_of_without_cost_and_of_cost_per_solved() {
        let paid = |usd| Spend {
            cost_usd: Some(usd),
            ..Spend::default()
        };
        let mut trials = vec![
            t("a", 1, State::Completed, Some(true)),
            t("a", 2, State::Completed, Some(false)),
            t("b", 3, State::Completed, Some(true)),
            t("b", 4, State::Cancelled, None),
        ];
        trials[0].spend = paid(0.5);
        trials[1].spend = paid(0.25);
        // trials[2]: solved, no cost reported (like codex). trials[3]: cancelled by the budget
        // before it started: no attempt, spent nothing.
        trials[3].attempts = 0;
        let s = summarize(&trials);
        assert_eq!(s.by_agent["a"].spend.cost_per_solved_usd, Some(0.75));
        assert_eq!(s.by_agent["b"].spend.cost_per_solved_usd, None);
        assert_eq!(
            s.by_agent["b"].spend.trials_without_cost, 1,
            "not the cancelled"
        );
        assert_eq!(s.total.spend.trials_without_cost, 1);
        assert_eq!(
            s.total.spend.cost_per_solved_usd,
            Some(0.75),
            "the solved trial of unknown cost is not in the denominator"
        );
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

    #[test]
    fn spend_per_agent_is_the_sum_over_its_trials_in_json_markdown_and_junit() {
        let spend = |i: u64, usd: Option<f64>| Spend {
            input_tokens: Some(i),
            cached_input_tokens: Some(i / 10),
            output_tokens: Some(i / 100),
            cost_usd: usd,
        };
        let mut trials = vec![
            t("a", 1, State::Completed, Some(true)),
            t("a", 2, State::InfrastructureError, None),
            t("a", 3, State::Completed, Some(true)),
            t("b", 4, State::Completed, Some(false)),
            t("b", 5, State::Failed, None),
        ];
        trials[0].spend = spend(1000, Some(0.25));
        trials[1].spend = spend(200, Some(0.05));
        trials[2].spend = spend(3000, Some(0.5));
        trials[3].spend = spend(500, None);
        // trials[4] reported nothing.
        let s = summarize(&trials);
        let a = &s.by_agent["a"].spend;
        assert_eq!(a.spend.input_tokens, Some(4200));
        assert_eq!(a.spend.cached_input_tokens, Some(420));
        assert_eq!(a.spend.output_tokens, Some(42));
        assert_eq!(a.spend.cost_usd, Some(0.8));
        assert_eq!(a.cost_per_solved_usd, Some(0.4));
        let b = &s.by_agent["b"].spend;
        assert_eq!(b.spend.input_tokens, Some(500));
        assert_eq!(b.spend.cost_usd, None, "no trial of b reported a cost");
        assert_eq!(b.trials_without_cost, 2);
        assert_eq!(b.cost_per_solved_usd, None, "b solved nothing");
        let total = &s.total.spend;
        assert_eq!(total.spend.input_tokens, Some(4700));
        assert_eq!(total.spend.cost_usd, Some(0.8));
        assert_eq!(total.trials_without_cost, 2);
        assert_eq!(total.cost_per_solved_usd, Some(0.4));

        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["by_agent"]["a"]["spend"]["input_tokens"], 4200);
        assert_eq!(json["by_agent"]["a"]["spend"]["cost_per_solved_usd"], 0.4);
        assert!(json["by_agent"]["b"]["spend"]["cost_usd"].is_null());

        let md = s.to_markdown();
        assert!(
            md.contains("| 4200 | 420 | 42 | $0.8000 | $0.4000 |"),
            "{md}"
        );
        assert!(md.contains("| 500 | 50 | 5 | n/a | n/a |"), "{md}");
        assert!(
            md.contains("| 4700 | 470 | 47 | $0.8000 (2 without) | $0.4000 |"),
            "{md}"
        );

        let junit = to_junit(&trials);
        assert!(
            junit.contains("<properties><property name=\"input_tokens\" value=\"4200\"/><property name=\"cached_input_tokens\" value=\"420\"/><property name=\"output_tokens\" value=\"42\"/><property name=\"cost_usd\" value=\"0.8\"/></properties>"),
            "{junit}"
        );
        assert!(
            junit.contains("name=\"r/b/5\"><failure"),
            "no properties for nothing reported: {junit}"
        );
    }
}
