//! What the HTML report of a run shows, computed from its trials and records (pure): rates
//! with Wilson intervals per agent, the task-by-agent matrix, cost and tokens per agent
//! (absent stays absent: a sum only over the attempts that reported it, with how many did),
//! infrastructure errors by cause, every attempt's span for the timeline, and per agent
//! where its verdicts were graded, the undeclared hosts its agent reached for and the
//! attempts a grading fetch ended ([`crate::report::network`]), and per multi-step task what
//! its steps' trials reached, passed and where they stopped ([`crate::report::steps`]).

use crate::accounting::Bucket;
use crate::compare::{CompareTrial, SideRates};
use crate::record::AttemptRecord;
use crate::report::network::{NetworkAcc, NetworkCounts, TrialNetwork};
use crate::report::steps::{task_steps, TaskSteps, TrialSteps};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The recorded attempts of one trial.
#[derive(Debug, Clone, Copy)]
pub struct TrialAttempts<'a> {
    /// Trial key.
    pub key: &'a str,
    /// Its attempts, in order.
    pub attempts: &'a [AttemptRecord],
}

/// One cell of the matrix: a repetition's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Repetition.
    pub repetition: u32,
    /// Where it landed.
    pub bucket: Bucket,
    /// Trial key.
    pub key: String,
}

/// Cost and tokens of one agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Attempts recorded.
    pub attempts: u64,
    /// Attempts that reported a cost.
    pub attempts_with_cost: u64,
    /// Sum of the reported costs, USD; `None` when none reported one.
    pub cost_usd: Option<f64>,
    /// Attempts whose cost akbench computed from the descriptor's `[price]` (counted in
    /// `attempts_with_cost` and `cost_usd`: `observations.cost_computed`).
    #[serde(default)]
    pub attempts_with_computed_cost: u64,
    /// Attempts that reported token counts.
    pub attempts_with_tokens: u64,
    /// Uncached input tokens; `None` when none reported them.
    pub input_tokens: Option<u64>,
    /// Cached input tokens; `None` when none reported them.
    pub cached_input_tokens: Option<u64>,
    /// Output tokens; `None` when none reported them.
    pub output_tokens: Option<u64>,
}

fn add<T: std::ops::Add<Output = T> + Copy>(sum: &mut Option<T>, x: Option<T>) {
    if let Some(x) = x {
        *sum = Some(sum.map_or(x, |s| s + x));
    }
}

/// One attempt on the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Trial key.
    pub trial: String,
    /// Agent label.
    pub agent: String,
    /// Attempt number.
    pub number: u32,
    /// Terminal state.
    pub state: String,
    /// Milliseconds from the first attempt's start.
    pub start_ms: i64,
    /// Milliseconds from the first attempt's start.
    pub end_ms: i64,
}

/// The report of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    /// All trials.
    pub total: SideRates,
    /// Per agent label.
    pub by_agent: BTreeMap<String, SideRates>,
    /// Task ids, sorted.
    pub tasks: Vec<String>,
    /// Agent labels, sorted.
    pub agents: Vec<String>,
    /// task -> agent -> repetitions.
    pub matrix: BTreeMap<String, BTreeMap<String, Vec<Cell>>>,
    /// Per agent label.
    pub usage: BTreeMap<String, Usage>,
    /// Attempts that ended `infrastructure_error`, by cause (retried ones included).
    pub infrastructure_causes: BTreeMap<String, u64>,
    /// Every recorded attempt, by start.
    pub timeline: Vec<Span>,
    /// Per agent label: verdicts graded in the agent's environment and in a clean room,
    /// trials whose agent reached for undeclared hosts, attempts ended by a grading fetch.
    #[serde(default)]
    pub network: BTreeMap<String, NetworkCounts>,
    /// Per multi-step task, its steps over the trials (by their last attempts); empty when
    /// the run has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<TaskSteps>,
}

