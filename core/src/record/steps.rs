//! The per-step results of a multi-step attempt (a finite lifecycle, `[[steps]]`) as the run
//! record keeps them, and the rule that turns them into the attempt's result: which steps
//! ran, which step's gate stopped the rest, the trial's rewards by the task's strategy and
//! its verdict, decided as for a one-step task (the score at or above `pass_threshold`).
//! The gate and the strategy are Harbor's (`core::task::steps`); this module only applies
//! them to what each step left.

use crate::task::steps::{stops_after, trial_rewards, MinReward, RewardStrategy};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How one step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepVerdict {
    /// Graded, its score at or above the task's `pass_threshold`.
    Solved,
    /// Graded, below it.
    Failed,
    /// It ran but was not graded: its setup.sh or healthcheck failed, or its grading
    /// crashed (Harbor: no `verifier_result`).
    NotGraded,
    /// An earlier step stopped the trial ([`StepResult::gated_stop`] of that step).
    NotRun,
}

/// One step of an attempt, in the record (`attempts[].steps[]`, docs/record.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// The step's name (its folder under `steps/`).
    pub name: String,
    /// The grading's rewards by key (`reward`, or a reward.json's keys); absent when the
    /// step was not graded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewards: Option<BTreeMap<String, f64>>,
    /// How it ended.
    pub verdict: StepVerdict,
    /// When the step began (its workdir upload) and ended (its artifacts collected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// See `started_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    /// The agent's exit code in this step, when its agent ran and exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_exit: Option<i32>,
    /// Tokens the agent used in this step (input, output), as observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// See `input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// What the step's agent run cost, in USD, as observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The step's artifacts (relative to the record's folder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    /// Why the remaining steps did not run after this one (its `min_reward` gate, or a
    /// failure before grading); absent when the trial went on or this was the last step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gated_stop: Option<String>,
    /// Why the step was not graded (its setup.sh, healthcheck or grading failing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

impl StepResult {
    /// A step that has not run (yet): the start of its record.
    pub fn not_run(name: &str) -> StepResult {
        StepResult {
            name: name.to_string(),
            rewards: None,
            verdict: StepVerdict::NotRun,
            started_at: None,
            ended_at: None,
            agent_exit: None,
            input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            artifacts: Vec::new(),
            gated_stop: None,
            cause: None,
        }
    }
}

/// The score of a set of rewards, as a one-step grade reads a reward.json: `reward`, else
/// `score`.
pub fn score(rewards: &BTreeMap<String, f64>) -> Option<f64> {
    rewards
        .get("reward")
        .or_else(|| rewards.get("score"))
        .copied()
}

/// A step's verdict from its rewards (`None`: not graded) and the task's `pass_threshold`.
pub fn verdict(rewards: Option<&BTreeMap<String, f64>>, pass_threshold: f64) -> StepVerdict {
    match rewards.map(score) {
        None => StepVerdict::NotGraded,
        Some(Some(s)) if s >= pass_threshold => StepVerdict::Solved,
        Some(_) => StepVerdict::Failed,
    }
}

/// After step `i` of `steps` ended (`rewards`, `cause` set by its runner): its verdict, and
/// whether the trial stops there (`gated_stop`, Harbor's `_should_stop_after_step`). Returns
/// true when the remaining steps must not run. `min` is the step's gate; `grading`: the run
/// grades (without grading no gate applies, as in Harbor).
pub fn end_step(
    step: &mut StepResult,
    min: Option<&MinReward>,
    pass_threshold: f64,
    grading: bool,
) -> bool {
    step.verdict = verdict(step.rewards.as_ref(), pass_threshold);
    let failed = step.cause.is_some();
    step.gated_stop = stops_after(failed, step.rewards.as_ref(), min, grading);
    step.gated_stop.is_some()
}

/// The attempt's result from its steps: the trial's rewards by `strategy` (steps that did
/// not run are not graded and left out, as in Harbor), its score and whether it solved.
#[derive(Debug, Clone, PartialEq)]
pub struct StepsOutcome {
    /// The trial's rewards; absent when no step was graded.
    pub rewards: Option<BTreeMap<String, f64>>,
    /// Their score (`reward`, else `score`).
    pub score: Option<f64>,
    /// The score is at or above the task's `pass_threshold`.
    pub solved: bool,
}

