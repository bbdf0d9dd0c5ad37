//! The one conversion of core's per-step counts of multi-step tasks
//! (`akbench_core::report::steps::TaskSteps`) to and from the wire's (`RunStatus.steps`): the
//! coordinator sends what core counted, `akbench run status` gets back the same values to
//! print with core's renderer.

use crate::v1 as pb;
use akbench_core::report::steps::{StepCounts, TaskSteps};

/// The wire's form of `tasks`.
pub fn to_wire(tasks: &[TaskSteps]) -> Vec<pb::TaskSteps> {
    tasks
        .iter()
        .map(|t| pb::TaskSteps {
            task: t.task.clone(),
            trials: t.trials,
            steps: t
                .steps
                .iter()
                .map(|s| pb::StepCounts {
                    name: s.name.clone(),
                    reached: s.reached,
                    passed: s.passed,
                    stopped: s.stopped,
                    not_graded: s.not_graded,
                    mean_reward: s.mean_reward,
                    with_tokens: s.with_tokens,
                    input_tokens: s.input_tokens,
                    output_tokens: s.output_tokens,
                    with_cost: s.with_cost,
                    cost_usd: s.cost_usd,
                })
                .collect(),
        })
        .collect()
}

/// Core's form of the wire's `tasks`.
pub fn from_wire(tasks: &[pb::TaskSteps]) -> Vec<TaskSteps> {
    tasks
        .iter()
        .map(|t| TaskSteps {
            task: t.task.clone(),
            trials: t.trials,
            steps: t
                .steps
                .iter()
                .map(|s| StepCounts {
                    name: s.name.clone(),
                    reached: s.reached,
                    passed: s.passed,
                    stopped: s.stopped,
                    not_graded: s.not_graded,
                    mean_reward: s.mean_reward,
                    with_tokens: s.with_tokens,
                    input_tokens: s.input_tokens,
                    output_tokens: s.output_tokens,
                    with_cost: s.with_cost,
                    cost_usd: s.cost_usd,
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn counts_cross_the_wire_unchanged_absent_values_staying_absent() {
        let step =
            |name: &str, reward: Option<f64>, tokens: Option<u64>, cost: Option<f64>| StepCounts {
                name: name.into(),
                reached: 3,
                passed: 2,
                stopped: 1,
                not_graded: 1,
                mean_reward: reward,
                with_tokens: u64::from(tokens.is_some()),
                input_tokens: tokens,
                output_tokens: tokens.map(|t| t / 10),
                with_cost: u64::from(cost.is_some()),
                cost_usd: cost,
            };
        let cases = vec![
            vec![],
            vec![TaskSteps {
                task: "t".into(),
                trials: 3,
                steps: vec![
                    step("open", Some(0.5), Some(120), Some(0.25)),
                    step("deposit", None, None, None),
                    step("report", Some(0.0), Some(0), None),
                ],
            }],
        ];
        for tasks in cases {
            let status = pb::RunStatus {
                steps: to_wire(&tasks),
                ..pb::RunStatus::default()
            };
            let back = pb::RunStatus::decode(status.encode_to_vec().as_slice()).unwrap();
            assert_eq!(from_wire(&back.steps), tasks);
        }
    }
}
