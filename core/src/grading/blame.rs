//! Whose failure a grading run is when it gives no verdict, decided from who ended the
//! graded process ([`EndedBy`], recorded by the worker's runtime) before the reference
//! solution is asked (docs/tasks.md, "Whose failure").
//!
//! The code under test may end its own test process (a crash, a kill of its own, a loop
//! the verifier's timeout stops, a limit of the grading run it ran into): on a task whose
//! reference solution the same grader solves, that is the agent's failure. The harness may
//! end it too, for reasons that say nothing about the agent: the worker shutting down, a
//! cancel, the sandbox launcher failing before the graded program started, the host's own
//! out-of-memory killer. Those never become the agent's `failed`.

pub use crate::record::EndedBy;
use serde::{Deserialize, Serialize};

/// What a grading run ended by `by` becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    /// The verdict read from the verifier's outputs stands (tampering checks still apply).
    Verdict,
    /// No verdict, the agent's code ran: the agent's failure (graded not solved, cause
    /// named) when the same grader solves the task's reference solution, else the grader's
    /// (`evaluation_error`).
    AgentIfValidated,
    /// The grader's machinery or the host failed: `evaluation_error`, whatever the
    /// reference solution does (the agent is not asked to answer for it).
    Grader,
    /// The harness stopped grading (shutdown, cancel): the attempt ends `cancelled` for a
    /// cancel, `infrastructure_error` for the worker's own stop (retried), never graded.
    Stopped,
}

/// The rule: what a grading run ended by `by` becomes, `verdict` saying whether a usable
/// verdict was read (an exit code a verifier gives, or a reward file). A tree that ended
/// itself keeps its verdict; the harness's timeout or a limit leaves none that can be
/// trusted (the tree was killed mid-run) and is the agent's on a validated task; what the
/// harness or the host did is never the agent's.
pub fn judge(by: EndedBy, verdict: bool) -> Judgement {
    match by {
        EndedBy::Itself if verdict => Judgement::Verdict,
        EndedBy::Itself | EndedBy::Timeout | EndedBy::Limit => Judgement::AgentIfValidated,
        EndedBy::Host | EndedBy::Launcher => Judgement::Grader,
        EndedBy::Shutdown | EndedBy::Cancel => Judgement::Stopped,
    }
}

/// Whether an out-of-memory kill in a run was the run's own limit (`Limit`) or the host's
/// (`Host`): `memory_limited` says whether the run had a memory limit, `limit_reached` how
/// many times the kernel saw its usage reach that limit (cgroup v2 `memory.events` `oom`;
/// `None` where the hierarchy does not count it, cgroup v1), `oom_kills` how many of its
/// processes any OOM killer killed. `None` when nothing was killed.
pub fn oom_ender(
    memory_limited: bool,
    limit_reached: Option<u64>,
    oom_kills: u64,
) -> Option<EndedBy> {
    if oom_kills == 0 {
        return None;
    }
    Some(match (memory_limited, limit_reached) {
        (false, _) | (true, Some(0)) => EndedBy::Host,
        (true, _) => EndedBy::Limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judgement_table() {
        use EndedBy as B;
        use Judgement as J;
        let table: &[(B, bool, J)] = &[
            (B::Itself, true, J::Verdict),
            (B::Itself, false, J::AgentIfValidated),
            (B::Timeout, true, J::AgentIfValidated),
            (B::Timeout, false, J::AgentIfValidated),
            (B::Limit, true, J::AgentIfValidated),
            (B::Limit, false, J::AgentIfValidated),
            (B::Host, true, J::Grader),
            (B::Host, false, J::Grader),
            (B::Launcher, true, J::Grader),
            (B::Launcher, false, J::Grader),
            (B::Shutdown, true, J::Stopped),
            (B::Shutdown, false, J::Stopped),
            (B::Cancel, true, J::Stopped),
            (B::Cancel, false, J::Stopped),
        ];
        let mut seen = 0;
        for by in crate::record::ALL_ENDERS {
            for verdict in [true, false] {
                let want = table
                    .iter()
                    .find(|(b, v, _)| *b == by && *v == verdict)
                    .map(|r| r.2)
                    .expect("every row listed");
                assert_eq!(judge(by, verdict), want, "{by:?} verdict {verdict}");
                seen += 1;
            }
        }
        assert_eq!(seen, table.len());
        // Only the tree's own doing, or a limit it ran into, can become the agent's failure.
        for by in [B::Host, B::Launcher, B::Shutdown, B::Cancel] {
            for verdict in [true, false] {
                assert!(
                    !matches!(judge(by, verdict), J::AgentIfValidated | J::Verdict),
                    "{by:?} blamed the agent"
                );
            }
        }
    }

    #[test]
    fn the_oom_table() {
        use EndedBy as B;
        let table: &[(bool, Option<u64>, u64, Option<B>)] = &[
            (false, None, 0, None),
            (true, Some(3), 0, None),
            (false, None, 1, Some(B::Host)),
            (false, Some(0), 2, Some(B::Host)),
            (true, Some(0), 1, Some(B::Host)),
            (true, Some(1), 1, Some(B::Limit)),
            (true, None, 1, Some(B::Limit)),
        ];
        for (limited, reached, kills, want) in table {
            assert_eq!(
                oom_ender(*limited, *reached, *kills),
                *want,
                "{limited} {reached:?} {kills}"
            );
        }
    }
}