/// Builds the view of a run from its trials and the recorded attempts (matched by key).
pub fn build(trials: &[CompareTrial], records: &[TrialAttempts<'_>]) -> RunView {
    let agent_of: BTreeMap<&str, &str> = trials
        .iter()
        .map(|t| (t.key.as_str(), t.agent.as_str()))
        .collect();
    let task_of: BTreeMap<&str, &str> = trials
        .iter()
        .map(|t| (t.key.as_str(), t.task.as_str()))
        .collect();
    let steps = task_steps(
        &records
            .iter()
            .filter_map(|r| {
                Some(TrialSteps {
                    task: task_of.get(r.key)?,
                    steps: r.attempts.last().map_or(&[][..], |a| &a.steps),
                })
            })
            .collect::<Vec<_>>(),
    );
    let mut by_agent_counts: BTreeMap<String, crate::accounting::BucketCounts> = BTreeMap::new();
    let mut total = crate::accounting::BucketCounts::default();
    let mut matrix: BTreeMap<String, BTreeMap<String, Vec<Cell>>> = BTreeMap::new();
    for t in trials {
        total.add(t.bucket);
        by_agent_counts
            .entry(t.agent.clone())
            .or_default()
            .add(t.bucket);
        matrix
            .entry(t.task.clone())
            .or_default()
            .entry(t.agent.clone())
            .or_default()
            .push(Cell {
                repetition: t.repetition,
                bucket: t.bucket,
                key: t.key.clone(),
            });
    }
    for agents in matrix.values_mut() {
        for cells in agents.values_mut() {
            cells.sort_by_key(|c| c.repetition);
        }
    }
    let mut usage: BTreeMap<String, Usage> = BTreeMap::new();
    let mut causes: BTreeMap<String, u64> = BTreeMap::new();
    let mut spans = Vec::new();
    let mut network: BTreeMap<String, NetworkAcc> = BTreeMap::new();
    for r in records {
        let agent = agent_of.get(r.key).copied().unwrap_or("?").to_string();
        network
            .entry(agent.clone())
            .or_default()
            .add(&TrialNetwork::of_attempts(r.attempts));
        let u = usage.entry(agent.clone()).or_default();
        for a in r.attempts {
            u.attempts += 1;
            let o = &a.observations;
            if o.cost_usd.is_some() {
                u.attempts_with_cost += 1;
                u.attempts_with_computed_cost += u64::from(o.cost_computed);
            }
            add(&mut u.cost_usd, o.cost_usd);
            if o.input_tokens.is_some() || o.output_tokens.is_some() {
                u.attempts_with_tokens += 1;
            }
            add(&mut u.input_tokens, o.input_tokens);
            add(&mut u.cached_input_tokens, o.cached_input_tokens);
            add(&mut u.output_tokens, o.output_tokens);
            if a.state == crate::lifecycle::State::InfrastructureError {
                let cause = a
                    .cause
                    .clone()
                    .unwrap_or_else(|| "(no cause recorded)".into());
                let cause: String = if cause.chars().count() > 200 {
                    cause
                        .chars()
                        .take(199)
                        .chain(std::iter::once('…'))
                        .collect()
                } else {
                    cause
                };
                *causes.entry(cause).or_default() += 1;
            }
            if let (Some(first), Some(last)) = (a.transitions.first(), a.transitions.last()) {
                spans.push((
                    first.at,
                    last.at,
                    r.key.to_string(),
                    agent.clone(),
                    a.number,
                    a.state.as_str().to_string(),
                ));
            }
        }
    }
    let origin = spans.iter().map(|s| s.0).min();
    let mut timeline: Vec<Span> = spans
        .into_iter()
        .map(|(start, end, trial, agent, number, state)| {
            let o = origin.unwrap_or(start);
            Span {
                trial,
                agent,
                number,
                state,
                start_ms: (start - o).num_milliseconds(),
                end_ms: (end - o).num_milliseconds(),
            }
        })
        .collect();
    timeline
        .sort_by(|a, b| (a.start_ms, &a.trial, a.number).cmp(&(b.start_ms, &b.trial, b.number)));
    RunView {
        total: SideRates::from_counts(total),
        tasks: matrix.keys().cloned().collect(),
        agents: by_agent_counts.keys().cloned().collect(),
        by_agent: by_agent_counts
            .into_iter()
            .map(|(a, c)| (a, SideRates::from_counts(c)))
            .collect(),
        matrix,
        usage,
        infrastructure_causes: causes,
        timeline,
        network: network.into_iter().map(|(a, n)| (a, n.finish())).collect(),
        steps,
    }
}

#[cfg(test)]
mod tests;
