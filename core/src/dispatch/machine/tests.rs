use super::*;
use crate::lifecycle::ALL_STATES;
use RunState as R;

/// Every (run state, event) pair and what it does. A new state or event fails the
/// completeness check below until it is added here.
fn run_table() -> Vec<(RunState, RunEvent, Result<RunMove, RunRefusal>)> {
    use RunEvent as E;
    use RunMove::{Stays, To};
    use Unchanged::{Already, Ended, NoMove};
    let idle = |all_enqueued| E::Idle { all_enqueued };
    let resume = |has_work| E::Resume { has_work };
    let grade = |has_work| E::Grade { has_work };
    vec![
        (R::Planned, E::Start, Ok(To(R::Running))),
        (R::Running, E::Start, Ok(Stays(Already))),
        (R::Cancelling, E::Start, Ok(Stays(Already))),
        (R::Cancelled, E::Start, Ok(Stays(Already))),
        (R::Finished, E::Start, Ok(Stays(Already))),
        (R::Planned, E::Cancel, Ok(To(R::Cancelled))),
        (R::Running, E::Cancel, Ok(To(R::Cancelling))),
        (R::Cancelling, E::Cancel, Ok(Stays(Already))),
        (R::Cancelled, E::Cancel, Ok(Stays(Already))),
        (R::Finished, E::Cancel, Ok(Stays(Ended))),
        (R::Planned, idle(true), Ok(Stays(NoMove))),
        (R::Running, idle(true), Ok(To(R::Finished))),
        (R::Cancelling, idle(true), Ok(To(R::Cancelled))),
        (R::Cancelled, idle(true), Ok(Stays(NoMove))),
        (R::Finished, idle(true), Ok(Stays(NoMove))),
        (R::Planned, idle(false), Ok(Stays(NoMove))),
        (R::Running, idle(false), Ok(Stays(NoMove))),
        (R::Cancelling, idle(false), Ok(Stays(NoMove))),
        (R::Cancelled, idle(false), Ok(Stays(NoMove))),
        (R::Finished, idle(false), Ok(Stays(NoMove))),
        (R::Planned, resume(true), Err(RunRefusal::NotStarted)),
        (R::Running, resume(true), Ok(Stays(Already))),
        (R::Cancelling, resume(true), Ok(To(R::Running))),
        (R::Cancelled, resume(true), Ok(To(R::Running))),
        (R::Finished, resume(true), Ok(To(R::Running))),
        (R::Planned, resume(false), Err(RunRefusal::NotStarted)),
        (R::Running, resume(false), Ok(Stays(Already))),
        (R::Cancelling, resume(false), Ok(Stays(NoMove))),
        (R::Cancelled, resume(false), Ok(Stays(NoMove))),
        (R::Finished, resume(false), Ok(Stays(NoMove))),
        (R::Planned, grade(true), Err(RunRefusal::NotStarted)),
        (R::Running, grade(true), Ok(Stays(Already))),
        (R::Cancelling, grade(true), Err(RunRefusal::Cancelled)),
        (R::Cancelled, grade(true), Err(RunRefusal::Cancelled)),
        (R::Finished, grade(true), Ok(To(R::Running))),
        (R::Planned, grade(false), Err(RunRefusal::NotStarted)),
        (R::Running, grade(false), Ok(Stays(Already))),
        (R::Cancelling, grade(false), Err(RunRefusal::Cancelled)),
        (R::Cancelled, grade(false), Err(RunRefusal::Cancelled)),
        (R::Finished, grade(false), Ok(Stays(NoMove))),
    ]
}

#[test]
fn every_run_state_and_event_is_decided_as_the_table_says() {
    let table = run_table();
    for s in RunState::ALL {
        for e in RunEvent::ALL {
            let rows: Vec<_> = table.iter().filter(|r| r.0 == s && r.1 == e).collect();
            assert_eq!(rows.len(), 1, "{s} {e:?}: one row in the table");
            assert_eq!(run_on(s, e), rows[0].2, "{s} {e:?}");
        }
    }
    assert_eq!(table.len(), RunState::ALL.len() * RunEvent::ALL.len());
}

#[test]
fn an_ended_run_is_never_moved_by_a_cancel_and_only_work_reopens_it() {
    for s in [R::Finished, R::Cancelled] {
        assert!(matches!(run_on(s, RunEvent::Cancel), Ok(RunMove::Stays(_))));
        for e in RunEvent::ALL {
            if let Ok(RunMove::To(to)) = run_on(s, e) {
                assert_eq!(to, R::Running, "{s} {e:?}");
                assert!(
                    matches!(
                        e,
                        RunEvent::Resume { has_work: true } | RunEvent::Grade { has_work: true }
                    ),
                    "{s} {e:?}"
                );
            }
        }
    }
}

