//! The per-step results of a multi-step attempt (a finite lifecycle, `[[steps]]`) as the run
//! record keeps them, and the rule that turns them into the attempt's result: which steps
//! ran, which step's gate stopped the rest, the trial's rewards by the task's strategy and
//! its verdict, decided as for a one-step task (the score at or above `pass_threshold`).
//! The gate and the strategy are Harbor's (`core::task::steps`); this module only applies
//! them to what each step left.

use crate::record::{tripwire_held, TRIPWIRE_OK};
use crate::record::{Grade, Observations, TripwireFacts};
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

impl StepVerdict {
    /// The name the record writes.
    pub fn as_str(self) -> &'static str {
        match self {
            StepVerdict::Solved => "solved",
            StepVerdict::Failed => "failed",
            StepVerdict::NotGraded => "not_graded",
            StepVerdict::NotRun => "not_run",
        }
    }
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
    /// The tripwire of the step's grade (its twin run in the environment after the graded
    /// run, judged by the step's reference graded where the steps before it ran); absent
    /// when the step was not graded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripwire: Option<TripwireFacts>,
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
            tripwire: None,
        }
    }
}

/// A step's rewards from its `reward.json` as Harbor reads them (`VerifierResult.rewards`):
/// every top-level key with a finite number (a boolean or any other value left out); a
/// bare number is `reward`. `None` when the text is not JSON or holds no such key (the
/// caller keeps the grade's score as `reward`).
pub fn rewards_from_json(text: &str) -> Option<BTreeMap<String, f64>> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let out: BTreeMap<String, f64> = match &v {
        serde_json::Value::Object(m) => m
            .iter()
            .filter_map(|(k, v)| match v {
                serde_json::Value::Number(n) => n.as_f64().map(|x| (k.clone(), x)),
                _ => None,
            })
            .filter(|(_, x)| x.is_finite())
            .collect(),
        serde_json::Value::Number(n) => n
            .as_f64()
            .filter(|x| x.is_finite())
            .map(|x| BTreeMap::from([("reward".to_string(), x)]))
            .unwrap_or_default(),
        _ => BTreeMap::new(),
    };
    (!out.is_empty()).then_some(out)
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

/// What one step's agent observed ([`StepResult`]'s tokens and cost) taken from the
/// adapter's observations of that step.
pub fn take_spend(step: &mut StepResult, obs: &Observations) {
    step.input_tokens = obs.input_tokens;
    step.output_tokens = obs.output_tokens;
    step.cost_usd = obs.cost_usd;
}

/// The attempt's observations from its steps': every step's (in order) with tokens, turns
/// and cost summed over the steps that reported them (absent when none did), the rest (final
/// message, model, errors) the last step's. `per_step` holds each step's observations.
pub fn summed_observations(per_step: &[Observations]) -> Observations {
    fn sum<T: Copy + std::ops::Add<Output = T>>(xs: impl Iterator<Item = Option<T>>) -> Option<T> {
        xs.flatten().reduce(|a, b| a + b)
    }
    let mut out = per_step.last().cloned().unwrap_or_default();
    out.turns = sum(per_step.iter().map(|o| o.turns));
    out.input_tokens = sum(per_step.iter().map(|o| o.input_tokens));
    out.cached_input_tokens = sum(per_step.iter().map(|o| o.cached_input_tokens));
    out.output_tokens = sum(per_step.iter().map(|o| o.output_tokens));
    out.cost_usd = sum(per_step.iter().map(|o| o.cost_usd));
    out.cost_computed = per_step.iter().any(|o| o.cost_computed);
    out
}

