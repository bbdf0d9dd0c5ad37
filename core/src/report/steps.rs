//! What reports count of multi-step tasks (`[[steps]]`, issue 46): per task, for each step in
//! order, how many trials reached it, passed it, were stopped there, and the step's mean
//! reward, tokens and cost. A trial counts by its deciding attempt (its last: an infra-only
//! retry restarts the whole trial, so the last attempt's steps are the trial's). One
//! definition ([`task_steps`]) that `run aggregate` and `run report` apply; tasks whose
//! trials recorded no steps are left out, so a run without multi-step tasks reports nothing
//! here.

use crate::record::steps::{score, StepResult, StepVerdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One trial as this count sees it: its task and its deciding attempt's steps (empty when
/// that attempt ran none, or the task has one step).
#[derive(Debug, Clone, Copy)]
pub struct TrialSteps<'a> {
    /// Task id.
    pub task: &'a str,
    /// The deciding attempt's steps, in order.
    pub steps: &'a [StepResult],
}

/// One step of a task, over its trials.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepCounts {
    /// The step's name.
    pub name: String,
    /// Trials that started it (its verdict is not `not_run`).
    pub reached: u64,
    /// Trials that passed it: graded solved, or graded and let the trial go on (its reward
    /// at or above its `min_reward`, or the step has no gate).
    pub passed: u64,
    /// Trials it ended (its `min_reward` gate, or it failed before it was graded): the
    /// steps after it did not run.
    pub stopped: u64,
    /// Trials where it ran but was not graded (setup.sh, healthcheck or grading failed).
    pub not_graded: u64,
    /// Mean of the graded trials' step scores (`reward`, else `score`); absent when none
    /// was graded.
    pub mean_reward: Option<f64>,
    /// Trials whose step reported tokens.
    pub with_tokens: u64,
    /// Input tokens summed over them; absent when none reported them.
    pub input_tokens: Option<u64>,
    /// Output tokens summed over them; absent when none reported them.
    pub output_tokens: Option<u64>,
    /// Trials whose step reported a cost.
    pub with_cost: u64,
    /// Cost summed over them, USD; absent when none reported one.
    pub cost_usd: Option<f64>,
}

/// One multi-step task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskSteps {
    /// Task id.
    pub task: String,
    /// Its trials (those whose deciding attempt ran no step included).
    pub trials: u64,
    /// Its steps, in order.
    pub steps: Vec<StepCounts>,
}

fn add<T: std::ops::Add<Output = T> + Copy>(sum: &mut Option<T>, x: Option<T>) {
    if let Some(x) = x {
        *sum = Some(sum.map_or(x, |s| s + x));
    }
}

