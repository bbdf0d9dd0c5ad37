//! A Harbor multi-step trial's `step_results` as the imported attempt's `steps`
//! (`core::record::steps::StepResult`): each step's rewards and its verdict by core's rule
//! ([`verdict`] with the task's `pass_threshold`), its start and end from Harbor's
//! `agent_execution` and `verifier` timings, its tokens and cost from its `agent_result`
//! (input tokens without the cached ones, as the attempt's), its cause from its
//! `exception_info`. A step of the task Harbor left no result for is `not_run`, and the last
//! step Harbor ran before it says so (`gated_stop`). A one-step trial has no steps.

use super::{AgentResult, StepResult as HarborStep, TrialResult};
use crate::record::steps::{verdict, StepResult};

/// The steps of Harbor result `r`: the task's `planned` step names in order (from the export
/// manifest; empty when unknown), then any step Harbor ran that the plan does not name, in
/// Harbor's order.
pub fn steps(r: &TrialResult, planned: &[String], pass_threshold: f64) -> Vec<StepResult> {
    let ran: &[HarborStep] = r.step_results.as_deref().unwrap_or(&[]);
    let mut out: Vec<StepResult> = planned
        .iter()
        .map(|name| match ran.iter().find(|s| &s.step_name == name) {
            Some(s) => step(s, pass_threshold),
            None => StepResult::not_run(name),
        })
        .collect();
    out.extend(
        ran.iter()
            .filter(|s| !planned.contains(&s.step_name))
            .map(|s| step(s, pass_threshold)),
    );
    // The last step that ran before a step that did not: Harbor stopped the trial there.
    if let Some(i) = out.iter().rposition(|s| s.verdict != NOT_RUN) {
        if out[i + 1..].iter().any(|s| s.verdict == NOT_RUN) {
            out[i].gated_stop = Some(match &out[i].cause {
                Some(c) => format!("Harbor ran no later step after this one ({c})"),
                None => "Harbor ran no later step after this one (its `min_reward` gate)".into(),
            });
        }
    }
    out
}

const NOT_RUN: crate::record::steps::StepVerdict = crate::record::steps::StepVerdict::NotRun;

/// One step Harbor ran.
fn step(s: &HarborStep, pass_threshold: f64) -> StepResult {
    let rewards = s
        .verifier_result
        .as_ref()
        .and_then(|v| v.rewards.clone())
        .map(|m| {
            m.into_iter()
                .filter(|(_, x)| x.is_finite())
                .collect::<std::collections::BTreeMap<_, _>>()
        });
    let agent = s.agent_execution.as_ref();
    let grading = s.verifier.as_ref();
    let a: Option<&AgentResult> = s.agent_result.as_ref();
    StepResult {
        verdict: verdict(rewards.as_ref(), pass_threshold),
        rewards,
        started_at: agent
            .and_then(|t| t.started_at)
            .or_else(|| grading.and_then(|t| t.started_at)),
        ended_at: grading
            .and_then(|t| t.finished_at)
            .or_else(|| agent.and_then(|t| t.finished_at)),
        input_tokens: a
            .and_then(|a| a.n_input_tokens)
            .map(|n| n.saturating_sub(a.and_then(|a| a.n_cache_tokens).unwrap_or(0))),
        output_tokens: a.and_then(|a| a.n_output_tokens),
        cost_usd: a.and_then(|a| a.cost_usd).filter(|c| c.is_finite()),
        cause: s
            .exception_info
            .as_ref()
            .map(|e| match &e.exception_message {
                Some(m) if !m.is_empty() => format!("harbor: {}: {m}", e.exception_type),
                _ => format!("harbor: {}", e.exception_type),
            }),
        ..StepResult::not_run(&s.step_name)
    }
}
