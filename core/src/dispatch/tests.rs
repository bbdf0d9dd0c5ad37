use super::*;
use crate::lifecycle::State::*;

/// `ms` milliseconds after a fixed instant (2026-01-01T00:00:00Z): the tables' times.
fn at(ms: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
        + chrono::Duration::milliseconds(ms)
}

#[test]
fn run_states_round_trip_and_end_only_when_all_enqueued() {
    for s in RunState::ALL {
        assert_eq!(RunState::parse(s.as_str()), Some(s));
    }
    assert_eq!(RunState::parse("finshed"), None);
    let table = [
        (RunState::Planned, true, None),
        (RunState::Running, true, Some(RunState::Finished)),
        (RunState::Running, false, None),
        (RunState::Cancelling, true, Some(RunState::Cancelled)),
        (RunState::Cancelling, false, None),
        (RunState::Cancelled, true, None),
        (RunState::Finished, true, None),
    ];
    for (state, enqueued, want) in table {
        assert_eq!(
            state.when_idle(enqueued),
            want,
            "{state} enqueued={enqueued}"
        );
    }
}

#[test]
fn retry_budgets_are_bounded() {
    assert_eq!(check_retries(0), Ok(0));
    assert_eq!(check_retries(10), Ok(10));
    assert_eq!(check_retries(11), Err(TooManyRetries(11)));
    assert_eq!(
        check_retries(4_294_967_295),
        Err(TooManyRetries(4_294_967_295))
    );
    assert_eq!(check_retries(u64::MAX), Err(TooManyRetries(u64::MAX)));
    assert!(TooManyRetries(11).to_string().contains("maximum 10"));
}

#[test]
fn backoff_doubles_up_to_its_cap_and_jitter_stays_within_half_and_whole() {
    let b = Backoff {
        base: Duration::from_secs(2),
        cap: Duration::from_secs(60),
    };
    let table = [
        (1, 2),
        (2, 4),
        (3, 8),
        (5, 32),
        (6, 60),
        (40, 60),
        (u32::MAX, 60),
    ];
    for (retry, secs) in table {
        assert_eq!(b.nominal(retry), Duration::from_secs(secs), "retry {retry}");
    }
    assert_eq!(b.delay(3, 0.0), Duration::from_secs(4));
    assert_eq!(b.delay(3, 1.0), Duration::from_secs(8));
    assert_eq!(b.delay(3, 0.5), Duration::from_secs(6));
    assert_eq!(b.delay(3, f64::NAN), Duration::from_secs(4));
    assert_eq!(b.delay(3, 7.0), Duration::from_secs(8));
    assert_eq!(b.delay(3, -1.0), Duration::from_secs(4));
    assert_eq!(Backoff::NONE.delay(9, 0.9), Duration::ZERO);
    // The default: ten retries wait at most ten minutes in all.
    let total: Duration = (1..=MAX_INFRASTRUCTURE_RETRIES)
        .map(|r| Backoff::default().nominal(r))
        .sum();
    assert!(total <= Duration::from_secs(600), "{total:?}");
}

#[test]
fn only_infrastructure_errors_within_budget_are_retried_and_never_while_cancelling() {
    use RunState::*;
    // (terminal, attempts used, budget, run) -> retried?
    let table = [
        (InfrastructureError, 1, 0, Running, false),
        (InfrastructureError, 1, 1, Running, true),
        (InfrastructureError, 2, 1, Running, false),
        (InfrastructureError, 3, 3, Running, true),
        (InfrastructureError, 1, 1, Cancelling, false),
        (InfrastructureError, 1, 1, Cancelled, false),
        // Interrupted by its worker (a shutdown), not by the user: an infrastructure fact.
        (State::Cancelled, 1, 1, Running, true),
        (State::Cancelled, 2, 1, Running, false),
        (State::Cancelled, 1, 1, Cancelling, false),
        (Failed, 1, 5, Running, false),
        (Timeout, 1, 5, Running, false),
        (Completed, 1, 5, Running, false),
        (InvalidConfiguration, 1, 5, Running, false),
        (EvaluationError, 1, 5, Running, false),
        (NotGraded, 1, 5, Running, false),
    ];
    for (terminal, used, budget, run, want) in table {
        let e = Ended {
            terminal,
            attempts_used: used,
            retry_budget: budget,
            run,
        };
        assert_eq!(retries(&e), want, "{e:?}");
        let s = settle(&e, &Backoff::default(), 0.0);
        if want {
            assert_eq!(
                s,
                Settlement::Retry {
                    after: Backoff::default().delay(used, 0.0)
                },
                "{e:?}"
            );
        } else {
            assert_eq!(s, Settlement::Done(trial_terminal(terminal, run)), "{e:?}");
        }
    }
}

