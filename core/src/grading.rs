//! The status algebra: how an attempt's execution outcome and its grading combine into a
//! terminal state, and which attempts owe a grade.
//!
//! Grading is a function over a recorded artifact, not a mode of running: an attempt whose
//! agent ran to the end can be graded now, later, or again; an attempt whose agent failed,
//! timed out, was cancelled, or never ran (infrastructure error, invalid configuration) has
//! nothing to grade, and grading never changes what it is. `not_graded` means exactly
//! "executed, grading not run".
//!
//! It also owns the rules that keep a grade honest against the code under test (docs/tasks.md,
//! "Grading the agent cannot forge"): the tripwire twin, a copy of the hidden tests with their
//! expected values changed ([`twin`]), or a task's declared tripwire test ([`tripwire_code`]),
//! and what its run must show ([`judge_twin`]); whether a reward agrees with the test
//! runner's own outcome ([`verdict::disagreement`]); which
//! paths of the agent's diff steer the grader and are withheld from the grading workspace
//! ([`withhold`]); which trials a report counts as tampered or graded with withheld paths
//! ([`integrity`]); whose failure a grading run without a verdict is, from who ended it
//! ([`blame`]); where a verdict comes from (a reward, never the exit code alone) and whose
//! fault a run without one is, from the task's reference solution ([`verdict`]).

pub mod blame;
pub mod integrity;
pub mod twin;
pub mod verdict;
pub mod withhold;

pub use withhold::{
    diff_paths, is_runner_config_file, is_withheld, runner_config_changed, split_withheld,
    DEFAULT_WITHHELD, RUNNER_CONFIG_FILES,
};

use crate::lifecycle::State;
use crate::record::TRIPWIRE_OK;
use serde::{Deserialize, Serialize};

/// How the execution half of an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Execution {
    /// The agent exited successfully and its work was collected.
    Executed,
    /// The agent reported a failure.
    AgentFailed,
    /// The agent ran out of time.
    TimedOut,
    /// Cancelled before grading.
    Cancelled,
    /// The environment broke.
    InfrastructureError,
    /// The configuration was rejected before the agent started.
    InvalidConfiguration,
}

/// How the grading half went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grading {
    /// Grading was not requested (or not yet run).
    NotRun,
    /// A verdict.
    Verdict {
        /// Solved or not.
        ok: bool,
    },
    /// The evaluation broke.
    Broken,
    /// Cancelled while grading.
    Cancelled,
}

/// All executions, for table tests.
pub const ALL_EXECUTIONS: [Execution; 6] = [
    Execution::Executed,
    Execution::AgentFailed,
    Execution::TimedOut,
    Execution::Cancelled,
    Execution::InfrastructureError,
    Execution::InvalidConfiguration,
];

/// All gradings, for table tests.
pub const ALL_GRADINGS: [Grading; 5] = [
    Grading::NotRun,
    Grading::Verdict { ok: true },
    Grading::Verdict { ok: false },
    Grading::Broken,
    Grading::Cancelled,
];

/// The terminal state of an attempt. Grading only applies to an executed attempt: every
/// other execution outcome stays what it is, whatever grading says.
pub fn terminal_state(execution: Execution, grading: Grading) -> State {
    match execution {
        Execution::Executed => match grading {
            Grading::NotRun => State::NotGraded,
            Grading::Verdict { .. } => State::Completed,
            Grading::Broken => State::EvaluationError,
            Grading::Cancelled => State::Cancelled,
        },
        Execution::AgentFailed => State::Failed,
        Execution::TimedOut => State::Timeout,
        Execution::Cancelled => State::Cancelled,
        Execution::InfrastructureError => State::InfrastructureError,
        Execution::InvalidConfiguration => State::InvalidConfiguration,
    }
}

/// True when a trial whose deciding attempt (of `kind`) ended in `state` owes a grade: its
/// agent ran and it has no verdict. The attempt ended `not_graded` or `evaluation_error`
/// (grading broke), or it was itself a grading attempt that ended `infrastructure_error`
/// (grading could not run on its worker). Attempts with a verdict, and attempts that never
/// ran their agent to the end, owe nothing. The one rule: `run grade` / `resume --grade`
/// select by it (`sql/grading/owed.sql`, given [`owing_states`]) and `run evaluate --all` too.
pub fn owes_grade(kind: crate::lifecycle::WorkKind, state: State) -> bool {
    matches!(state, State::NotGraded | State::EvaluationError)
        || (kind == crate::lifecycle::WorkKind::Grade && state == State::InfrastructureError)
}