/// The attempt's grade from its steps ([`outcome`] by the task's strategy): `None` when no
/// step was graded (the attempt ends not graded, as Harbor's trial has no verifier result).
/// Its `source` names the strategy (`steps_mean`, `steps_final`), its report lists each
/// step's verdict and rewards, `tampered` and `cause` are the steps' (any step's grading that
/// saw tampering makes the trial not solved), it ran `shared` in the agent's environment.
pub fn trial_grade(
    steps: &[StepResult],
    strategy: RewardStrategy,
    pass_threshold: f64,
    base: GradeBase,
) -> Option<Grade> {
    let o = outcome(steps, strategy, pass_threshold);
    let score = o.score?;
    let report = steps
        .iter()
        .map(|s| format!("{}\n", line(s)))
        .collect::<String>();
    let tampered = base.tampered.is_some();
    Some(Grade {
        ok: o.solved && !tampered,
        score: if tampered { 0.0 } else { score },
        source: format!("steps_{}", strategy.as_str()),
        exit_code: None,
        tests: Vec::new(),
        report,
        report_truncated: false,
        tests_digest: base.tests_digest,
        graded_at: base.graded_at,
        duration_ms: base.duration_ms,
        runtime: None,
        cause: base.tampered,
        tampered,
        tripwire: steps_tripwire(steps),
        withheld: Vec::new(),
        ended_by: None,
        environment: Some("shared".into()),
    })
}

/// The tripwire of a multi-step attempt's grade, from its steps': a grade counts as checked
/// by a tripwire only when every step graded solved was. `None` when a solved step was
/// graded without one; the first solved step whose tripwire did not hold, its result
/// naming the step; else one that held, naming the steps it covered, its duration the sum
/// of theirs. With no step solved: the first tripwire that did not hold (a step's twin that
/// saw tampering), else `None`.
pub fn steps_tripwire(steps: &[StepResult]) -> Option<TripwireFacts> {
    let solved: Vec<&StepResult> = steps
        .iter()
        .filter(|s| s.verdict == StepVerdict::Solved)
        .collect();
    let named = |s: &StepResult, t: &TripwireFacts| TripwireFacts {
        result: format!("step `{}`: {}", s.name, t.result),
        ..t.clone()
    };
    if solved.is_empty() {
        // Nothing solved: a tripwire that did not hold (the tampering a step's twin saw)
        // is kept for the record; one that held says nothing of a grade that is not solved.
        return steps.iter().find_map(|s| {
            s.tripwire
                .as_ref()
                .filter(|t| !tripwire_held(&t.result))
                .map(|t| named(s, t))
        });
    }
    let mut duration: Option<u64> = None;
    for s in &solved {
        let t = s.tripwire.as_ref()?;
        if !tripwire_held(&t.result) {
            return Some(named(s, t));
        }
        if let Some(d) = t.duration_ms {
            duration = Some(duration.unwrap_or(0).saturating_add(d));
        }
    }
    Some(TripwireFacts {
        name: solved
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        file: String::new(),
        result: TRIPWIRE_OK.to_string(),
        duration_ms: duration,
    })
}