#[test]
fn a_cancelled_attempt_counts_as_cancelled_only_when_the_user_cancelled_the_run() {
    let table = [
        (State::Cancelled, RunState::Running, InfrastructureError),
        (State::Cancelled, RunState::Finished, InfrastructureError),
        (State::Cancelled, RunState::Cancelling, State::Cancelled),
        (State::Cancelled, RunState::Cancelled, State::Cancelled),
        (Failed, RunState::Running, Failed),
        (Completed, RunState::Cancelling, Completed),
    ];
    for (reported, run, want) in table {
        assert_eq!(trial_terminal(reported, run), want, "{reported:?} in {run}");
    }
}

#[test]
fn a_worker_is_alive_while_it_is_heard_from_not_while_its_stream_is_open() {
    let t0 = DateTime::from_timestamp(1_767_225_600, 0).unwrap();
    let ttl = Duration::from_secs(30);
    let s = chrono::Duration::seconds;
    let table = [
        (s(0), true),
        (s(29), true),
        (s(30), false),
        (s(3600), false),
        (s(-5), true),
    ];
    for (since, want) in table {
        assert_eq!(alive(t0, t0 + since, ttl), want, "{since}");
    }
}

#[test]
fn a_worker_whose_lease_expired_for_silence_is_not_alive_until_heard_again() {
    let t0 = DateTime::from_timestamp(1_767_225_600, 0).unwrap();
    let ttl = Duration::from_secs(2);
    let ms = chrono::Duration::milliseconds;
    // (last heard, silenced at, now, alive)
    let table = [
        // Never silenced: as `alive`.
        (t0, None, t0 + ms(1_999), true),
        (t0, None, t0 + ms(2_000), false),
        // Heard (a report) after its last heartbeat; its lease expired 1.8 s later, within
        // the TTL of the report: silent all the same.
        (t0, Some(t0 + ms(1_800)), t0 + ms(1_800), false),
        (t0, Some(t0 + ms(1_800)), t0 + ms(1_900), false),
        // Silenced at the very instant it was last heard: silent.
        (t0, Some(t0), t0 + ms(10), false),
        // Heard again after the expiry: alive again.
        (t0 + ms(2_500), Some(t0 + ms(1_800)), t0 + ms(2_600), true),
        // ... and, heard long ago, not alive anyway.
        (t0 + ms(2_500), Some(t0 + ms(1_800)), t0 + ms(4_500), false),
    ];
    for (heard, silenced, now, want) in table {
        assert_eq!(
            alive_unless_silenced(heard, silenced, now, ttl),
            want,
            "heard {heard}, silenced {silenced:?}, now {now}"
        );
    }
}

#[test]
fn only_alive_idle_non_draining_workers_claim() {
    let table = [
        (true, false, 1, true),
        (false, false, 1, false),
        (true, true, 1, false),
        (true, false, 0, false),
    ];
    for (alive, draining, free_slots, want) in table {
        let w = WorkerView {
            alive,
            draining,
            free_slots,
        };
        assert_eq!(may_claim(&w), want, "{w:?}");
    }
}

#[test]
fn a_rescued_trial_goes_back_to_the_worker_that_lost_it_only_when_nobody_else_can_take_it() {
    let table = [
        (None, "w1", true, true),
        (Some("w2"), "w1", true, true),
        (Some("w1"), "w1", true, false),
        (Some("w1"), "w1", false, true),
    ];
    for (lost_by, me, others, want) in table {
        assert_eq!(
            may_take(lost_by, me, others),
            want,
            "{lost_by:?} {me} {others}"
        );
    }
}