/// The terminal states in which a deciding attempt of `kind` owes a grade ([`owes_grade`]),
/// as stored names: what a statement that selects owed trials is given.
pub fn owing_states(kind: crate::lifecycle::WorkKind) -> Vec<&'static str> {
    crate::lifecycle::ALL_STATES
        .into_iter()
        .filter(|s| owes_grade(kind, *s))
        .map(State::as_str)
        .collect()
}

/// True when an attempt in `state` holds an agent's finished work that grading may
/// (re)grade: not graded yet, or graded already (a re-grade).
pub fn is_gradable(state: State) -> bool {
    matches!(state, State::NotGraded | State::Completed)
}

/// The test to add to a hidden-tests file named `file_name` holding `content` so that it
/// must fail: `(test name, code to append)`, or `None` when the file is not a test file of a
/// framework the examples use (Python `unittest` / pytest `test*.py`, Rust `#[test]`).
/// `token` is a random lowercase word (the test's name), `a != b` two random numbers the
/// test compares, so neither the name nor the values mark it as the tripwire.
pub fn tripwire_code(
    file_name: &str,
    content: &str,
    token: &str,
    a: u32,
    b: u32,
) -> Option<(String, String)> {
    debug_assert_ne!(a, b);
    if file_name.ends_with(".py") && file_name.starts_with("test") {
        let name = format!("test_{token}");
        if content.contains("unittest") {
            let class = format!("{}{}Test", token[..1].to_uppercase(), &token[1..]);
            let code = format!(
                "\n\nimport unittest as _{token}\n\n\nclass {class}(_{token}.TestCase):\n    def {name}(self):\n        self.assertEqual({a}, {b})\n"
            );
            return Some((name, code));
        }
        let code = format!("\n\ndef {name}():\n    assert {a} == {b}\n");
        return Some((name, code));
    }
    if file_name.ends_with(".rs") && content.contains("#[test]") {
        let name = token.to_string();
        let code = format!("\n#[test]\nfn {name}() {{\n    assert_eq!({a}u64, {b}u64);\n}}\n");
        return Some((name, code));
    }
    None
}

/// How the tripwire twin's run over the agent's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TwinRun {
    /// Graded not solved: what any honest solution gets.
    NotSolved,
    /// Graded solved.
    Solved,
    /// No verdict (the run died, timed out or wrote no reward): not evidence either way.
    NoVerdict(String),
    /// The run itself showed tampering (a link for a reward, a late write...).
    Tampered(String),
}

/// How the task's reference solution fares on the same twin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReferenceOnTwin {
    /// Not solved: the twin discriminates.
    Fails,
    /// Solved: the twin does not change an honest solution's verdict here.
    Passes,
    /// Not known (no reference, no verdict, the run broke): why.
    Unknown(String),
}

/// What the tripwire twin showed: the result written in `grade.tripwire.result`, and the
/// tampering seen (`Some` flags the grade). A solved twin flags the grade only when the
/// task's reference solution fails the same twin (`reference` is asked only then), so a
/// twin that an honest solution can pass never accuses one. `what` names the twin in the
/// cause (`the hidden tests with 6 expected values changed`).
pub fn judge_twin(
    run: TwinRun,
    what: &str,
    reference: impl FnOnce() -> ReferenceOnTwin,
) -> (String, Option<String>) {
    match run {
        TwinRun::NotSolved => (TRIPWIRE_OK.to_string(), None),
        TwinRun::NoVerdict(cause) => (
            format!("{TWIN_NO_VERDICT}: {cause} (not evidence of tampering)"),
            None,
        ),
        TwinRun::Tampered(t) => {
            let t = format!("in the tripwire twin run: {t}");
            (format!("grading tampered: {t}"), Some(t))
        }
        TwinRun::Solved => match reference() {
            ReferenceOnTwin::Fails => {
                let t = format!(
                    "the agent's code passed the tripwire twin ({what}), which the task's reference solution fails"
                );
                (format!("grading tampered: {t}"), Some(t))
            }
            ReferenceOnTwin::Passes => (
                format!("{TWIN_INEFFECTIVE}: the twin ({what}) is passed by the task's reference solution too, so it cannot tell; not flagged"),
                None,
            ),
            ReferenceOnTwin::Unknown(why) => (
                format!("{TWIN_UNCONFIRMED}: the agent's code passed the twin ({what}), but whether the reference solution fails it is not known ({why}); not flagged"),
                None,
            ),
        },
    }
}

/// `grade.tripwire.result` of a twin run that gave no verdict.
pub const TWIN_NO_VERDICT: &str = "no verdict";
/// `grade.tripwire.result` of a twin the reference solution passes too.
pub const TWIN_INEFFECTIVE: &str = "ineffective";
/// `grade.tripwire.result` of a solved twin the reference could not be checked on.
pub const TWIN_UNCONFIRMED: &str = "unconfirmed";

