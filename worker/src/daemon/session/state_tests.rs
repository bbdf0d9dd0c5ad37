//! Table tests of the session's state machine ([`State::handle_event`]): each row sets a
//! state up by feeding it events, then gives it one more and compares the effects, with no
//! network, no coordinator and no clock (every time is `t0` plus an offset). Scenarios that
//! span timers (the linger, the backoff, a drain) follow the rows.

use super::event::{Effect, Event, Timer};
use super::refusal::Refusal;
use super::state::{Link, Settings, State};
use super::{Exit, FLUSH_TIMEOUT};
use crate::daemon::linger::LINGER;
use crate::daemon::runner;
use akbench_core::identity::Refused;
use akbench_proto::v1 as pb;
use akbench_proto::v1::coordinator_message::Body as In;
use akbench_proto::v1::worker_message::Body as Out;
use std::time::Duration;
use tokio::time::Instant;

const GRACE: Duration = Duration::from_secs(30);

fn state(leases: u32, coordinators: usize) -> State {
    let coordinators = (0..coordinators)
        .map(|i| format!("http://c{i}:1").parse().unwrap())
        .collect();
    let settings = Settings {
        worker_id: "w1".into(),
        grace: GRACE,
        leases,
        coordinators,
    };
    State::new(settings, 42)
}

