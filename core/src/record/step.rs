//! Appending a lifecycle step to an existing attempt record.
//!
//! Whoever extends a record's transition log after the attempt itself has run (grading the
//! recorded work later with `akbench run evaluate`, a worker's `GRADE` assignment, the end of
//! such a grade) goes through [`AttemptRecord::step`]: the event is applied to the record's
//! state by [`lifecycle::apply`], so a step the lifecycle forbids is refused the same way as
//! in the orchestrator that ran the attempt, and the record is left unchanged.

use super::{AttemptRecord, Transition};
use crate::lifecycle::{self, Event, State, TransitionError};
use chrono::{DateTime, Utc};

impl AttemptRecord {
    /// Applies `event` to the attempt's state ([`lifecycle::apply`]) and appends the state it
    /// enters to the transition log (next `seq`, entered `at`, with `note`); the attempt's
    /// `state` becomes that state, which is returned. Refused, with nothing changed, when the
    /// lifecycle does not allow `event` in the attempt's state.
    pub fn step(
        &mut self,
        event: Event,
        at: DateTime<Utc>,
        note: Option<String>,
    ) -> Result<State, TransitionError> {
        let to = lifecycle::apply(self.state, event)?;
        self.transitions.push(Transition {
            seq: u32::try_from(self.transitions.len()).unwrap_or(u32::MAX),
            state: to,
            at,
            note,
        });
        self.state = to;
        Ok(to)
    }
}

#[cfg(test)]
mod tests {
    use crate::lifecycle::{apply, is_valid_step, Event, State, ALL_EVENTS, ALL_STATES};
    use crate::testkit::{attempt_record, transitions_along};
    use chrono::{TimeZone, Utc};

    /// A record whose transition log is a valid path from pending to `state`: the chain up to
    /// the first state `state` can follow.
    fn record_in(state: State) -> crate::record::AttemptRecord {
        let mut path = vec![State::Pending];
        while *path.last().unwrap() != state {
            let last = *path.last().unwrap();
            if is_valid_step(last, state) {
                path.push(state);
            } else {
                path.push(last.next_in_chain().unwrap());
            }
        }
        let mut r = attempt_record(uuid::Uuid::nil(), "t", 1, State::Failed, None);
        let at = r.transitions[0].at;
        r.transitions = transitions_along(&path, at);
        r.state = state;
        r
    }

    #[test]
    fn every_state_and_event_appends_what_the_lifecycle_allows_and_nothing_else() {
        let at = Utc.with_ymd_and_hms(2026, 12, 2, 1, 0, 0).unwrap();
        for from in ALL_STATES {
            for event in ALL_EVENTS {
                let mut r = record_in(from);
                let before = r.clone();
                let got = r.step(event, at, Some("why".into()));
                match apply(from, event) {
                    Ok(to) => {
                        assert_eq!(got, Ok(to), "{from} {event:?}");
                        assert_eq!(r.state, to);
                        assert_eq!(r.transitions.len(), before.transitions.len() + 1);
                        let t = r.transitions.last().unwrap();
                        assert_eq!(usize::try_from(t.seq).unwrap(), before.transitions.len());
                        assert_eq!((t.state, t.at), (to, at));
                        assert_eq!(t.note.as_deref(), Some("why"));
                        r.transitions.pop();
                        r.state = from;
                        assert_eq!(r, before, "only the transition and the state change");
                    }
                    Err(e) => {
                        assert_eq!(got, Err(e), "{from} {event:?}");
                        assert_eq!(r, before, "a refused step changes nothing");
                    }
                }
            }
        }
    }

    /// The sequences a later grade appends (run evaluate, a worker's GRADE assignment).
    #[test]
    fn a_later_grade_takes_only_lifecycle_steps() {
        use Event as E;
        use State as S;
        let at = Utc.with_ymd_and_hms(2026, 12, 2, 1, 0, 0).unwrap();
        // (state graded, events, states entered or the first refused event)
        type Case = (S, &'static [E], Result<&'static [S], E>);
        let cases: &[Case] = &[
            (
                S::NotGraded,
                &[E::Regrade, E::Advance, E::Complete],
                Ok(&[S::Evaluating, S::Finalizing, S::Completed]),
            ),
            (
                S::Completed,
                &[E::Regrade, E::EvaluationFailed],
                Ok(&[S::Evaluating, S::EvaluationError]),
            ),
            (
                S::EvaluationError,
                &[E::Regrade, E::Cancel],
                Ok(&[S::Evaluating, S::Cancelled]),
            ),
            (
                S::NotGraded,
                &[E::Regrade, E::InfrastructureFailed],
                Ok(&[S::Evaluating, S::InfrastructureError]),
            ),
            (S::Failed, &[E::Regrade], Err(E::Regrade)),
            (S::Timeout, &[E::Regrade], Err(E::Regrade)),
            (S::InfrastructureError, &[E::Regrade], Err(E::Regrade)),
            (S::Cancelled, &[E::Regrade], Err(E::Regrade)),
            (S::InvalidConfiguration, &[E::Regrade], Err(E::Regrade)),
            (S::NotGraded, &[E::Advance], Err(E::Advance)),
            (S::Completed, &[E::Complete], Err(E::Complete)),
            (S::NotGraded, &[E::Regrade, E::Complete], Err(E::Complete)),
            (
                S::NotGraded,
                &[E::Regrade, E::AgentFailed],
                Err(E::AgentFailed),
            ),
        ];
        for (from, events, want) in cases {
            let mut r = record_in(*from);
            let logged = r.transitions.len();
            let got: Result<Vec<S>, E> = events
                .iter()
                .map(|e| r.step(*e, at, None).map_err(|err| err.event))
                .collect();
            match want {
                Ok(states) => {
                    assert_eq!(got.as_deref(), Ok(*states), "{from} {events:?}");
                    let appended: Vec<S> =
                        r.transitions[logged..].iter().map(|t| t.state).collect();
                    assert_eq!(&appended, states);
                }
                Err(refused) => assert_eq!(got, Err(*refused), "{from} {events:?}"),
            }
            let path: Vec<S> = r.transitions.iter().map(|t| t.state).collect();
            crate::lifecycle::validate_path(&path).unwrap();
        }
    }
}