/// The steps of every multi-step task among `trials`, by task id. A task counts as
/// multi-step when any of its trials recorded steps; its steps are listed in the order
/// trials recorded them (by name, first seen first).
pub fn task_steps(trials: &[TrialSteps<'_>]) -> Vec<TaskSteps> {
    /// One task's trials, its steps and, beside each, its graded scores' sum and count.
    #[derive(Default)]
    struct Acc {
        trials: u64,
        steps: Vec<StepCounts>,
        scores: Vec<(f64, u64)>,
    }
    let mut tasks: BTreeMap<&str, Acc> = BTreeMap::new();
    for t in trials {
        let acc = tasks.entry(t.task).or_default();
        acc.trials += 1;
        for s in t.steps {
            let i = match acc.steps.iter().position(|c| c.name == s.name) {
                Some(i) => i,
                None => {
                    acc.steps.push(StepCounts {
                        name: s.name.clone(),
                        ..StepCounts::default()
                    });
                    acc.scores.push((0.0, 0));
                    acc.steps.len() - 1
                }
            };
            if s.verdict == StepVerdict::NotRun {
                continue;
            }
            let c = &mut acc.steps[i];
            c.reached += 1;
            let graded = matches!(s.verdict, StepVerdict::Solved | StepVerdict::Failed);
            c.passed +=
                u64::from(s.verdict == StepVerdict::Solved || (graded && s.gated_stop.is_none()));
            c.stopped += u64::from(s.gated_stop.is_some());
            c.not_graded += u64::from(s.verdict == StepVerdict::NotGraded);
            if let Some(r) = s.rewards.as_ref().and_then(score) {
                acc.scores[i].0 += r;
                acc.scores[i].1 += 1;
            }
            if s.input_tokens.is_some() || s.output_tokens.is_some() {
                c.with_tokens += 1;
            }
            add(&mut c.input_tokens, s.input_tokens);
            add(&mut c.output_tokens, s.output_tokens);
            c.with_cost += u64::from(s.cost_usd.is_some());
            add(&mut c.cost_usd, s.cost_usd);
        }
    }
    tasks
        .into_iter()
        .filter(|(_, acc)| !acc.steps.is_empty())
        .map(|(task, mut acc)| {
            for (c, (sum, n)) in acc.steps.iter_mut().zip(&acc.scores) {
                c.mean_reward = (*n > 0).then(|| sum / *n as f64);
            }
            TaskSteps {
                task: task.to_string(),
                trials: acc.trials,
                steps: acc.steps,
            }
        })
        .collect()
}

/// The text section (`run aggregate`): per task a heading line and a markdown table of its
/// steps; empty when there is no multi-step task. `n/a` for what no trial reported.
pub fn to_markdown(tasks: &[TaskSteps]) -> String {
    let mut out = String::new();
    for (n, t) in tasks.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "steps of {} ({} trial{})\n",
            t.task,
            t.trials,
            if t.trials == 1 { "" } else { "s" }
        );
        out.push_str(
            "| step | reached | passed | stopped here | not graded | mean reward | input tokens | output tokens | cost |\n",
        );
        out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (i, s) in t.steps.iter().enumerate() {
            let _ = writeln!(
                out,
                "| {}. {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                i + 1,
                s.name,
                s.reached,
                s.passed,
                s.stopped,
                s.not_graded,
                s.mean_reward
                    .map_or_else(|| "n/a".to_string(), |r| format!("{r:.3}")),
                crate::spend::fmt_count(s.input_tokens),
                crate::spend::fmt_count(s.output_tokens),
                crate::spend::fmt_usd(s.cost_usd),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, verdict: StepVerdict, reward: Option<f64>, stop: bool) -> StepResult {
        StepResult {
            verdict,
            rewards: reward.map(|r| BTreeMap::from([("reward".to_string(), r)])),
            gated_stop: stop.then(|| "reward=0 below min_reward 1".to_string()),
            ..StepResult::not_run(name)
        }
    }

    use StepVerdict::*;

    /// (steps of each trial of task `t`, want per step: (name, reached, passed, stopped,
    /// not graded, mean reward)).
    type Want<'a> = Vec<(&'a str, u64, u64, u64, u64, Option<f64>)>;

    #[test]
    fn each_step_counts_the_trials_that_reached_passed_and_stopped_there() {
        let oracle = vec![
            step("open", Solved, Some(1.0), false),
            step("deposit", Solved, Some(1.0), false),
            step("report", Solved, Some(1.0), false),
        ];
        let gated = vec![
            step("open", Failed, Some(0.0), true),
            step("deposit", NotRun, None, false),
            step("report", NotRun, None, false),
        ];
        let setup_failed = vec![
            step("open", Solved, Some(1.0), false),
            StepResult {
                cause: Some("setup.sh exited with code 1".into()),
                ..step("deposit", NotGraded, None, true)
            },
            step("report", NotRun, None, false),
        ];
        // No gate on `open`: graded below the threshold, the trial went on.
        let ungated = vec![
            step("open", Failed, Some(0.5), false),
            step("deposit", Solved, Some(1.0), false),
            step("report", Failed, Some(0.0), true),
        ];
        // Solved by `reward` but stopped by a keyed gate on another key.
        let keyed = vec![step("open", Solved, Some(1.0), true)];
        let cases: Vec<(Vec<Vec<StepResult>>, Want)> = vec![
            (
                vec![oracle.clone(), gated.clone()],
                vec![
                    ("open", 2, 1, 1, 0, Some(0.5)),
                    ("deposit", 1, 1, 0, 0, Some(1.0)),
                    ("report", 1, 1, 0, 0, Some(1.0)),
                ],
            ),
            (
                vec![gated.clone(), gated.clone()],
                vec![
                    ("open", 2, 0, 2, 0, Some(0.0)),
                    ("deposit", 0, 0, 0, 0, None),
                    ("report", 0, 0, 0, 0, None),
                ],
            ),
            (
                vec![setup_failed, ungated],
                vec![
                    ("open", 2, 2, 0, 0, Some(0.75)),
                    ("deposit", 2, 1, 1, 1, Some(1.0)),
                    ("report", 1, 0, 1, 0, Some(0.0)),
                ],
            ),
            (vec![keyed], vec![("open", 1, 1, 1, 0, Some(1.0))]),
        ];
        for (runs, want) in cases {
            let trials: Vec<TrialSteps<'_>> = runs
                .iter()
                .map(|s| TrialSteps {
                    task: "t",
                    steps: s,
                })
                .collect();
            let got = task_steps(&trials);
            assert_eq!(got.len(), 1, "{got:?}");
            assert_eq!(got[0].trials, runs.len() as u64);
            let got: Want<'_> = got[0]
                .steps
                .iter()
                .map(|s| {
                    (
                        s.name.as_str(),
                        s.reached,
                        s.passed,
                        s.stopped,
                        s.not_graded,
                        s.mean_reward,
                    )
                })
                .collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn one_step_tasks_are_left_out_and_trials_without_steps_still_count() {
        let ran = vec![step("a", Solved, Some(1.0), false)];
        let trials = [
            TrialSteps {
                task: "multi",
                steps: &ran,
            },
            // Its deciding attempt ended before any step (an infrastructure error).
            TrialSteps {
                task: "multi",
                steps: &[],
            },
            TrialSteps {
                task: "single",
                steps: &[],
            },
        ];
        let got = task_steps(&trials);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].task.as_str(), got[0].trials), ("multi", 2));
        assert_eq!(got[0].steps[0].reached, 1);
        assert!(task_steps(&trials[2..]).is_empty());
        assert_eq!(to_markdown(&[]), "");
    }

    #[test]
    fn tokens_and_cost_sum_only_what_steps_reported() {
        let spent = |i: Option<u64>, c: Option<f64>| StepResult {
            input_tokens: i,
            output_tokens: i.map(|i| i / 10),
            cost_usd: c,
            ..step("a", Solved, Some(1.0), false)
        };
        let a = [spent(Some(100), Some(0.5))];
        let b = [spent(None, None)];
        let c = [spent(Some(50), None)];
        let trials = [
            TrialSteps {
                task: "t",
                steps: &a,
            },
            TrialSteps {
                task: "t",
                steps: &b,
            },
            TrialSteps {
                task: "t",
                steps: &c,
            },
        ];
        let s = &task_steps(&trials)[0].steps[0];
        assert_eq!(
            (s.with_tokens, s.input_tokens, s.output_tokens),
            (2, Some(150), Some(15))
        );
        assert_eq!((s.with_cost, s.cost_usd), (1, Some(0.5)));
        let none = &task_steps(&trials[1..2])[0].steps[0];
        assert_eq!((none.input_tokens, none.cost_usd), (None, None));
        let md = to_markdown(&task_steps(&trials[1..2]));
        assert!(
            md.contains("| 1. a | 1 | 1 | 0 | 0 | 1.000 | n/a | n/a | n/a |"),
            "{md}"
        );
        assert!(md.starts_with("steps of t (1 trial)\n"), "{md}");
        let md = to_markdown(&task_steps(&trials));
        assert!(
            md.contains("| 1. a | 3 | 3 | 0 | 0 | 1.000 | 150 | 15 | $0.5000 |\n"),
            "{md}"
        );
        // Two tasks: one blank line between their tables, none after the last.
        let other = [TrialSteps {
            task: "u",
            steps: &a,
        }];
        let md = to_markdown(&task_steps(&[trials[0], other[0]]));
        assert!(md.contains("$0.5000 |\n\nsteps of u (1 trial)\n"), "{md}");
        assert!(md.ends_with("$0.5000 |\n"), "{md}");
    }
}