/// One step in a line: `step NAME: VERDICT KEY=VALUE... (stopped the rest: WHY)`, `-` for
/// no rewards (the grade's report, `akbench run single`).
pub fn line(s: &StepResult) -> String {
    let rewards = s
        .rewards
        .as_ref()
        .map(|r| {
            r.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "-".into());
    let why = s
        .gated_stop
        .as_ref()
        .map(|g| format!(" (stopped the rest: {g})"))
        .unwrap_or_default();
    format!("step {}: {} {rewards}{why}", s.name, s.verdict.as_str())
}

/// What [`trial_grade`] takes from the run besides the steps.
#[derive(Debug, Clone, PartialEq)]
pub struct GradeBase {
    /// The task's tests digest.
    pub tests_digest: String,
    /// When the first step's grading ran.
    pub graded_at: DateTime<Utc>,
    /// The steps' grading time, summed.
    pub duration_ms: u64,
    /// A step's grading saw tampering: its cause.
    pub tampered: Option<String>,
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

    fn base() -> GradeBase {
        GradeBase {
            tests_digest: "sha256:t".into(),
            graded_at: chrono::DateTime::UNIX_EPOCH,
            duration_ms: 7,
            tampered: None,
        }
    }

    #[test]
    fn the_trial_grade_follows_the_steps_and_says_which_gate_stopped_them() {
        // (steps' rewards, gate of step one, strategy, tampered, want: (ok, score) or none)
        type Case = (
            Vec<Option<f64>>,
            Option<f64>,
            RewardStrategy,
            bool,
            Option<(bool, f64)>,
        );
        let cases: Vec<Case> = vec![
            (
                vec![Some(1.0), Some(1.0), Some(1.0)],
                Some(1.0),
                RewardStrategy::Mean,
                false,
                Some((true, 1.0)),
            ),
            (
                vec![Some(0.0), Some(1.0), Some(1.0)],
                Some(1.0),
                RewardStrategy::Mean,
                false,
                Some((false, 0.0)),
            ),
            (
                vec![Some(1.0), Some(0.0)],
                None,
                RewardStrategy::Final,
                false,
                Some((false, 0.0)),
            ),
            (
                vec![Some(0.0), Some(1.0)],
                None,
                RewardStrategy::Final,
                false,
                Some((true, 1.0)),
            ),
            (
                vec![Some(1.0), Some(1.0)],
                None,
                RewardStrategy::Mean,
                true,
                Some((false, 0.0)),
            ),
            (
                vec![None, Some(1.0)],
                None,
                RewardStrategy::Mean,
                false,
                None,
            ),
        ];
        for (rewards, gate, strategy, tampered, want) in cases {
            let mut steps: Vec<StepResult> = rewards
                .iter()
                .enumerate()
                .map(|(i, r)| StepResult {
                    rewards: r.map(|r| BTreeMap::from([("reward".to_string(), r)])),
                    cause: r
                        .is_none()
                        .then(|| "setup.sh exited with code 1".to_string()),
                    ..StepResult::not_run(&format!("s{i}"))
                })
                .collect();
            for i in 0..steps.len() {
                let min = (i == 0).then_some(gate).flatten().map(MinReward::Reward);
                if end_step(&mut steps[i], min.as_ref(), 1.0, true) {
                    for s in &mut steps[i + 1..] {
                        *s = StepResult::not_run(&s.name.clone());
                    }
                    break;
                }
            }
            let mut b = base();
            b.tampered = tampered.then(|| "grading tampered: x".to_string());
            let g = trial_grade(&steps, strategy, 1.0, b);
            assert_eq!(
                g.as_ref().map(|g| (g.ok, g.score)),
                want,
                "{rewards:?} {strategy:?}"
            );
            if let Some(g) = g {
                assert_eq!(g.source, format!("steps_{}", strategy.as_str()));
                assert_eq!(g.tampered, tampered);
                assert_eq!(g.report.lines().count(), steps.len(), "{}", g.report);
            }
        }
        // The gate's words reach the report.
        let mut steps = vec![graded("open", 0.0), StepResult::not_run("deposit")];
        end_step(&mut steps[0], Some(&MinReward::Reward(1.0)), 1.0, true);
        let g = trial_grade(&steps, RewardStrategy::Mean, 1.0, base()).unwrap();
        assert!(
            g.report
                .contains("stopped the rest: reward=0 below min_reward 1"),
            "{}",
            g.report
        );
        assert!(g.report.contains("step deposit: not_run -"), "{}", g.report);
    }

    /// A multi-step grade counts as checked by a tripwire only when every solved step was.
    #[test]
    fn the_trial_tripwire_holds_only_when_every_solved_step_held() {
        let held = |d| TripwireFacts {
            name: String::new(),
            file: "test_a.py".into(),
            result: TRIPWIRE_OK.into(),
            duration_ms: Some(d),
        };
        let tampered = TripwireFacts {
            result: "grading tampered: the agent's code passed the tripwire twin".into(),
            ..held(5)
        };
        let none = TripwireFacts {
            result: "none: no test to make a twin of".into(),
            ..held(0)
        };
        let step = |name: &str, v: StepVerdict, t: Option<TripwireFacts>| StepResult {
            verdict: v,
            tripwire: t,
            ..StepResult::not_run(name)
        };
        use StepVerdict::*;
        // (steps, want: None, or (result starts with, names, duration))
        type Want = Option<(&'static str, &'static str, Option<u64>)>;
        let cases: Vec<(Vec<StepResult>, Want)> = vec![
            (
                vec![
                    step("a", Solved, Some(held(3))),
                    step("b", Solved, Some(held(4))),
                ],
                Some((TRIPWIRE_OK, "a, b", Some(7))),
            ),
            // A solved step graded without a tripwire: the trial was not checked.
            (
                vec![step("a", Solved, Some(held(3))), step("b", Solved, None)],
                None,
            ),
            // One that did not hold is the trial's, naming the step.
            (
                vec![
                    step("a", Solved, Some(held(3))),
                    step("b", Solved, Some(none.clone())),
                ],
                Some(("step `b`: none:", "", Some(0))),
            ),
            // A failed step's tripwire does not count towards a solved trial's.
            (
                vec![step("a", Failed, None), step("b", Solved, Some(held(2)))],
                Some((TRIPWIRE_OK, "b", Some(2))),
            ),
            // Nothing solved: the tampering a twin saw is kept; a held one is not.
            (
                vec![
                    step("a", Failed, Some(held(1))),
                    step("b", Failed, Some(tampered)),
                ],
                Some(("step `b`: grading tampered", "", Some(5))),
            ),
            (
                vec![step("a", Failed, Some(held(1))), step("b", NotRun, None)],
                None,
            ),
            (vec![], None),
        ];
        for (steps, want) in cases {
            let got = steps_tripwire(&steps);
            let what = format!("{steps:?}");
            match (got, want) {
                (None, None) => {}
                (Some(t), Some((result, names, duration))) => {
                    assert!(t.result.starts_with(result), "{what}: {t:?}");
                    assert_eq!(tripwire_held(&t.result), result == TRIPWIRE_OK, "{what}");
                    if result == TRIPWIRE_OK {
                        assert_eq!(t.name, names, "{what}");
                    }
                    assert_eq!(t.duration_ms, duration, "{what}");
                }
                (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
            }
        }
        // The trial's grade carries it.
        let mut s = graded("a", 1.0);
        end_step(&mut s, None, 1.0, true);
        s.tripwire = Some(held(9));
        let g = trial_grade(&[s], RewardStrategy::Mean, 1.0, base()).unwrap();
        assert!(g.ok);
        assert_eq!(g.tripwire.map(|t| t.result), Some(TRIPWIRE_OK.to_string()));
    }

    #[test]
    fn a_reward_json_gives_every_numeric_key() {
        let m = |v: &[(&str, f64)]| {
            Some(
                v.iter()
                    .map(|(k, x)| (k.to_string(), *x))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let cases: &[(&str, Option<BTreeMap<String, f64>>)] = &[
            (
                r#"{"reward": 1, "tests": 0.5}"#,
                m(&[("reward", 1.0), ("tests", 0.5)]),
            ),
            (
                r#"{"tests": 1.0, "note": "x", "ok": true}"#,
                m(&[("tests", 1.0)]),
            ),
            ("0.25", m(&[("reward", 0.25)])),
            (r#"{"note": "x"}"#, None),
            ("not json", None),
            ("[1, 2]", None),
        ];
        for (text, want) in cases {
            assert_eq!(&rewards_from_json(text), want, "{text}");
        }
        // A keyed gate reads the key a reward.json gave.
        let keyed = MinReward::Keys(BTreeMap::from([("tests".to_string(), 1.0)]));
        let mut s = StepResult {
            rewards: rewards_from_json(r#"{"reward": 1, "tests": 0.5}"#),
            ..StepResult::not_run("a")
        };
        assert!(end_step(&mut s, Some(&keyed), 1.0, true));
        assert_eq!(s.verdict, StepVerdict::Solved);
    }

    #[test]
    fn the_attempts_spend_is_the_sum_of_its_steps() {
        let step = |i: Option<u64>, c: Option<f64>| Observations {
            input_tokens: i,
            output_tokens: i.map(|i| i / 10),
            cost_usd: c,
            model: Some(format!("m{}", i.unwrap_or(0))),
            ..Observations::default()
        };
        let o = summed_observations(&[
            step(Some(100), Some(0.5)),
            step(None, None),
            step(Some(50), Some(0.25)),
        ]);
        assert_eq!(
            (o.input_tokens, o.output_tokens, o.cost_usd),
            (Some(150), Some(15), Some(0.75))
        );
        assert_eq!(o.model.as_deref(), Some("m50"));
        let none = summed_observations(&[step(None, None)]);
        assert_eq!((none.input_tokens, none.cost_usd), (None, None));
        let mut s = StepResult::not_run("a");
        take_spend(&mut s, &step(Some(10), Some(0.1)));
        assert_eq!(
            (s.input_tokens, s.output_tokens, s.cost_usd),
            (Some(10), Some(1), Some(0.1))
        );
    }
}
