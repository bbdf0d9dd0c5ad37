//! Where a grading run's verdict comes from, and whose fault a run without one is
//! (docs/tasks.md, "The verdict").
//!
//! A verdict is a reward the verifier wrote (`reward.txt`, `reward.json`): the exit code of
//! the test script alone is never one. A run that ended without a usable reward gave no
//! verdict ([`no_verdict`]), however it ended; whether that is the agent's failure or the
//! task's is decided by the task's reference solution graded the same way ([`fault`]): when
//! that run yields a reward that solves, the missing reward on the agent's run is the agent's
//! doing (an agent must never escape a failure by crashing the grader); when it does not,
//! the task is broken, and the trial is `evaluation_error` naming the task, never counted
//! against the agent.

use super::blame::EndedBy;

/// What the verifier left in its folder as a reward, once read (tampering, a link or a file
/// changed late, is decided before this and is never a missing reward).
#[derive(Debug, Clone, PartialEq)]
pub enum RewardRead {
    /// A finite number in `reward.txt` or `reward.json`.
    Written(f64),
    /// Neither file exists.
    Missing,
    /// A plain file that holds no number; why.
    Unusable(String),
}

/// How the verifier process ended, as the worker saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnd {
    /// Who ended it ([`EndedBy`]).
    pub by: EndedBy,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal it died by, when it did.
    pub signal: Option<i32>,
}

/// Why a grading run gave no verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoVerdict {
    /// Stopped at the verifier's timeout.
    TimedOut,
    /// Stopped at a limit of the grading run.
    Limit,
    /// Died by a signal.
    Signal(i32),
    /// Exited 126 or more (could not execute, not found, a shell's report of a signal).
    CouldNotExecute(i32),
    /// Ended without writing a reward (`exit_code`: how it exited, when it did).
    NoReward {
        /// The exit code of the test script.
        exit_code: Option<i32>,
    },
    /// Left a reward file that holds no number; why.
    Unusable(String),
}

/// Why the run ended as `end` with `reward` gave no verdict, or `None` when `reward` is its
/// verdict. Only a reward written by a run that ended itself with an exit code below 126
/// is a verdict; the exit code is never one by itself.
pub fn no_verdict(end: RunEnd, reward: &RewardRead) -> Option<NoVerdict> {
    match end.by {
        EndedBy::Timeout => return Some(NoVerdict::TimedOut),
        EndedBy::Limit => return Some(NoVerdict::Limit),
        _ => {}
    }
    if let Some(sig) = end.signal {
        return Some(NoVerdict::Signal(sig));
    }
    match end.exit_code {
        Some(c) if (0..126).contains(&c) => {}
        Some(c) => return Some(NoVerdict::CouldNotExecute(c)),
        None => return Some(NoVerdict::CouldNotExecute(-1)),
    }
    match reward {
        RewardRead::Written(_) => None,
        RewardRead::Missing => Some(NoVerdict::NoReward {
            exit_code: end.exit_code,
        }),
        RewardRead::Unusable(why) => Some(NoVerdict::Unusable(why.clone())),
    }
}

/// What the task's reference solution, graded by the same grader on the same host and
/// runtime, showed.
#[derive(Debug, Clone, PartialEq)]
pub enum Reference {
    /// It wrote a reward at or above the task's threshold, untampered.
    Solved,
    /// It wrote a reward below the threshold.
    NotSolved(f64),
    /// Its run gave no verdict either; why.
    NoVerdict(NoVerdict),
    /// It could not be graded here: the task has no reference solution, it does not apply,
    /// or no reference run was possible; why.
    Unavailable(String),
}

/// Whose fault a grading run without a verdict is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The agent's: graded not solved (bucket `failed`), the cause naming what was missing.
    Agent,
    /// The task's (or its grader's): `evaluation_error` naming the task; why.
    Task(String),
}

/// The rule: a run of the agent's code without a verdict is the agent's failure exactly when
/// the same grader solves the task's reference solution; anything else makes the task (its
/// tests, its reference, or the grader here) the one at fault.
pub fn fault(reference: &Reference) -> Fault {
    match reference {
        Reference::Solved => Fault::Agent,
        Reference::NotSolved(r) => Fault::Task(format!(
            "its reference solution is not solved by the same grader (reward {r})"
        )),
        Reference::NoVerdict(NoVerdict::NoReward { .. }) => Fault::Task(
            "its tests wrote no reward for the reference solution either, so they never give a verdict"
                .into(),
        ),
        Reference::NoVerdict(why) => Fault::Task(format!(
            "the same grader gives no verdict on its reference solution either ({})",
            why.brief()
        )),
        Reference::Unavailable(why) => Fault::Task(format!("it could not be validated here: {why}")),
    }
}

