//! Validating a task (`akbench task check`): what makes a task release valid on a runtime
//! (its reference solution solves under its own grader, its unchanged starting point does
//! not), the result kept by the task's digest, and where it is cached. Pure: the grading
//! runs are the worker's (`worker/src/task_check.rs`), the files the CLI's.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What one grading run of a check concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The grader solved it.
    Solved,
    /// The grader gave the verdict "not solved".
    NotSolved,
    /// The grader gave no verdict (killed, timed out, no reward).
    NoVerdict,
    /// The grade was flagged `grading tampered` (the tripwire twin, a planted or late
    /// reward...): on the reference, no honest solution of the task could be graded solved.
    Tampered,
}

/// The result of checking one task release on one runtime (and image).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskCheck {
    /// Task id.
    pub task: String,
    /// Task version.
    pub version: String,
    /// The task release's digest (the cache key).
    pub digest: String,
    /// The runtime the check graded in (`sandbox`, `container`, `direct`).
    pub runtime: String,
    /// Under `container`: the image, pinned (`registry/repository@sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// When the check ran.
    pub checked_at: DateTime<Utc>,
    /// The reference solution (`solution/solve.sh`) applied, then graded.
    pub reference: Side,
    /// The starting point the agent gets (mutation applied), graded unchanged.
    pub baseline: Side,
    /// True when the reference solves and the baseline does not ([`judge`]).
    pub valid: bool,
    /// Why it is not valid (empty when valid).
    pub problems: Vec<String>,
    /// The tripwire of the reference's grade (`grade.tripwire.result`): `failed as it must`,
    /// or why the task's solved grades go without one. Absent in checks made before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripwire: Option<String>,
    /// Where the two runs graded, as a run's attempts grade the task unless the run asks
    /// otherwise (`core::grading_env::decide`): `shared` (the agent's environment) or
    /// `separate` (a fresh sandbox). Absent in checks made before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grading: Option<String>,
    /// For a task graded in the agent's environment: the same check with the clean room a
    /// run may ask for (`execution.grading_environment: separate`), so a user sees whether
    /// that grades the task correctly too ([`judge`]; `valid` above stays the default's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separate: Option<ModeCheck>,
    /// For a multi-step task (`[[steps]]`): each step checked in order ([`StepCheck`]);
    /// `reference`, `baseline` and `valid` above are theirs together ([`judge_steps`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepCheck>,
}

/// The check of one step of a multi-step task: both grading runs made where the step's
/// trial grades it, in a fresh environment where every step before it ran first with its
/// solution and the step's own `workdir/`, `setup.sh` and healthcheck ran: the reference
/// with the step's solution run as the agent, the baseline without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepCheck {
    /// The step's name.
    pub name: String,
    /// The step's reference solution run, then graded with the step's tests.
    pub reference: Side,
    /// The step's starting point (the steps before it solved), graded unchanged.
    pub baseline: Side,
    /// [`judge`] of the two.
    pub valid: bool,
    /// Why not (empty when valid).
    pub problems: Vec<String>,
    /// The tripwire of the reference's grade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripwire: Option<String>,
}

impl StepCheck {
    /// Step `name` judged from its two runs.
    pub fn judged(name: &str, reference: Side, baseline: Side, tripwire: Option<String>) -> Self {
        let (valid, problems) = judge(reference, baseline);
        StepCheck {
            name: name.to_string(),
            reference,
            baseline,
            valid,
            problems,
            tripwire,
        }
    }
}

/// A multi-step task's check from its steps': valid when every step is (a step whose
/// reference does not solve it, or whose starting point already does, makes the task not
/// valid, as a one-step task's would), its problems each naming its step; the task's
/// reference side is the first step's that did not solve (else `solved`), its baseline
/// side the first step's that solved unchanged (else the first step's). No step: not valid.
pub fn judge_steps(steps: &[StepCheck]) -> (Side, Side, bool, Vec<String>) {
    let Some(first) = steps.first() else {
        return (
            Side::NoVerdict,
            Side::NoVerdict,
            false,
            vec!["the task has no step to check".to_string()],
        );
    };
    let reference = steps
        .iter()
        .map(|s| s.reference)
        .find(|r| *r != Side::Solved)
        .unwrap_or(Side::Solved);
    let baseline = steps
        .iter()
        .map(|s| s.baseline)
        .find(|b| *b == Side::Solved)
        .unwrap_or(first.baseline);
    let problems: Vec<String> = steps
        .iter()
        .flat_map(|s| {
            s.problems
                .iter()
                .map(move |p| format!("step `{}`: {p}", s.name))
        })
        .collect();
    let valid = steps.iter().all(|s| s.valid);
    (reference, baseline, valid, problems)
}

/// The check of one more place of grading ([`TaskCheck::separate`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeCheck {
    /// The reference solution applied, then graded there.
    pub reference: Side,
    /// The starting point, graded unchanged there.
    pub baseline: Side,
    /// Whether grading there judges the task correctly ([`judge`]).
    pub valid: bool,
    /// Why not (empty when valid).
    pub problems: Vec<String>,
}