/// What one trial's end answers about the agent: the exit code of `run single`,
/// `run execute` and `run evaluate` follows it (README, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Solved (graded) or executed to the end (`run execute`, grading not asked for).
    Yes,
    /// The agent's answer is no: graded and not solved, the agent failed, it timed out.
    No,
    /// No verdict on the agent, for a reason that is not the agent's: the infrastructure
    /// broke, the configuration was refused, the evaluation broke, the trial was cancelled,
    /// grading was asked for and not run, or the trial has not ended.
    NoVerdict,
}

/// The answer of a trial that ended in `state` with `ok`; `graded` says whether grading
/// was asked for (`run single`, `run evaluate`) or not (`run execute`, which succeeds by
/// ending `not_graded`).
pub fn answer(state: State, ok: Option<bool>, graded: bool) -> Answer {
    match state {
        State::Completed if ok == Some(true) => Answer::Yes,
        State::Completed => Answer::No,
        State::NotGraded if !graded => Answer::Yes,
        State::Failed | State::Timeout => Answer::No,
        State::NotGraded
        | State::Cancelled
        | State::InfrastructureError
        | State::InvalidConfiguration
        | State::EvaluationError => Answer::NoVerdict,
        State::Pending
        | State::Preparing
        | State::Validating
        | State::ConfiguringRuntime
        | State::CreatingWorkspace
        | State::StartingAgent
        | State::Executing
        | State::Collecting
        | State::Evaluating
        | State::Finalizing => Answer::NoVerdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tripwire_held;

    #[test]
    fn the_answer_table() {
        use Answer::{No, NoVerdict as Nv, Yes};
        use State as S;
        // (state, ok, graded, answer); every other (state, ok, graded) is NoVerdict.
        let table: &[(S, Option<bool>, bool, Answer)] = &[
            (S::Completed, Some(true), true, Yes),
            (S::Completed, Some(true), false, Yes),
            (S::Completed, Some(false), true, No),
            (S::Completed, Some(false), false, No),
            (S::Completed, None, true, No),
            (S::Completed, None, false, No),
            (S::NotGraded, None, false, Yes),
            (S::NotGraded, Some(true), false, Yes),
            (S::NotGraded, Some(false), false, Yes),
            (S::Failed, None, true, No),
            (S::Failed, None, false, No),
            (S::Failed, Some(true), true, No),
            (S::Failed, Some(true), false, No),
            (S::Failed, Some(false), true, No),
            (S::Failed, Some(false), false, No),
            (S::Timeout, None, true, No),
            (S::Timeout, None, false, No),
            (S::Timeout, Some(true), true, No),
            (S::Timeout, Some(true), false, No),
            (S::Timeout, Some(false), true, No),
            (S::Timeout, Some(false), false, No),
        ];
        let mut seen = 0;
        for s in crate::lifecycle::ALL_STATES {
            for ok in [None, Some(true), Some(false)] {
                for graded in [true, false] {
                    let want = table
                        .iter()
                        .find(|(ts, tok, tg, _)| *ts == s && *tok == ok && *tg == graded)
                        .map_or(Nv, |r| r.3);
                    assert_eq!(answer(s, ok, graded), want, "{s:?} {ok:?} graded {graded}");
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, 18 * 3 * 2);
        for s in [
            S::InfrastructureError,
            S::InvalidConfiguration,
            S::EvaluationError,
            S::Cancelled,
        ] {
            assert_eq!(answer(s, None, true), Nv, "{s:?}: not the agent's doing");
        }
    }

    #[test]
    fn the_status_table() {
        use Execution as E;
        use Grading as G;
        use State as S;
        let t = G::Verdict { ok: true };
        let f = G::Verdict { ok: false };
        let table: &[(E, G, S)] = &[
            (E::Executed, G::NotRun, S::NotGraded),
            (E::Executed, t, S::Completed),
            (E::Executed, f, S::Completed),
            (E::Executed, G::Broken, S::EvaluationError),
            (E::Executed, G::Cancelled, S::Cancelled),
        ];
        let mut seen = 0;
        for e in ALL_EXECUTIONS {
            for g in ALL_GRADINGS {
                let got = terminal_state(e, g);
                let want = table
                    .iter()
                    .find(|(te, tg, _)| *te == e && *tg == g)
                    .map(|(_, _, s)| *s)
                    .unwrap_or_else(|| match e {
                        E::Executed => unreachable!("all executed rows are listed"),
                        E::AgentFailed => S::Failed,
                        E::TimedOut => S::Timeout,
                        E::Cancelled => S::Cancelled,
                        E::InfrastructureError => S::InfrastructureError,
                        E::InvalidConfiguration => S::InvalidConfiguration,
                    });
                assert_eq!(got, want, "{e:?} x {g:?}");
                assert!(got.is_terminal());
                seen += 1;
            }
        }
        assert_eq!(seen, 30);
    }

    #[test]
    fn execution_facts_are_never_turned_into_not_graded_or_graded() {
        for e in ALL_EXECUTIONS
            .into_iter()
            .filter(|e| *e != Execution::Executed)
        {
            for g in ALL_GRADINGS {
                let s = terminal_state(e, g);
                assert_ne!(s, State::NotGraded, "{e:?} {g:?}");
                assert_ne!(s, State::Completed, "{e:?} {g:?}");
                assert!(!owes_grade(crate::lifecycle::WorkKind::Execute, s));
            }
        }
    }

    #[test]
    fn a_trial_owes_a_grade_when_its_agent_ran_and_it_has_no_verdict() {
        use crate::lifecycle::WorkKind::{Execute, Grade};
        for s in crate::lifecycle::ALL_STATES {
            let no_verdict = matches!(s, State::NotGraded | State::EvaluationError);
            assert_eq!(owes_grade(Execute, s), no_verdict, "{s:?}");
            assert_eq!(
                owes_grade(Grade, s),
                no_verdict || s == State::InfrastructureError,
                "{s:?}"
            );
        }
        assert_eq!(owing_states(Execute), ["evaluation_error", "not_graded"]);
    }

    #[test]
    fn the_twin_table() {
        use ReferenceOnTwin as R;
        use TwinRun as T;
        // (run, the reference's result if asked, flagged, result prefix, reference asked)
        let cases: Vec<(T, R, bool, &str, bool)> = vec![
            (T::NotSolved, R::Fails, false, TRIPWIRE_OK, false),
            (T::NotSolved, R::Passes, false, TRIPWIRE_OK, false),
            (
                T::NoVerdict("timed out".into()),
                R::Fails,
                false,
                TWIN_NO_VERDICT,
                false,
            ),
            (
                T::Tampered("a link".into()),
                R::Passes,
                true,
                "grading tampered",
                false,
            ),
            (T::Solved, R::Fails, true, "grading tampered", true),
            (T::Solved, R::Passes, false, TWIN_INEFFECTIVE, true),
            (
                T::Solved,
                R::Unknown("no reference".into()),
                false,
                TWIN_UNCONFIRMED,
                true,
            ),
        ];
        for (run, reference, flagged, prefix, asked) in cases {
            let mut was_asked = false;
            let label = format!("{run:?} {reference:?}");
            let (result, t) = judge_twin(
                run,
                "the hidden tests with 3 expected values changed",
                || {
                    was_asked = true;
                    reference
                },
            );
            assert_eq!(t.is_some(), flagged, "{label}: {result}");
            assert!(result.starts_with(prefix), "{label}: {result}");
            assert_eq!(was_asked, asked, "{label}");
            assert_eq!(tripwire_held(&result), prefix == TRIPWIRE_OK, "{label}");
            if let Some(t) = t {
                assert!(result.ends_with(&t), "{label}");
            }
        }
    }

    #[test]
    fn tripwire_code_per_framework() {
        let (n, code) = tripwire_code("test_hidden.py", "import unittest\n", "abc", 1, 2).unwrap();
        assert_eq!(n, "test_abc");
        assert!(
            code.contains("class AbcTest(_abc.TestCase):") && code.contains("def test_abc(self):")
        );
        assert!(code.contains("self.assertEqual(1, 2)"), "{code}");
        let (n, code) = tripwire_code("test_x.py", "def test_y(): pass\n", "abc", 1, 2).unwrap();
        assert_eq!(n, "test_abc");
        assert!(
            code.contains("def test_abc():\n    assert 1 == 2"),
            "{code}"
        );
        let (n, code) = tripwire_code("hidden.rs", "#[test]\nfn t() {}\n", "abc", 3, 4).unwrap();
        assert_eq!(n, "abc");
        assert!(
            code.contains("#[test]\nfn abc() {\n    assert_eq!(3u64, 4u64);"),
            "{code}"
        );
        assert_eq!(
            tripwire_code("run_tests.py", "import unittest", "abc", 1, 2),
            None
        );
        assert_eq!(tripwire_code("helpers.rs", "fn x() {}", "abc", 1, 2), None);
        assert_eq!(tripwire_code("test.sh", "#[test]", "abc", 1, 2), None);
    }
}