#[test]
fn the_reaper_spares_workers_it_still_hears() {
    let ttl = Duration::from_secs(10);
    // (stored expiry, last heard listing it, now) -> fate
    let table = [
        // Never heard (another replica's worker, a worker gone): the stored expiry decides.
        (at(10_000), None, at(10_000), LeaseFate::Reap),
        (at(10_000), None, at(12_000), LeaseFate::Reap),
        // Heard within the TTL while the database could not store it (an outage, a frozen
        // database): the lease lives TTL after that heartbeat.
        (
            at(10_000),
            Some(at(9_000)),
            at(12_000),
            LeaseFate::Live(at(19_000)),
        ),
        (
            at(10_000),
            Some(at(14_999)),
            at(24_998),
            LeaseFate::Live(at(24_999)),
        ),
        // Heard, but longer ago than the TTL: silent.
        (at(10_000), Some(at(14_000)), at(24_000), LeaseFate::Reap),
        (at(10_000), Some(at(1_000)), at(12_000), LeaseFate::Reap),
        // An older heartbeat never shortens the stored expiry.
        (
            at(30_000),
            Some(at(1_000)),
            at(12_000),
            LeaseFate::Live(at(30_000)),
        ),
    ];
    for (stored, heard, now, want) in table {
        assert_eq!(
            reap(stored, heard, now, ttl),
            want,
            "{stored} {heard:?} {now}"
        );
    }
}

#[test]
fn late_and_resent_reports() {
    let live = AttemptView {
        epoch: 3,
        fenced: false,
        terminal: None,
    };
    let done = AttemptView {
        terminal: Some(Completed),
        ..live
    };
    let reaped = AttemptView {
        fenced: true,
        terminal: Some(InfrastructureError),
        ..live
    };
    let table = [
        (live, 3, Completed, Acceptance::Accept),
        (live, 2, Completed, Acceptance::Stale),
        (done, 3, Completed, Acceptance::Duplicate),
        (done, 3, Failed, Acceptance::Conflict),
        (done, 2, Completed, Acceptance::Stale),
        (reaped, 3, Completed, Acceptance::Stale),
        (reaped, 3, InfrastructureError, Acceptance::Stale),
    ];
    for (a, epoch, _, want) in &table {
        assert_eq!(
            current(a, *epoch),
            *want != Acceptance::Stale,
            "{a:?} {epoch}"
        );
    }
    for (a, epoch, terminal, want) in table {
        assert_eq!(
            accept_finish(&a, epoch, terminal),
            want,
            "{a:?} {epoch} {terminal:?}"
        );
    }
    let rec = [
        (done, 3, None, "sha256:a", Acceptance::Accept),
        (done, 3, Some("sha256:a"), "sha256:a", Acceptance::Duplicate),
        (done, 3, Some("sha256:a"), "sha256:b", Acceptance::Conflict),
        (done, 4, None, "sha256:a", Acceptance::Stale),
        (reaped, 3, None, "sha256:a", Acceptance::Stale),
    ];
    for (a, epoch, stored, digest, want) in rec {
        assert_eq!(
            accept_record(&a, epoch, stored, digest),
            want,
            "{a:?} {epoch} {stored:?}"
        );
    }
}

#[test]
fn caps_admit_until_the_first_full_one() {
    let v = |run_live, run_cap, agent_live, agent_cap, route_live, route_cap| CapView {
        run_live,
        run_cap,
        agent_live,
        agent_cap,
        route_live,
        route_cap,
    };
    let table = [
        (v(0, None, 0, None, 0, None), Ok(())),
        (v(100, None, 100, None, 100, None), Ok(())),
        (v(1, Some(2), 0, None, 0, None), Ok(())),
        (v(2, Some(2), 0, None, 0, None), Err(Full::Run)),
        (v(2, Some(2), 1, Some(1), 0, None), Err(Full::Run)),
        (v(1, Some(2), 1, Some(1), 0, None), Err(Full::Agent)),
        (v(0, None, 0, Some(1), 1, Some(1)), Err(Full::Route)),
        (v(0, None, 0, Some(0), 0, None), Err(Full::Agent)),
        (v(0, None, 0, Some(1), 0, Some(1)), Ok(())),
    ];
    for (view, want) in table {
        assert_eq!(within_caps(&view), want, "{view:?}");
    }
}

#[test]
fn a_lost_attempt_ends_infrastructure_error_after_whatever_its_worker_reported() {
    use crate::lifecycle::{is_valid_step, ALL_STATES};
    for state in ALL_STATES {
        let close = close_lost(state);
        assert_eq!(close.terminal, State::InfrastructureError, "{state:?}");
        match close.step {
            // Already there: nothing appended.
            None => assert_eq!(state, State::InfrastructureError),
            Some(step) => {
                assert_eq!(step, State::InfrastructureError);
                assert!(is_valid_step(state, step), "{state:?} -> {step:?}");
            }
        }
    }
}