/// An effect in a few words: what the tables compare.
fn summary(e: &Effect) -> String {
    let ids = |l: &[pb::HeldLease]| {
        l.iter()
            .map(|l| l.attempt_id.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    match e {
        Effect::Send(Out::Transitions(b)) => {
            let seqs: Vec<String> = b.transitions.iter().map(|t| t.seq.to_string()).collect();
            format!("send {}: {}", b.attempt_id, seqs.join(","))
        }
        Effect::Send(Out::Record(r)) => format!("record {}", r.attempt_id),
        Effect::Send(Out::Finished(f)) => format!("finished {}", f.attempt_id),
        Effect::Send(Out::Heartbeat(h)) => format!(
            "heartbeat free={} held={}{}",
            h.free_slots,
            ids(&h.leases),
            if h.draining { " draining" } else { "" }
        ),
        Effect::Send(other) => format!("send {other:?}"),
        Effect::Connect { at, held } => format!("connect {at} held={}", ids(held)),
        Effect::CloseStream => "close stream".into(),
        Effect::Start(a) => format!("start {}", a.attempt_id),
        Effect::EndUnstarted { assignment, .. } => {
            format!("end unstarted {}", assignment.attempt_id)
        }
        Effect::Cancel(id) => format!("cancel {id}"),
        Effect::Interrupt { attempt_id, .. } => format!("interrupt {attempt_id}"),
        Effect::CloseSlots => "close slots".into(),
        Effect::Exit(e) => format!("exit {e:?}"),
    }
}

fn step(s: &mut State, ev: Event, now: Instant) -> Vec<String> {
    s.handle_event(ev, now).iter().map(summary).collect()
}

fn message(body: In) -> Event {
    Event::Message(pb::CoordinatorMessage { body: Some(body) })
}

fn welcome(revoked: &[&str]) -> Event {
    message(In::Welcome(pb::Welcome {
        lease_ttl_ms: 30_000,
        heartbeat_interval_ms: 2_000,
        revoked_attempt_ids: revoked.iter().map(|s| s.to_string()).collect(),
    }))
}

/// Opened and welcomed.
fn open() -> Vec<Event> {
    vec![Event::Started, Event::Opened, welcome(&[])]
}

fn assign(id: &str) -> Event {
    message(In::Assignment(pb::Assignment {
        attempt_id: id.into(),
        epoch: 3,
        ..Default::default()
    }))
}

fn transition(id: &str, seq: u32) -> Event {
    Event::Runners(vec![runner::Event::Transition {
        attempt_id: id.into(),
        transition: pb::Transition {
            seq,
            state: pb::AttemptState::Preparing as i32,
            at_unix_ms: 1,
            note: String::new(),
        },
        traceparent: String::new(),
    }])
}

fn done(id: &str) -> Event {
    Event::Runners(vec![runner::Event::Done {
        attempt_id: id.into(),
        record_json: "{}".into(),
        digest: "d".into(),
        terminal: pb::AttemptState::Completed,
        cause: String::new(),
        traceparent: String::new(),
    }])
}

fn ack(id: &str, subject: pb::Subject, seq: u32) -> Event {
    message(In::Ack(pb::Ack {
        attempt_id: id.into(),
        seq,
        subject: subject as i32,
    }))
}

fn refusal(id: &str, code: pb::RefusalCode, subject: pb::Subject) -> Event {
    message(In::Refusal(pb::Refusal {
        attempt_id: id.into(),
        seq: 0,
        subject: subject as i32,
        code: code as i32,
        message: "refused".into(),
    }))
}

fn cancel(id: &str) -> Event {
    message(In::Cancel(pb::Cancel {
        attempt_id: id.into(),
        reason: "run cancelled".into(),
    }))
}

fn refused(why: Refused) -> Refusal {
    Refusal {
        why,
        message: format!("{why:?}"),
    }
}

fn timer(t: Timer) -> Event {
    Event::Timer(t)
}

fn drain() -> Event {
    Event::Drain("operator".into())
}

/// `open()` followed by `more`.
fn open_and(more: Vec<Event>) -> Vec<Event> {
    let mut v = open();
    v.extend(more);
    v
}

/// The stream of a welcomed worker broke and it reconnected: opened, not welcomed yet.
fn reconnected() -> Vec<Event> {
    vec![
        Event::StreamEnded(None),
        timer(Timer::Reconnect),
        Event::Opened,
    ]
}

fn row_cases() -> Vec<(&'static str, Vec<Event>, Event, Vec<&'static str>)> {
    use pb::RefusalCode as Code;
    use pb::Subject as Subj;
    vec![
        (
            "the first event opens a session",
            vec![],
            Event::Started,
            vec!["connect 0 held="],
        ),
        (
            "a lease with a free slot starts",
            open(),
            assign("a"),
            vec!["start a"],
        ),
        (
            "a duplicate lease is ignored",
            open_and(vec![assign("a")]),
            assign("a"),
            vec![],
        ),
        (
            "a heartbeat counts a held lease against the slots",
            open_and(vec![assign("a")]),
            timer(Timer::Heartbeat),
            vec!["heartbeat free=1 held=a"],
        ),
        (
            "with every lease taken no slot is free",
            open_and(vec![assign("a"), assign("b")]),
            timer(Timer::Heartbeat),
            vec!["heartbeat free=0 held=a,b"],
        ),
        (
            "no heartbeat before the welcome",
            vec![Event::Started, Event::Opened],
            timer(Timer::Heartbeat),
            vec![],
        ),
        (
            "a lease that arrives while draining is not started",
            open_and(vec![assign("a"), drain()]),
            assign("b"),
            vec!["end unstarted b"],
        ),
        (
            "drain with attempts live: slots closed, none free, nothing interrupted yet",
            open_and(vec![assign("a")]),
            drain(),
            vec!["close slots", "heartbeat free=0 held=a draining"],
        ),
        (
            "the coordinator's drain is a drain",
            open_and(vec![assign("a")]),
            message(In::Drain(pb::Drain {
                reason: "shutdown".into(),
            })),
            vec!["close slots", "heartbeat free=0 held=a draining"],
        ),
        (
            "a second drain closes nothing again",
            open_and(vec![assign("a"), drain()]),
            drain(),
            vec![],
        ),
        (
            "drain with nothing held exits at once",
            open(),
            drain(),
            vec![
                "close slots",
                "heartbeat free=0 held= draining",
                "close stream",
                "exit Drained",
            ],
        ),
        (
            "the grace running out interrupts running attempts only",
            open_and(vec![assign("a"), assign("b"), done("b"), drain()]),
            timer(Timer::Grace),
            vec!["interrupt a"],
        ),
        (
            "the last attempt of a drained worker ends: everything owed goes",
            open_and(vec![assign("a"), drain(), transition("a", 1)]),
            done("a"),
            vec!["record a", "finished a"],
        ),
        (
            "the last acknowledgement of a drained worker ends it",
            open_and(vec![
                assign("a"),
                drain(),
                done("a"),
                ack("a", Subj::Record, 0),
            ]),
            ack("a", Subj::Finished, 0),
            vec!["close stream", "exit Drained"],
        ),
        (
            "owed messages not delivered by the flush deadline",
            open_and(vec![assign("a"), drain(), done("a")]),
            timer(Timer::Flush),
            vec!["close stream", "exit Undelivered"],
        ),
        (
            "a cancel for an attempt held cancels it",
            open_and(vec![assign("a")]),
            cancel("a"),
            vec!["cancel a"],
        ),
        (
            "a cancel for an attempt not held is ignored",
            open_and(vec![assign("a")]),
            cancel("x"),
            vec![],
        ),
        (
            "a report about an attempt not held is ignored",
            open(),
            transition("x", 1),
            vec![],
        ),
        (
            "the first transition goes at once",
            open_and(vec![assign("a")]),
            transition("a", 1),
            vec!["send a: 1"],
        ),
        (
            "a later transition waits for the linger",
            open_and(vec![assign("a"), transition("a", 1)]),
            transition("a", 2),
            vec![],
        ),
        (
            "a stale epoch loses the lease",
            open_and(vec![assign("a")]),
            refusal("a", Code::StaleEpoch, Subj::Transitions),
            vec!["cancel a"],
        ),
        (
            "an unknown attempt loses the lease",
            open_and(vec![assign("a")]),
            refusal("a", Code::UnknownAttempt, Subj::Record),
            vec!["cancel a"],
        ),
        (
            "nothing more is sent about a lost lease",
            open_and(vec![
                assign("a"),
                refusal("a", Code::StaleEpoch, Subj::Transitions),
            ]),
            done("a"),
            vec![],
        ),
        (
            "unavailable: sent again with the next heartbeat",
            open_and(vec![
                assign("a"),
                transition("a", 1),
                refusal("a", Code::Unavailable, Subj::Transitions),
            ]),
            timer(Timer::Heartbeat),
            vec!["send a: 1", "heartbeat free=1 held=a"],
        ),
        (
            "a message refused for good is dropped; acknowledged rest settles the attempt",
            open_and(vec![
                assign("a"),
                done("a"),
                refusal("a", Code::RecordConflict, Subj::Record),
            ]),
            ack("a", Subj::Finished, 0),
            vec![],
        ),
        (
            "...and the settled attempt frees its slot",
            open_and(vec![
                assign("a"),
                done("a"),
                refusal("a", Code::RecordConflict, Subj::Record),
                ack("a", Subj::Finished, 0),
            ]),
            timer(Timer::Heartbeat),
            vec!["heartbeat free=2 held="],
        ),
        (
            "an acknowledged record alone does not settle the attempt",
            open_and(vec![assign("a"), done("a"), ack("a", Subj::Record, 0)]),
            timer(Timer::Heartbeat),
            vec!["heartbeat free=1 held=a"],
        ),
        (
            "a broken stream drops the stream and waits",
            open_and(vec![assign("a"), transition("a", 1)]),
            Event::StreamEnded(Some(refused(Refused::Other))),
            vec!["close stream"],
        ),
        (
            "reports made while disconnected are held",
            open_and(vec![assign("a"), Event::StreamEnded(None)]),
            done("a"),
            vec![],
        ),
        (
            "the reconnect presents the leases held",
            open_and(vec![assign("a"), assign("b"), Event::StreamEnded(None)]),
            timer(Timer::Reconnect),
            vec!["connect 0 held=a,b"],
        ),
        (
            "the welcome after a reconnect sends everything owed again, acknowledged or not",
            open_and(
                [
                    vec![
                        assign("a"),
                        transition("a", 1),
                        transition("a", 2),
                        done("a"),
                    ],
                    reconnected(),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
            ),
            welcome(&[]),
            vec!["send a: 1,2", "record a", "finished a"],
        ),
        (
            "acknowledged transitions are not sent again",
            open_and(
                [
                    vec![
                        assign("a"),
                        transition("a", 1),
                        transition("a", 2),
                        ack("a", Subj::Transitions, 1),
                    ],
                    reconnected(),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
            ),
            welcome(&[]),
            vec!["send a: 2"],
        ),
        (
            "a revoked lease is cancelled and its reports dropped",
            open_and(
                [
                    vec![
                        assign("a"),
                        assign("b"),
                        transition("a", 1),
                        transition("b", 1),
                    ],
                    reconnected(),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
            ),
            welcome(&["a"]),
            vec!["cancel a", "send b: 1"],
        ),
        (
            "a draining worker welcomed again says so at once",
            open_and(
                [vec![assign("a"), drain()], reconnected()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>(),
            ),
            welcome(&[]),
            vec!["heartbeat free=0 held=a draining"],
        ),
        (
            "a welcome clears the refusals in a row; a failure after it is not one",
            open_and(vec![
                Event::StreamEnded(None),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::Unauthenticated)),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::Unauthenticated)),
                timer(Timer::Reconnect),
                Event::Opened,
                welcome(&[]),
                Event::StreamEnded(Some(refused(Refused::Unauthenticated))),
                timer(Timer::Reconnect),
            ]),
            Event::OpenFailed(refused(Refused::Unauthenticated)),
            vec!["close stream"],
        ),
        (
            "the third refused credential in a row ends an idle worker",
            vec![
                Event::Started,
                Event::OpenFailed(refused(Refused::Unauthenticated)),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::PermissionDenied)),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::PermissionDenied)),
                timer(Timer::Reconnect),
            ],
            Event::OpenFailed(refused(Refused::PermissionDenied)),
            vec!["close stream", "exit CredentialRefused"],
        ),
        (
            "refusals of different kinds are not in a row",
            vec![
                Event::Started,
                Event::OpenFailed(refused(Refused::IdHeld)),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::Unauthenticated)),
                timer(Timer::Reconnect),
            ],
            Event::OpenFailed(refused(Refused::IdHeld)),
            vec!["close stream"],
        ),
        (
            "a worker id held elsewhere cancels what runs and waits for it",
            open_and(vec![
                assign("a"),
                Event::StreamEnded(None),
                timer(Timer::Reconnect),
                Event::StreamEnded(Some(refused(Refused::IdHeld))),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::IdHeld)),
                timer(Timer::Reconnect),
            ]),
            Event::OpenFailed(refused(Refused::IdHeld)),
            vec!["close stream", "cancel a"],
        ),
        (
            "...then exits once it ended",
            open_and(vec![
                assign("a"),
                Event::StreamEnded(None),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::Certificate)),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::Certificate)),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::Certificate)),
            ]),
            done("a"),
            vec!["exit CertificateRefused"],
        ),
        (
            "a refused worker does not reconnect",
            open_and(vec![
                assign("a"),
                Event::StreamEnded(None),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::IdHeld)),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::IdHeld)),
                timer(Timer::Reconnect),
                Event::OpenFailed(refused(Refused::IdHeld)),
            ]),
            timer(Timer::Reconnect),
            vec![],
        ),
    ]
}