/// Whether a task is valid given how its two grading runs ended, and why not: the
/// reference must be solved, the unchanged baseline must not be (no verdict on the baseline
/// is not a pass: a starting point that hangs or crashes the tests does not solve).
pub fn judge(reference: Side, baseline: Side) -> (bool, Vec<String>) {
    let mut problems = Vec::new();
    match reference {
        Side::Solved => {}
        Side::NotSolved => problems.push(
            "the reference solution does not solve the task: solution/solve.sh or the tests are wrong".to_string(),
        ),
        Side::NoVerdict => problems.push(
            "the grader gave no verdict on the reference solution (killed, timed out, or no reward): the tests cannot judge this task here".to_string(),
        ),
        Side::Tampered => problems.push(
            "grading flags the reference solution as tampering (graded as a trial is, tripwire included): no honest solution of this task could be graded solved; see the reference's cause below".to_string(),
        ),
    }
    if baseline == Side::Solved {
        problems.push(
            "the unchanged starting point already solves the task: an agent that does nothing passes, so the tests do not test the change".to_string(),
        );
    }
    (problems.is_empty(), problems)
}

/// The version of the rules a check grades by: a check cached under older rules is not
/// read (2: grading as a trial grades, the tripwire twin included; 3: a task graded in the
/// agent's environment is checked in the clean room too, [`TaskCheck::separate`]).
pub const CHECK_RULES: u32 = 3;

/// The file name a check is cached under in the data dir's `task-checks/` folder: the
/// task digest's hex, the runtime, under `container` the image digest's hex, and the rules'
/// version ([`CHECK_RULES`]).
pub fn cache_name(digest: &str, runtime: &str, image_digest: Option<&str>) -> String {
    let hex = |d: &str| d.strip_prefix("sha256:").unwrap_or(d).to_string();
    match image_digest {
        Some(i) => format!("{}.{runtime}.{}.v{CHECK_RULES}.json", hex(digest), hex(i)),
        None => format!("{}.{runtime}.v{CHECK_RULES}.json", hex(digest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_step_task_is_valid_only_when_every_step_is() {
        use Side::*;
        let step = |n: &str, r, b| StepCheck::judged(n, r, b, None);
        // (steps, want reference, baseline, valid, problems naming these steps)
        type Case = (Vec<StepCheck>, Side, Side, bool, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            (
                vec![step("a", Solved, NotSolved), step("b", Solved, NotSolved)],
                Solved,
                NotSolved,
                true,
                vec![],
            ),
            (
                vec![
                    step("a", Solved, NotSolved),
                    step("b", NotSolved, NotSolved),
                ],
                NotSolved,
                NotSolved,
                false,
                vec!["b"],
            ),
            // A step its starting point already solves: a no-op agent scores it.
            (
                vec![step("a", Solved, NotSolved), step("b", Solved, Solved)],
                Solved,
                Solved,
                false,
                vec!["b"],
            ),
            (
                vec![
                    step("a", Tampered, NoVerdict),
                    step("b", NoVerdict, NotSolved),
                ],
                Tampered,
                NoVerdict,
                false,
                vec!["a", "b"],
            ),
            (vec![], NoVerdict, NoVerdict, false, vec![]),
        ];
        for (steps, reference, baseline, valid, named) in cases {
            let (r, b, v, problems) = judge_steps(&steps);
            assert_eq!((r, b, v), (reference, baseline, valid), "{steps:?}");
            for n in &named {
                let prefix = format!("step `{n}`: ");
                assert!(
                    problems.iter().any(|p| p.starts_with(&prefix)),
                    "{n}: {problems:?}"
                );
            }
            assert_eq!(problems.is_empty(), valid, "{problems:?}");
        }
    }

    #[test]
    fn valid_only_when_the_reference_solves_and_the_baseline_does_not() {
        use Side::*;
        for (reference, baseline, valid, n) in [
            (Solved, NotSolved, true, 0),
            (Solved, NoVerdict, true, 0),
            (Solved, Solved, false, 1),
            (NotSolved, NotSolved, false, 1),
            (NotSolved, Solved, false, 2),
            (NoVerdict, NotSolved, false, 1),
            (NoVerdict, Solved, false, 2),
            (NotSolved, NoVerdict, false, 1),
            (NoVerdict, NoVerdict, false, 1),
            (Tampered, NotSolved, false, 1),
            (Tampered, Solved, false, 2),
            (Solved, Tampered, true, 0),
        ] {
            let (ok, problems) = judge(reference, baseline);
            assert_eq!(ok, valid, "{reference:?} {baseline:?}");
            assert_eq!(
                problems.len(),
                n,
                "{reference:?} {baseline:?}: {problems:?}"
            );
        }
    }

    #[test]
    fn the_cache_name_holds_the_digests_and_the_runtime() {
        let d = format!("sha256:{}", "a".repeat(64));
        let i = format!("sha256:{}", "b".repeat(64));
        assert_eq!(
            cache_name(&d, "sandbox", None),
            format!("{}.sandbox.v3.json", "a".repeat(64))
        );
        assert_eq!(
            cache_name(&d, "container", Some(&i)),
            format!("{}.container.{}.v3.json", "a".repeat(64), "b".repeat(64))
        );
    }
}