/// See [`StepsOutcome`].
pub fn outcome(
    steps: &[StepResult],
    strategy: RewardStrategy,
    pass_threshold: f64,
) -> StepsOutcome {
    // Harbor keeps a result per step that started; steps after a gate have none.
    let ran: Vec<Option<BTreeMap<String, f64>>> = steps
        .iter()
        .filter(|s| s.verdict != StepVerdict::NotRun)
        .map(|s| s.rewards.clone())
        .collect();
    let rewards = trial_rewards(strategy, &ran);
    let score = rewards.as_ref().and_then(score);
    StepsOutcome {
        solved: score.is_some_and(|s| s >= pass_threshold),
        rewards,
        score,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graded(name: &str, reward: f64) -> StepResult {
        StepResult {
            rewards: Some(BTreeMap::from([("reward".to_string(), reward)])),
            ..StepResult::not_run(name)
        }
    }

    #[test]
    fn a_failed_gate_stops_the_trial_and_the_rest_is_not_run() {
        let mut steps = vec![
            graded("one", 0.0),
            StepResult::not_run("two"),
            StepResult::not_run("three"),
        ];
        let stop = end_step(&mut steps[0], Some(&MinReward::Reward(1.0)), 1.0, true);
        assert!(stop);
        assert_eq!(steps[0].verdict, StepVerdict::Failed);
        assert_eq!(
            steps[0].gated_stop.as_deref(),
            Some("reward=0 below min_reward 1")
        );
        let o = outcome(&steps, RewardStrategy::Mean, 1.0);
        // Harbor's mean leaves out the steps that never ran: the trial scores step one's.
        assert_eq!(o.score, Some(0.0));
        assert!(!o.solved);
        assert_eq!(steps[1].verdict, StepVerdict::NotRun);
    }

    #[test]
    fn every_step_solved_solves_the_trial_by_either_strategy() {
        let mut steps = vec![graded("one", 1.0), graded("two", 1.0), graded("three", 1.0)];
        for s in &mut steps {
            assert!(!end_step(s, Some(&MinReward::Reward(1.0)), 1.0, true));
            assert_eq!(s.verdict, StepVerdict::Solved);
        }
        for strategy in [RewardStrategy::Mean, RewardStrategy::Final] {
            let o = outcome(&steps, strategy, 1.0);
            assert!(o.solved, "{strategy:?}");
            assert_eq!(o.score, Some(1.0));
        }
    }

    #[test]
    fn the_verdict_follows_the_strategy_and_the_threshold() {
        let mut steps = vec![graded("one", 1.0), graded("two", 0.0)];
        for s in &mut steps {
            end_step(s, None, 1.0, true);
        }
        let mean = outcome(&steps, RewardStrategy::Mean, 0.5);
        assert_eq!((mean.score, mean.solved), (Some(0.5), true));
        let fin = outcome(&steps, RewardStrategy::Final, 0.5);
        assert_eq!((fin.score, fin.solved), (Some(0.0), false));
    }

    #[test]
    fn a_step_that_failed_before_grading_stops_the_trial_and_is_not_graded() {
        let mut s = StepResult {
            cause: Some("setup.sh exited with code 1".into()),
            ..StepResult::not_run("one")
        };
        assert!(end_step(&mut s, None, 1.0, true));
        assert_eq!(s.verdict, StepVerdict::NotGraded);
        let o = outcome(&[s], RewardStrategy::Mean, 1.0);
        assert_eq!((o.rewards, o.solved), (None, false));
    }

    #[test]
    fn the_record_section_round_trips_and_leaves_out_what_is_unset() {
        let mut s = graded("one", 0.5);
        s.agent_exit = Some(0);
        s.gated_stop = Some("reward=0.5 below min_reward 1".into());
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["verdict"], "not_run");
        assert!(v.get("cost_usd").is_none() && v.get("artifacts").is_none());
        let back: StepResult = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }
}