#[test]
fn every_loss_has_its_own_cause_naming_the_worker() {
    let causes: Vec<String> = Loss::ALL.iter().map(|l| l.cause("w-7")).collect();
    for (l, c) in Loss::ALL.iter().zip(&causes) {
        assert!(c.contains("w-7"), "{c}");
        assert_eq!(Loss::parse(l.as_str()), Some(*l));
        assert_eq!(c.contains("silent"), *l == Loss::WentSilent, "{c}");
    }
    let mut unique = causes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), causes.len());
}

#[test]
fn only_the_coordinators_cancel_makes_an_attempt_cancelled() {
    use crate::lifecycle::Event;
    let (e, cause) = Stop::Cancelled.end("while the agent ran");
    assert_eq!(
        (e, cause.as_str()),
        (Event::Cancel, "cancelled while the agent ran")
    );
    assert_eq!(Stop::Cancelled.end("").1, "cancelled");
    let (e, cause) = Stop::Interrupted("worker w drained".into()).end("while evaluating");
    assert_eq!(e, Event::InfrastructureFailed);
    assert_eq!(
        cause,
        "interrupted by its worker while evaluating: worker w drained"
    );
    // The same bucket as the trial-level rule gives a `cancelled` an old worker reports
    // while its run is not being cancelled.
    for run in RunState::ALL {
        let from_interrupt = crate::lifecycle::apply(State::Executing, e).unwrap();
        if !run.is_cancelling() {
            assert_eq!(from_interrupt, trial_terminal(State::Cancelled, run));
        }
    }
}

#[test]
fn run_caps_come_from_the_manifest_and_meet_candidates() {
    let c = crate::manifest::Concurrency {
        max_trials: Some(4),
        per_agent: [("a".to_string(), 2)].into(),
        per_provider_route: [("anthropic".to_string(), 1)].into(),
    };
    let caps = c.caps();
    assert_eq!(caps.max_trials, Some(4));
    assert!(!caps.is_empty() && RunCaps::default().is_empty());
    let live = Live {
        run: 3,
        agent: 2,
        route: 1,
    };
    // (agent, route) -> the first full cap
    let table = [
        ("a", Some("anthropic"), Err(Full::Agent)),
        ("b", Some("anthropic"), Err(Full::Route)),
        ("b", Some("openai"), Ok(())),
        ("b", None, Ok(())),
    ];
    for (agent, route, want) in table {
        assert_eq!(
            within_caps(&caps.view(agent, route, live)),
            want,
            "{agent} {route:?}"
        );
    }
    let full = Live { run: 4, ..live };
    assert_eq!(within_caps(&caps.view("b", None, full)), Err(Full::Run));
    // The stored form keeps the coordinator's field names.
    assert_eq!(
        serde_json::to_value(&caps).unwrap(),
        serde_json::json!({"per_agent": {"a": 2}, "per_provider": {"anthropic": 1}, "max_trials": 4})
    );
}

#[test]
fn replicas_judge_each_other_by_their_own_previous_mark() {
    use replica::replica_alive;
    let ttl = Duration::from_secs(10);
    // (other replica's mark, judge's previous mark) -> alive
    let table = [
        // The judge's first pass: every replica is alive.
        (at(0), None, true),
        // Marked after, or less than a TTL before, the judge's previous mark.
        (at(5_000), Some(at(1_000)), true),
        (at(1_000), Some(at(10_999)), true),
        // Missed marking for a TTL while the judge kept marking: dead.
        (at(1_000), Some(at(11_000)), false),
        (at(1_000), Some(at(60_000)), false),
        // A database frozen for both: the judge's previous mark is from before the freeze
        // too, however late the clock is now.
        (at(1_000), Some(at(2_000)), true),
    ];
    for (seen, previous, want) in table {
        assert_eq!(
            replica_alive(seen, previous, ttl),
            want,
            "{seen} {previous:?}"
        );
    }
}

