//! Which trials a report counts as "grading tampered", as "graded with withheld paths" and as
//! "solved without a tripwire" (a solved grade whose tripwire twin did not fail as it must:
//! none applies to the task, or it was ineffective, unconfirmed or gave no verdict):
//! one definition ([`GradeFlags::of_record`]) that `run aggregate`, the sweep's results
//! table and JSON, and the viewer all apply through [`crate::report::summarize`].

use crate::record::{Grade, RunRecord};
use serde::{Deserialize, Serialize};

/// What a trial's deciding grade says about the agent's dealings with the grader.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradeFlags {
    /// The grade was flagged `grading tampered` (a verifier output that was a link, not a
    /// regular file, too large or changed late; a tripwire that did not fail).
    #[serde(default)]
    pub tampered: bool,
    /// Grading withheld at least one path of the agent's diff (runner or toolchain
    /// configuration, an interpreter start-up hook, the task's protected paths).
    #[serde(default)]
    pub withheld: bool,
    /// The grade is solved, and no tripwire failed as it must beside it
    /// ([`crate::record::tripwire_held`]): a verdict the tripwire twin did not check.
    #[serde(default)]
    pub unguarded: bool,
}

impl GradeFlags {
    /// The flags of one grade (none without a grade).
    pub fn of_grade(grade: Option<&Grade>) -> GradeFlags {
        grade.map_or_else(GradeFlags::default, |g| GradeFlags {
            tampered: g.tampered,
            withheld: !g.withheld.is_empty(),
            unguarded: g.ok
                && !g
                    .tripwire
                    .as_ref()
                    .is_some_and(|t| crate::record::tripwire_held(&t.result)),
        })
    }

    /// The flags of a trial: those of its last attempt's grade, the one its outcome comes
    /// from ([`RunRecord::outcome_of`]). An earlier attempt's grade does not count: a later
    /// grade of the same work replaced it.
    pub fn of_record(r: &RunRecord) -> GradeFlags {
        GradeFlags::of_grade(r.attempts.last().and_then(|a| a.grade.as_ref()))
    }
}

/// Per-agent (or total) counts of flagged trials.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagCounts {
    /// Trials whose grade was flagged `grading tampered`.
    #[serde(default)]
    pub tampered: u64,
    /// Trials graded with paths of their diff withheld.
    #[serde(default)]
    pub withheld: u64,
    /// Trials solved without a tripwire that failed as it must.
    #[serde(default)]
    pub unguarded: u64,
}

impl FlagCounts {
    /// Counts one trial's flags.
    pub fn add(&mut self, f: GradeFlags) {
        self.tampered += u64::from(f.tampered);
        self.withheld += u64::from(f.withheld);
        self.unguarded += u64::from(f.unguarded);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grade(tampered: bool, withheld: &[&str]) -> Grade {
        Grade {
            ok: false,
            score: 0.0,
            source: "exit_code".into(),
            exit_code: Some(1),
            tests: Vec::new(),
            report: String::new(),
            report_truncated: false,
            tests_digest: String::new(),
            graded_at: chrono::DateTime::UNIX_EPOCH,
            duration_ms: 0,
            runtime: None,
            cause: None,
            tampered,
            tripwire: None,
            withheld: withheld.iter().map(|s| s.to_string()).collect(),
            ended_by: None,
            environment: None,
        }
    }

    #[test]
    fn the_flags_table() {
        let f = |tampered, withheld| GradeFlags {
            tampered,
            withheld,
            unguarded: false,
        };
        let g1 = grade(false, &[]);
        let g2 = grade(true, &[]);
        let g3 = grade(false, &[".cargo/config.toml"]);
        let g4 = grade(true, &["sitecustomize.py", "x.pth"]);
        let table: &[(Option<&Grade>, GradeFlags)] = &[
            (None, f(false, false)),
            (Some(&g1), f(false, false)),
            (Some(&g2), f(true, false)),
            (Some(&g3), f(false, true)),
            (Some(&g4), f(true, true)),
        ];
        let mut counts = FlagCounts::default();
        for (g, want) in table {
            assert_eq!(GradeFlags::of_grade(*g), *want, "{g:?}");
            counts.add(*want);
        }
        assert_eq!(
            counts,
            FlagCounts {
                tampered: 2,
                withheld: 2,
                unguarded: 0
            }
        );
    }

    #[test]
    fn a_solved_grade_is_unguarded_unless_its_tripwire_held() {
        use crate::grading::{TWIN_INEFFECTIVE, TWIN_NO_VERDICT, TWIN_UNCONFIRMED};
        use crate::record::TripwireFacts;
        use crate::record::TRIPWIRE_OK;
        let with = |ok: bool, result: Option<&str>| {
            let mut g = grade(false, &[]);
            g.ok = ok;
            g.tripwire = result.map(|r| TripwireFacts {
                name: String::new(),
                file: "test_x.py".into(),
                result: r.into(),
                duration_ms: None,
            });
            GradeFlags::of_grade(Some(&g)).unguarded
        };
        let none = "none: no expected value to change";
        let ineffective = format!("{TWIN_INEFFECTIVE}: the reference passes it");
        let unconfirmed = format!("{TWIN_UNCONFIRMED}: no reference");
        let no_verdict = format!("{TWIN_NO_VERDICT}: timed out");
        // (solved, tripwire result, unguarded)
        let table: &[(bool, Option<&str>, bool)] = &[
            (true, Some(TRIPWIRE_OK), false),
            (true, Some(none), true),
            (true, Some(&ineffective), true),
            (true, Some(&unconfirmed), true),
            (true, Some(&no_verdict), true),
            (true, Some("not run: no fresh workspace to run it in"), true),
            (true, None, true),
            (false, Some("not run: the grade is not solved"), false),
            (false, None, false),
        ];
        for (ok, result, want) in table {
            assert_eq!(with(*ok, *result), *want, "{ok} {result:?}");
        }
    }
}