#[test]
fn each_event_in_each_state_has_its_effects() {
    let t0 = Instant::now();
    let mut failures = Vec::new();
    for (name, given, event, want) in row_cases() {
        let mut s = state(2, 1);
        for ev in given {
            s.handle_event(ev, t0);
        }
        let got = step(&mut s, event, t0);
        if got != want {
            failures.push(format!("{name}:\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_failed_open_tries_the_next_coordinator_and_a_broken_stream_the_same() {
    let t0 = Instant::now();
    let mut s = state(2, 3);
    assert_eq!(step(&mut s, Event::Started, t0), ["connect 0 held="]);
    s.handle_event(Event::OpenFailed(refused(Refused::Other)), t0);
    assert_eq!(
        step(&mut s, timer(Timer::Reconnect), t0),
        ["connect 1 held="]
    );
    s.handle_event(Event::Opened, t0);
    s.handle_event(welcome(&[]), t0);
    s.handle_event(Event::StreamEnded(None), t0);
    assert_eq!(
        step(&mut s, timer(Timer::Reconnect), t0),
        ["connect 1 held="]
    );
    s.handle_event(Event::OpenFailed(refused(Refused::Other)), t0);
    s.handle_event(timer(Timer::Reconnect), t0);
    s.handle_event(Event::OpenFailed(refused(Refused::Other)), t0);
    assert_eq!(
        step(&mut s, timer(Timer::Reconnect), t0),
        ["connect 0 held="]
    );
}

/// The reconnect waits follow core's schedule (doubling from 100 ms, capped by the
/// heartbeat period, +-20%) and start again from the first after a welcome.
#[test]
fn reconnect_waits_back_off_and_reset_after_a_welcome() {
    let t0 = Instant::now();
    let mut s = state(2, 1);
    s.handle_event(Event::Started, t0);
    let mut waits = Vec::new();
    for _ in 0..7 {
        s.handle_event(Event::OpenFailed(refused(Refused::Other)), t0);
        let at = s.timers(t0).reconnect.expect("a reconnect is set");
        assert_eq!(s.link(), Link::Waiting(at));
        waits.push(at - t0);
        assert_eq!(
            step(&mut s, timer(Timer::Reconnect), at),
            ["connect 0 held="]
        );
        assert_eq!(s.timers(t0).reconnect, None);
    }
    // The default heartbeat (10 s) caps at core's 5 s.
    let base = [100, 200, 400, 800, 1600, 3200, 5000];
    for (w, b) in waits.iter().zip(base) {
        let ms = w.as_millis() as u64;
        assert!(
            ms >= b * 8 / 10 && ms <= b * 12 / 10,
            "wait {ms} ms for base {b} ms"
        );
    }
    for ev in [Event::Opened, welcome(&[]), Event::StreamEnded(None)] {
        s.handle_event(ev, t0);
    }
    let again = s.timers(t0).reconnect.unwrap() - t0;
    assert!(again <= Duration::from_millis(120), "{again:?}");
    // The welcome's heartbeat of 2 s now caps the waits.
    for _ in 0..6 {
        s.handle_event(timer(Timer::Reconnect), t0);
        s.handle_event(Event::OpenFailed(refused(Refused::Other)), t0);
    }
    let capped = s.timers(t0).reconnect.unwrap() - t0;
    assert!(capped <= Duration::from_millis(2_400), "{capped:?}");
}

#[test]
fn the_heartbeat_runs_while_welcomed_at_the_welcome_s_period() {
    let t0 = Instant::now();
    let mut s = state(2, 1);
    for ev in [Event::Started, Event::Opened] {
        s.handle_event(ev, t0);
    }
    assert_eq!(s.timers(t0).heartbeat, None);
    s.handle_event(welcome(&[]), t0);
    let period = Duration::from_millis(2_000);
    assert_eq!(s.timers(t0).heartbeat, Some(t0 + period));
    let late = t0 + period + Duration::from_millis(300);
    assert_eq!(
        step(&mut s, timer(Timer::Heartbeat), late),
        ["heartbeat free=2 held="]
    );
    assert_eq!(s.timers(late).heartbeat, Some(late + period));
    s.handle_event(Event::StreamEnded(None), late);
    assert_eq!(s.timers(late).heartbeat, None);
    assert!(!s.status().connected);
}

#[test]
fn a_drain_sets_the_grace_then_the_flush_deadline() {
    let t0 = Instant::now();
    let mut s = state(2, 1);
    for ev in open_and(vec![assign("a"), assign("b")]) {
        s.handle_event(ev, t0);
    }
    assert_eq!(s.timers(t0).grace, None);
    s.handle_event(drain(), t0);
    assert_eq!(s.timers(t0).grace, Some(t0 + GRACE));
    assert!(s.status().draining);
    // Asked again: the grace ends now.
    let t1 = t0 + Duration::from_secs(1);
    s.handle_event(drain(), t1);
    assert_eq!(s.timers(t1).grace, Some(t1));
    assert_eq!(
        step(&mut s, timer(Timer::Grace), t1),
        ["interrupt a", "interrupt b"]
    );
    assert_eq!(s.timers(t1).grace, None, "the grace runs out once");
    let t2 = t1 + Duration::from_secs(1);
    s.handle_event(done("a"), t2);
    assert_eq!(s.timers(t2).flush, None, "b still runs");
    let t3 = t2 + Duration::from_secs(1);
    s.handle_event(done("b"), t3);
    assert_eq!(s.timers(t3).flush, Some(t3 + FLUSH_TIMEOUT));
}

#[test]
fn the_status_counts_assignments_leases_lost_and_sessions() {
    let t0 = Instant::now();
    let mut s = state(2, 1);
    let events = open_and(vec![
        assign("a"),
        assign("b"),
        refusal("a", pb::RefusalCode::StaleEpoch, pb::Subject::Transitions),
        refusal("a", pb::RefusalCode::StaleEpoch, pb::Subject::Record),
        drain(),
        assign("c"),
        Event::StreamEnded(None),
        timer(Timer::Reconnect),
        Event::Opened,
        welcome(&["b"]),
    ]);
    for ev in events {
        s.handle_event(ev, t0);
    }
    let st = s.status();
    assert_eq!(
        (st.assignments, st.not_started, st.lost, st.sessions),
        (3, 1, 2, 2)
    );
    assert!(st.connected && st.draining);
    assert_eq!(st.running, 3, "lost attempts run until their runner ends");
    assert_eq!(st.held, [("c".to_string(), 3)]);
    assert!(s.holds("a") && s.holds("b") && s.holds("c"));
    s.handle_event(done("a"), t0);
    assert!(
        !s.holds("a"),
        "a lost lease is forgotten once its runner ended"
    );
}

// Times are given, never read from the clock, so the test does not depend on how fast
// the machine runs it.
#[test]
fn transitions_gather_for_the_linger_and_leave_with_the_record_unacknowledged() {
    let t = Instant::now();
    let mut s = state(2, 1);
    for ev in open_and(vec![assign("a")]) {
        s.handle_event(ev, t);
    }

    // The first transition (the attempt started) goes at once.
    assert_eq!(step(&mut s, transition("a", 1), t), ["send a: 1"]);

    // Later ones wait for the linger, then go as one batch, in order.
    let t1 = t + Duration::from_millis(5);
    assert_eq!(step(&mut s, transition("a", 2), t1), Vec::<String>::new());
    let t2 = t1 + Duration::from_millis(5);
    assert_eq!(step(&mut s, transition("a", 3), t2), Vec::<String>::new());
    assert_eq!(
        s.timers(t2).linger,
        Some(t1 + LINGER),
        "the oldest held transition sets the time"
    );
    let early = t1 + LINGER - Duration::from_millis(1);
    assert_eq!(
        step(&mut s, timer(Timer::Linger), early),
        Vec::<String>::new()
    );
    assert_eq!(
        step(&mut s, timer(Timer::Linger), t1 + LINGER),
        ["send a: 2,3"]
    );
    assert_eq!(s.timers(t1 + LINGER).linger, None);

    // The attempt ends: what is held goes at once, before the record and the finish.
    let t3 = t1 + LINGER + Duration::from_millis(1);
    assert_eq!(step(&mut s, transition("a", 4), t3), Vec::<String>::new());
    assert_eq!(
        step(&mut s, done("a"), t3),
        ["send a: 4", "record a", "finished a"]
    );

    // Sent is not stored: every transition stays owed until acknowledged.
    for ev in reconnected() {
        s.handle_event(ev, t3);
    }
    assert_eq!(
        step(&mut s, welcome(&[]), t3),
        ["send a: 1,2,3,4", "record a", "finished a"]
    );
    s.handle_event(ack("a", pb::Subject::Transitions, 3), t3);
    for ev in reconnected() {
        s.handle_event(ev, t3);
    }
    assert_eq!(
        step(&mut s, welcome(&[]), t3),
        ["send a: 4", "record a", "finished a"]
    );
}

#[test]
fn batched_reports_leave_as_one_batch() {
    let t = Instant::now();
    let mut s = state(2, 1);
    for ev in open_and(vec![assign("a")]) {
        s.handle_event(ev, t);
    }
    let mut batch = Vec::new();
    for seq in 1..=3 {
        let Event::Runners(mut one) = transition("a", seq) else {
            unreachable!()
        };
        batch.append(&mut one);
    }
    assert_eq!(step(&mut s, Event::Runners(batch), t), ["send a: 1,2,3"]);
    assert_eq!(
        s.handle_event(Event::Timer(Timer::Flush), t),
        [Effect::CloseStream, Effect::Exit(Exit::Undelivered)]
    );
}