#[test]
fn a_lease_is_decided_by_the_replica_holding_its_workers_session() {
    use replica::{holder, reap_across, Holder};
    let ttl = Duration::from_secs(10);
    let prev = Some(at(20_000));
    // (session: (here, its replica's mark), disconnected, judge's previous) -> holder
    let holders = [
        (None, false, prev, Holder::Nobody),
        (Some((true, Some(at(20_000)))), false, prev, Holder::Here),
        (Some((true, Some(at(20_000)))), true, prev, Holder::Nobody),
        (
            Some((false, Some(at(15_000)))),
            false,
            prev,
            Holder::OtherLive,
        ),
        // The other replica ended the session: nobody holds it.
        (Some((false, Some(at(15_000)))), true, prev, Holder::Nobody),
        // The other replica stopped marking a TTL before the judge's previous mark: dead.
        (Some((false, Some(at(10_000)))), false, prev, Holder::Nobody),
        (
            Some((false, Some(at(10_000)))),
            false,
            None,
            Holder::OtherLive,
        ),
        // No mark stored for it: not a live replica.
        (Some((false, None)), false, prev, Holder::Nobody),
        (Some((false, None)), false, None, Holder::Nobody),
    ];
    for (session, disconnected, previous, want) in holders {
        assert_eq!(
            holder(session, disconnected, previous, ttl),
            want,
            "{session:?} {disconnected} {previous:?}"
        );
    }
    // (stored expiry, heard here, holder, now) -> fate
    let fates = [
        // Another live replica holds the worker: left to it, heard here or not.
        (
            at(10_000),
            None,
            Holder::OtherLive,
            at(30_000),
            LeaseFate::Theirs,
        ),
        (
            at(10_000),
            Some(at(29_000)),
            Holder::OtherLive,
            at(30_000),
            LeaseFate::Theirs,
        ),
        // Here: this replica's heard set decides, as with one coordinator.
        (
            at(10_000),
            Some(at(25_000)),
            Holder::Here,
            at(30_000),
            LeaseFate::Live(at(35_000)),
        ),
        (at(10_000), None, Holder::Here, at(30_000), LeaseFate::Reap),
        // Nobody: the stored expiry (and anything heard here) decides.
        (
            at(10_000),
            None,
            Holder::Nobody,
            at(30_000),
            LeaseFate::Reap,
        ),
        (
            at(10_000),
            Some(at(25_000)),
            Holder::Nobody,
            at(30_000),
            LeaseFate::Live(at(35_000)),
        ),
    ];
    for (stored, heard, holder, now, want) in fates {
        assert_eq!(
            reap_across(stored, heard, holder, now, ttl),
            want,
            "{stored} {heard:?} {holder:?} {now}"
        );
    }
}

#[test]
fn a_replica_is_forgotten_after_missing_ten_ttls_of_marks() {
    use replica::forgotten;
    let ttl = Duration::from_secs(10);
    // (other replica's mark, judge's previous mark) -> forgotten
    let table = [
        // The judge's first pass forgets nobody.
        (at(0), None, false),
        // Dead (missed a TTL) but not for ten TTLs yet: kept.
        (at(0), Some(at(10_000)), false),
        (at(0), Some(at(99_999)), false),
        // Missed ten TTLs of marks while the judge kept marking.
        (at(0), Some(at(100_000)), true),
        (at(0), Some(at(1_000_000)), true),
        // Marked after the judge's previous mark.
        (at(200_000), Some(at(100_000)), false),
    ];
    for (seen, previous, want) in table {
        assert_eq!(forgotten(seen, previous, ttl), want, "{seen} {previous:?}");
    }
}

#[test]
fn a_live_replica_with_another_ttl_is_a_conflict() {
    use replica::{ttl_conflict, Marked};
    let mine = Duration::from_secs(10);
    let marked = |seen: i64, ttl: Option<u64>| Marked {
        replica: format!("r{seen}"),
        seen: at(seen),
        ttl: ttl.map(Duration::from_millis),
    };
    let now = at(100_000);
    // (the other replica, conflict?)
    let table = [
        // Live, same TTL.
        (marked(95_000, Some(10_000)), false),
        // Live (marked within its own TTL), another TTL.
        (marked(95_000, Some(30_000)), true),
        (marked(75_000, Some(30_000)), true),
        (marked(95_000, Some(2_000)), false), // marked 5 s ago with a 2 s TTL: dead
        (marked(99_000, Some(2_000)), true),
        // Dead for its own TTL: no conflict (it is not serving).
        (marked(60_000, Some(30_000)), false),
        // Marked before TTLs were recorded: unknown, not refused.
        (marked(99_000, None), false),
    ];
    for (other, want) in table {
        let got = ttl_conflict(std::slice::from_ref(&other), now, mine).is_some();
        assert_eq!(got, want, "{other:?}");
    }
}