/// The cause of an `evaluation_error` for a task at fault: names the task (`id`, `version`),
/// what the agent's run lacked (`missing`) and why the task is at fault (`why`).
pub fn task_fault_cause(id: &str, version: &str, missing: &str, why: &str) -> String {
    format!("task {id} (version {version}) is broken: {missing}, and {why}")
}

impl NoVerdict {
    /// A short phrase, without the run's particulars (argv, timeout, limit).
    pub fn brief(&self) -> String {
        match self {
            NoVerdict::TimedOut => "timed out".into(),
            NoVerdict::Limit => "stopped at a limit".into(),
            NoVerdict::Signal(s) => format!("killed by signal {s}"),
            NoVerdict::CouldNotExecute(c) => format!("exited {c}"),
            NoVerdict::NoReward { exit_code: Some(c) } => {
                format!("exited {c} without writing a reward")
            }
            NoVerdict::NoReward { exit_code: None } => "wrote no reward".into(),
            NoVerdict::Unusable(why) => why.clone(),
        }
    }
}

/// Where a solved reward disagrees with the test runner's own outcome: the test script
/// exited non-zero, or the runner's report (JUnit) lists tests and every one of them failed.
/// `None` when they agree, or when the reward is not solved (a failing reward never needs
/// the runner's word). Code under test that writes the reward (and keeps the runner from
/// writing its own) leaves such a disagreement; a task whose own script always disagrees is
/// told apart by its reference solution showing the same (the worker asks before it flags).
pub fn disagreement(
    solved: bool,
    exit_code: Option<i32>,
    tests: &[crate::record::TestResult],
) -> Option<String> {
    use crate::record::TestOutcome;
    if !solved {
        return None;
    }
    if let Some(c) = exit_code.filter(|c| *c != 0) {
        return Some(format!(
            "the reward says solved but the test script exited {c}"
        ));
    }
    let failing = |t: &&crate::record::TestResult| {
        matches!(t.outcome, TestOutcome::Failed | TestOutcome::Error)
    };
    if !tests.is_empty() && tests.iter().all(|t| failing(&t)) {
        return Some(format!(
            "the reward says solved but the runner's report has all {} of its tests failing",
            tests.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use EndedBy as B;

    fn end(by: B, exit_code: Option<i32>, signal: Option<i32>) -> RunEnd {
        RunEnd {
            by,
            exit_code,
            signal,
        }
    }

    #[test]
    fn the_no_verdict_table() {
        let w = RewardRead::Written(1.0);
        let z = RewardRead::Written(0.0);
        let m = RewardRead::Missing;
        let u = RewardRead::Unusable("reward.txt holds `x`".into());
        let nr = |c| Some(NoVerdict::NoReward { exit_code: Some(c) });
        let table: Vec<(RunEnd, &RewardRead, Option<NoVerdict>)> = vec![
            // A reward written by a run that ended itself is the verdict, whatever it says
            // and whatever the exit code below 126.
            (end(B::Itself, Some(0), None), &w, None),
            (end(B::Itself, Some(0), None), &z, None),
            (end(B::Itself, Some(1), None), &w, None),
            (end(B::Itself, Some(125), None), &z, None),
            // No reward: no verdict, whatever the exit code (0 included).
            (end(B::Itself, Some(0), None), &m, nr(0)),
            (end(B::Itself, Some(1), None), &m, nr(1)),
            (end(B::Itself, Some(2), None), &m, nr(2)),
            (
                end(B::Itself, Some(1), None),
                &u,
                Some(NoVerdict::Unusable("reward.txt holds `x`".into())),
            ),
            // Could not execute, killed, no exit code: no verdict, reward or not.
            (
                end(B::Itself, Some(126), None),
                &w,
                Some(NoVerdict::CouldNotExecute(126)),
            ),
            (
                end(B::Itself, Some(137), None),
                &m,
                Some(NoVerdict::CouldNotExecute(137)),
            ),
            (
                end(B::Itself, None, Some(9)),
                &w,
                Some(NoVerdict::Signal(9)),
            ),
            (
                end(B::Itself, None, Some(9)),
                &m,
                Some(NoVerdict::Signal(9)),
            ),
            (
                end(B::Itself, None, None),
                &w,
                Some(NoVerdict::CouldNotExecute(-1)),
            ),
            // The harness's timeout or a limit: no verdict, even with a reward.
            (
                end(B::Timeout, None, Some(9)),
                &w,
                Some(NoVerdict::TimedOut),
            ),
            (
                end(B::Timeout, Some(0), None),
                &m,
                Some(NoVerdict::TimedOut),
            ),
            (end(B::Limit, None, Some(9)), &w, Some(NoVerdict::Limit)),
            (end(B::Limit, Some(0), None), &z, Some(NoVerdict::Limit)),
        ];
        for (e, r, want) in table {
            assert_eq!(no_verdict(e, r), want, "{e:?} {r:?}");
        }
        // The exit code alone never decides: every exit code without a reward is no verdict.
        for c in -1..300 {
            for by in crate::record::ALL_ENDERS {
                assert!(
                    no_verdict(end(by, Some(c), None), &RewardRead::Missing).is_some(),
                    "{by:?} exit {c}"
                );
            }
        }
    }

    #[test]
    fn the_fault_table() {
        let no_reward = NoVerdict::NoReward { exit_code: Some(1) };
        let table: Vec<(Reference, Option<&str>)> = vec![
            (Reference::Solved, None),
            (
                Reference::NotSolved(0.0),
                Some("is not solved by the same grader (reward 0)"),
            ),
            (
                Reference::NoVerdict(no_reward),
                Some("wrote no reward for the reference solution either"),
            ),
            (
                Reference::NoVerdict(NoVerdict::NoReward { exit_code: None }),
                Some("wrote no reward for the reference solution either"),
            ),
            (
                Reference::NoVerdict(NoVerdict::Signal(9)),
                Some("no verdict on its reference solution either (killed by signal 9)"),
            ),
            (
                Reference::NoVerdict(NoVerdict::TimedOut),
                Some("either (timed out)"),
            ),
            (
                Reference::Unavailable("the task has no reference solution".into()),
                Some("could not be validated here: the task has no reference solution"),
            ),
        ];
        for (r, want) in table {
            match (fault(&r), want) {
                (Fault::Agent, None) => {}
                (Fault::Task(why), Some(w)) => assert!(why.contains(w), "{r:?}: {why}"),
                (got, want) => panic!("{r:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_task_fault_names_the_task() {
        let c = task_fault_cause(
            "pyslug-001",
            "1.0",
            "the evaluation command exited 1 without writing a reward",
            "its tests wrote no reward for the reference solution either",
        );
        assert!(
            c.starts_with("task pyslug-001 (version 1.0) is broken: "),
            "{c}"
        );
        assert!(c.contains("exited 1 without writing a reward"), "{c}");
    }

    #[test]
    fn briefs() {
        assert_eq!(
            NoVerdict::NoReward { exit_code: Some(1) }.brief(),
            "exited 1 without writing a reward"
        );
        assert_eq!(NoVerdict::Signal(9).brief(), "killed by signal 9");
        assert_eq!(NoVerdict::CouldNotExecute(127).brief(), "exited 127");
    }

    #[test]
    fn a_solved_reward_must_agree_with_the_runner() {
        use crate::record::{TestOutcome as O, TestResult};
        let t = |o: O| TestResult {
            name: "m::t".into(),
            outcome: o,
            message: None,
        };
        let pass = vec![t(O::Passed), t(O::Failed)];
        let all_fail = vec![t(O::Failed), t(O::Error)];
        // (solved, exit code, tests, disagrees)
        type Row<'a> = (bool, Option<i32>, Vec<TestResult>, Option<&'a str>);
        let table: Vec<Row> = vec![
            (true, Some(0), vec![], None),
            (true, None, vec![], None),
            (true, Some(0), pass.clone(), None),
            (true, Some(1), vec![], Some("exited 1")),
            (
                true,
                Some(0),
                all_fail.clone(),
                Some("all 2 of its tests failing"),
            ),
            (true, Some(2), all_fail.clone(), Some("exited 2")),
            (true, Some(0), vec![t(O::Skipped)], None),
            (false, Some(1), all_fail.clone(), None),
            (false, Some(0), pass.clone(), None),
        ];
        for (solved, code, tests, want) in table {
            let got = disagreement(solved, code, &tests);
            match (got.as_deref(), want) {
                (None, None) => {}
                (Some(g), Some(w)) => assert!(g.contains(w), "{g} vs {w}"),
                (g, w) => panic!("{solved} {code:?} {tests:?}: got {g:?}, want {w:?}"),
            }
        }
    }
}