#[test]
fn idle_is_when_idle() {
    for s in RunState::ALL {
        for all_enqueued in [true, false] {
            let want = s.when_idle(all_enqueued);
            let got = match run_on(s, RunEvent::Idle { all_enqueued }) {
                Ok(RunMove::To(t)) => Some(t),
                _ => None,
            };
            assert_eq!(got, want, "{s} {all_enqueued}");
        }
    }
}

fn class(state: ItemState, outcome: Option<State>) -> ItemClass {
    ItemClass { state, outcome }
}

/// What each event does to each item state (done items: by outcome, below).
#[test]
fn every_item_class_and_event_is_decided_as_the_table_says() {
    use ItemEvent as E;
    use ItemState as I;
    let ready = class(I::Ready, None);
    let leased = class(I::Leased, None);
    let cancelled = class(I::Cancelled, Some(State::Cancelled));
    let to = ItemMove::To;
    let stays = ItemMove::Stays;
    for c in ItemClass::all() {
        for e in ItemEvent::ALL {
            let want = match (c.state, e) {
                (I::Ready, E::Claim) => to(leased),
                (I::Ready, E::Cancel | E::BudgetStop) => to(cancelled),
                (I::Ready, _) => stays,
                (I::Leased, E::Settle(Settled::Retry) | E::Revoke) => to(ready),
                (I::Leased, E::Settle(Settled::Done(s))) => to(class(I::Done, Some(s))),
                (I::Leased, _) => stays,
                (I::Done, E::GradeRequeue) => to(ready),
                (I::Done, E::Resume) => match c.outcome {
                    Some(State::InfrastructureError | State::Cancelled) => to(ready),
                    _ => stays,
                },
                (I::Done, _) => stays,
                (I::Cancelled, E::Resume) => to(ready),
                (I::Cancelled, _) => stays,
            };
            assert_eq!(item_on(c, e), want, "{c:?} {e:?}");
        }
    }
}

#[test]
fn a_settle_moves_only_a_leased_item_and_only_to_a_terminal_outcome() {
    for s in ALL_STATES {
        let got = item_on(
            class(ItemState::Leased, None),
            ItemEvent::Settle(Settled::Done(s)),
        );
        if s.is_terminal() {
            assert_eq!(got, ItemMove::To(class(ItemState::Done, Some(s))));
        } else {
            assert_eq!(got, ItemMove::Stays, "{s:?} is not an outcome");
        }
    }
}

#[test]
fn bulk_moves_are_the_table_over_every_class() {
    let moves = |e| item_moves(e);
    assert_eq!(
        moves(ItemEvent::Cancel),
        vec![(
            class(ItemState::Ready, None),
            class(ItemState::Cancelled, Some(State::Cancelled))
        )]
    );
    assert_eq!(moves(ItemEvent::BudgetStop), moves(ItemEvent::Cancel));
    let resumed: Vec<_> = moves(ItemEvent::Resume).into_iter().map(|m| m.0).collect();
    assert_eq!(
        resumed,
        vec![
            class(ItemState::Done, Some(State::Cancelled)),
            class(ItemState::Done, Some(State::InfrastructureError)),
            class(ItemState::Cancelled, Some(State::Cancelled)),
        ]
    );
    let c = MoveColumns::of(ItemEvent::Resume);
    assert_eq!(c.from_state, ["done", "done", "cancelled"]);
    assert_eq!(
        c.from_outcome,
        [
            Some("cancelled"),
            Some("infrastructure_error"),
            Some("cancelled")
        ]
    );
    assert_eq!(c.to_state, ["ready", "ready", "ready"]);
    assert_eq!(c.to_outcome, [None, None, None]);
    let c = MoveColumns::of(ItemEvent::Cancel);
    assert_eq!(
        (c.from_state, c.from_outcome, c.to_state, c.to_outcome),
        (
            vec!["ready"],
            vec![None],
            vec!["cancelled"],
            vec![Some("cancelled")]
        )
    );
    for s in ItemState::ALL {
        assert_eq!(ItemState::parse(s.as_str()), Some(s));
    }
}

#[test]
fn claims_and_revokes_move_one_live_class() {
    assert_eq!(live_move(ItemEvent::Claim), Some(("ready", "leased")));
    assert_eq!(live_move(ItemEvent::Revoke), Some(("leased", "ready")));
    assert_eq!(
        live_move(ItemEvent::Settle(Settled::Retry)),
        Some(("leased", "ready"))
    );
    assert_eq!(
        live_move(ItemEvent::Resume),
        None,
        "resume moves classes with outcomes"
    );
}
