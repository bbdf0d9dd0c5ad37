//! The session's state machine: what the worker holds and owes, where its connection is,
//! and whether it drains, decided by one pure function, [`State::handle_event`]. It reads
//! no clock (the time is an argument), does no I/O and sends nothing: it returns
//! [`Effect`]s that the connection loop ([`super`]) runs, and says through
//! [`State::timers`] when it wants to be woken ([`Event::Timer`]). Its tests are tables of
//! (state, event) -> effects (`state_tests.rs`).

use super::event::{Effect, Event, Timer};
use super::owed::Entry;
use super::refusal::Refusal;
use super::{Exit, Status, FLUSH_TIMEOUT};
use crate::daemon::runner;
use akbench_core::identity::{after_refusal, AfterRefusal, Refused};
use akbench_core::lease_timing::{jittered, next_reconnect_delay, RECONNECT_FIRST};
use akbench_proto::v1 as pb;
use akbench_proto::v1::coordinator_message::Body as In;
use akbench_proto::v1::worker_message::Body as Out;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Heartbeat period until a `Welcome` says otherwise.
pub(super) const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);

/// What the state machine needs of the configuration.
#[derive(Debug, Clone)]
pub(in crate::daemon) struct Settings {
    pub worker_id: String,
    /// How long running attempts may finish once draining starts.
    pub grace: Duration,
    /// How many leases the worker takes (its slots and its prefetch).
    pub leases: u32,
    /// The coordinators, in the order tried (for the logs and the rotation).
    pub coordinators: Vec<url::Url>,
}

/// Where the connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::daemon) enum Link {
    /// Not asked to connect yet.
    Idle,
    /// A session is being opened.
    Opening,
    /// The stream is open; no `Welcome` yet.
    Open,
    /// Welcomed: messages flow.
    Welcomed,
    /// Waiting until this time to open a session again (the reconnect backoff).
    Waiting(Instant),
    /// Given up after lasting refusals: the daemon exits once no attempt runs.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Drain {
    grace_end: Instant,
    /// The grace ran out and running attempts were interrupted.
    cancelled: bool,
}

/// When the state machine wants to be woken, per [`Timer`] (`None`: not set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::daemon) struct Timers {
    pub linger: Option<Instant>,
    pub heartbeat: Option<Instant>,
    pub reconnect: Option<Instant>,
    pub grace: Option<Instant>,
    pub flush: Option<Instant>,
}

/// Everything the session decides on.
#[derive(Debug, Clone)]
pub(in crate::daemon) struct State {
    settings: Settings,
    /// The coordinator sessions open with now (an index into `settings.coordinators`).
    at: usize,
    link: Link,
    /// Held attempts by id (ordered, so that what is sent is in a stable order).
    attempts: BTreeMap<String, Entry>,
    backoff: Duration,
    heartbeat_period: Duration,
    next_heartbeat: Option<Instant>,
    /// The jitter's generator (xorshift64), seeded by the caller.
    rng: u64,
    drain: Option<Drain>,
    flush_deadline: Option<Instant>,
    /// The counters of [`Status`] (the rest of it is derived).
    counts: Status,
    /// The last refusal and how many sessions in a row were refused for it (reset by a
    /// `Welcome`).
    refusals: (Refused, u32),
    /// Set when lasting refusals end the daemon: it exits once no attempt runs.
    fatal: Option<Exit>,
}

impl State {
    /// A worker that holds nothing and is not connected; `seed` seeds the reconnect jitter.
    pub fn new(settings: Settings, seed: u64) -> Self {
        Self {
            settings,
            at: 0,
            link: Link::Idle,
            attempts: BTreeMap::new(),
            backoff: RECONNECT_FIRST,
            heartbeat_period: DEFAULT_HEARTBEAT,
            next_heartbeat: None,
            rng: seed | 1,
            drain: None,
            flush_deadline: None,
            counts: Status::default(),
            refusals: (Refused::Other, 0),
            fatal: None,
        }
    }

    /// Decides what `event`, arriving at `now`, changes and what is to be done about it.
    pub fn handle_event(&mut self, event: Event, now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        match event {
            Event::Started | Event::Timer(Timer::Reconnect) => self.connect(&mut fx),
            Event::Drain(reason) => self.start_drain(&reason, now, &mut fx),
            Event::Runners(batch) => {
                for ev in batch {
                    self.on_runner(ev, now);
                }
                self.send_owed(Some(now), &mut fx);
            }
            Event::Opened => self.link = Link::Open,
            Event::OpenFailed(r) => self.refused(r, now, &mut fx),
            Event::Message(m) => self.on_message(m, now, &mut fx),
            Event::StreamEnded(failure) => match (failure, self.welcomed()) {
                (Some(r), false) => self.refused(r, now, &mut fx),
                (failure, _) => {
                    match failure {
                        Some(r) => tracing::warn!("session failed: {}", r.message),
                        None => tracing::warn!("session ended by the coordinator"),
                    }
                    self.disconnected(now, &mut fx);
                }
            },
            Event::Timer(Timer::Linger) => self.send_owed(Some(now), &mut fx),
            Event::Timer(Timer::Heartbeat) => {
                self.heartbeat(&mut fx);
                if self.welcomed() {
                    self.next_heartbeat = Some(now + self.heartbeat_period);
                }
            }
            Event::Timer(Timer::Grace) => self.grace_over(&mut fx),
            Event::Timer(Timer::Flush) => {
                tracing::warn!(
                    owed = self.attempts.len(),
                    "could not deliver everything owed before the deadline"
                );
                fx.push(Effect::CloseStream);
                fx.push(Effect::Exit(Exit::Undelivered));
                return fx;
            }
        }
        if let Some(exit) = self.finished(now) {
            tracing::info!(?exit, code = exit.code(), "worker exiting");
            if self.link != Link::Closed {
                self.link = Link::Closed;
                fx.push(Effect::CloseStream);
            }
            fx.push(Effect::Exit(exit));
        }
        fx
    }

    /// When the state machine wants to be woken.
    pub fn timers(&self, now: Instant) -> Timers {
        Timers {
            linger: self.next_due(now),
            heartbeat: self.next_heartbeat.filter(|_| self.welcomed()),
            reconnect: match self.link {
                Link::Waiting(at) => Some(at),
                _ => None,
            },
            grace: self.drain.filter(|d| !d.cancelled).map(|d| d.grace_end),
            flush: self.flush_deadline,
        }
    }

    /// What the daemon is doing.
    pub fn status(&self) -> Status {
        Status {
            connected: self.welcomed(),
            draining: self.drain.is_some(),
            running: self.attempts.values().filter(|e| e.running).count(),
            held: self
                .held_leases()
                .into_iter()
                .map(|l| (l.attempt_id, l.epoch))
                .collect(),
            ..self.counts.clone()
        }
    }

    /// The attempt is held (its cancel token is still needed).
    pub fn holds(&self, attempt_id: &str) -> bool {
        self.attempts.contains_key(attempt_id)
    }

    /// The coordinator sessions open with now.
    pub fn coordinator(&self) -> &url::Url {
        &self.settings.coordinators[self.at]
    }

    /// Where the connection is.
    #[cfg(test)]
    pub fn link(&self) -> Link {
        self.link
    }

    fn welcomed(&self) -> bool {
        self.link == Link::Welcomed
    }

    fn connect(&mut self, fx: &mut Vec<Effect>) {
        if self.link == Link::Closed {
            return;
        }
        self.link = Link::Opening;
        fx.push(Effect::Connect {
            at: self.at,
            held: self.held_leases(),
        });
    }

    fn send(&self, body: Out, fx: &mut Vec<Effect>) {
        if self.welcomed() {
            fx.push(Effect::Send(body));
        }
    }

    /// Sends what was not sent on this stream yet: everything, or with `due_by`, the
    /// transitions of attempts whose linger is over (records and finishes always).
    fn send_owed(&mut self, due_by: Option<Instant>, fx: &mut Vec<Effect>) {
        if !self.welcomed() {
            return;
        }
        for (id, e) in &mut self.attempts {
            fx.extend(e.unsent(id, due_by).into_iter().map(Effect::Send));
        }
    }

    /// The earliest time an attempt's held transitions are due, while welcomed.
    fn next_due(&self, now: Instant) -> Option<Instant> {
        if !self.welcomed() {
            return None;
        }
        self.attempts
            .values()
            .filter(|e| !e.lost)
            .filter_map(|e| e.due(now))
            .min()
    }

    fn heartbeat(&mut self, fx: &mut Vec<Effect>) {
        if !self.welcomed() {
            return;
        }
        let mut retried = false;
        for e in self.attempts.values_mut() {
            if e.retry {
                e.resend_all();
                retried = true;
            }
        }
        if retried {
            self.send_owed(None, fx);
        }
        self.send(
            Out::Heartbeat(pb::Heartbeat {
                free_slots: self.free_slots(),
                leases: self.held_leases(),
                draining: self.drain.is_some(),
            }),
            fx,
        );
    }

    fn held_leases(&self) -> Vec<pb::HeldLease> {
        self.attempts
            .iter()
            .filter(|(_, e)| !e.lost)
            .map(|(id, e)| pb::HeldLease {
                attempt_id: id.clone(),
                epoch: e.epoch,
            })
            .collect()
    }

    fn free_slots(&self) -> u32 {
        if self.drain.is_some() {
            return 0;
        }
        let used = u32::try_from(self.attempts.len()).unwrap_or(u32::MAX);
        self.settings.leases.saturating_sub(used)
    }

    fn on_runner(&mut self, ev: runner::Event, now: Instant) {
        match ev {
            runner::Event::Transition {
                attempt_id,
                transition,
                traceparent,
            } => {
                if let Some(e) = self.attempts.get_mut(&attempt_id) {
                    if !e.lost {
                        e.held_since.get_or_insert(now);
                        e.transitions.push(transition);
                        if !traceparent.is_empty() {
                            e.traceparent = traceparent;
                        }
                    }
                }
            }
            runner::Event::Done {
                attempt_id,
                record_json,
                digest,
                terminal,
                cause,
                traceparent,
            } => {
                let Some(e) = self.attempts.get_mut(&attempt_id) else {
                    return;
                };
                e.running = false;
                if !e.lost {
                    e.record = Some(pb::RecordUpload {
                        attempt_id: attempt_id.clone(),
                        epoch: e.epoch,
                        record_json,
                        digest,
                        traceparent: traceparent.clone(),
                    });
                    e.finished = Some(pb::AttemptFinished {
                        attempt_id: attempt_id.clone(),
                        epoch: e.epoch,
                        terminal_state: terminal as i32,
                        cause,
                        traceparent,
                    });
                }
                self.settle(&attempt_id);
            }
        }
    }

    fn settle(&mut self, attempt_id: &str) {
        if self.attempts.get(attempt_id).is_some_and(Entry::settled) {
            self.attempts.remove(attempt_id);
        }
    }

    fn lose(&mut self, attempt_id: &str, why: &str, fx: &mut Vec<Effect>) {
        if let Some(e) = self.attempts.get_mut(attempt_id) {
            if !e.lost {
                tracing::warn!(
                    attempt_id,
                    why,
                    "lease lost: cancelling the attempt and dropping what it owes"
                );
                self.counts.lost += 1;
            }
            e.lost = true;
            e.transitions.clear();
            e.record = None;
            e.finished = None;
            fx.push(Effect::Cancel(attempt_id.to_string()));
        }
        self.settle(attempt_id);
    }

    fn on_message(&mut self, m: pb::CoordinatorMessage, now: Instant, fx: &mut Vec<Effect>) {
        match m.body {
            Some(In::Welcome(w)) => self.on_welcome(w, now, fx),
            Some(In::Assignment(a)) => self.on_assignment(a, fx),
            // A cancel for an attempt not held is ignored.
            Some(In::Cancel(c)) if self.attempts.contains_key(&c.attempt_id) => {
                tracing::info!(attempt_id = %c.attempt_id, reason = %c.reason, "cancel");
                fx.push(Effect::Cancel(c.attempt_id));
            }
            Some(In::Cancel(_)) => {}
            Some(In::Drain(d)) => {
                self.start_drain(&format!("coordinator: {}", d.reason), now, fx);
            }
            Some(In::Ack(a)) => {
                if let Some(e) = self.attempts.get_mut(&a.attempt_id) {
                    e.forget(a.subject, a.seq);
                    self.settle(&a.attempt_id);
                }
            }
            Some(In::Refusal(r)) => self.on_refusal(r, fx),
            None => {}
        }
    }

    fn on_welcome(&mut self, w: pb::Welcome, now: Instant, fx: &mut Vec<Effect>) {
        let first = !self.welcomed();
        self.link = Link::Welcomed;
        self.backoff = RECONNECT_FIRST;
        self.refusals = (Refused::Other, 0);
        self.counts.sessions += 1;
        self.heartbeat_period =
            Duration::from_millis(w.heartbeat_interval_ms.max(50)).min(DEFAULT_HEARTBEAT * 6);
        if first {
            self.next_heartbeat = Some(now + self.heartbeat_period);
        }
        tracing::info!(coordinator = %self.coordinator(), worker_id = %self.settings.worker_id,
            held = self.attempts.len(), revoked = w.revoked_attempt_ids.len(), "session open");
        for id in &w.revoked_attempt_ids {
            self.lose(id, "revoked by the coordinator at reconnect", fx);
        }
        for e in self.attempts.values_mut() {
            e.resend_all();
        }
        self.send_owed(None, fx);
        if self.drain.is_some() {
            self.heartbeat(fx);
        }
    }

    fn on_refusal(&mut self, r: pb::Refusal, fx: &mut Vec<Effect>) {
        let code = pb::RefusalCode::try_from(r.code).unwrap_or(pb::RefusalCode::Unspecified);
        match code {
            pb::RefusalCode::StaleEpoch | pb::RefusalCode::UnknownAttempt => {
                let why = format!("{}: {}", code.as_str_name(), r.message);
                self.lose(&r.attempt_id, &why, fx);
            }
            pb::RefusalCode::Unavailable => {
                tracing::warn!(attempt_id = %r.attempt_id, "coordinator unavailable, sending again later: {}", r.message);
                if let Some(e) = self.attempts.get_mut(&r.attempt_id) {
                    e.retry = true;
                }
            }
            _ => {
                tracing::error!(attempt_id = %r.attempt_id, code = code.as_str_name(), seq = r.seq,
                    "message refused, dropped: {}", r.message);
                if let Some(e) = self.attempts.get_mut(&r.attempt_id) {
                    // A refused batch is dropped whole, whatever its seq.
                    e.forget(r.subject, u32::MAX);
                    self.settle(&r.attempt_id);
                }
            }
        }
    }

    fn on_assignment(&mut self, a: pb::Assignment, fx: &mut Vec<Effect>) {
        if self.attempts.contains_key(&a.attempt_id) {
            tracing::warn!(attempt_id = %a.attempt_id, "duplicate assignment ignored");
            return;
        }
        self.counts.assignments += 1;
        self.attempts
            .insert(a.attempt_id.clone(), Entry::new(a.epoch));
        if self.drain.is_some() {
            self.counts.not_started += 1;
            let cause = format!(
                "worker {} is draining and did not start the attempt",
                self.settings.worker_id
            );
            fx.push(Effect::EndUnstarted {
                assignment: a,
                cause,
            });
            return;
        }
        fx.push(Effect::Start(a));
    }

    fn start_drain(&mut self, reason: &str, now: Instant, fx: &mut Vec<Effect>) {
        match &mut self.drain {
            Some(d) => {
                tracing::info!(
                    reason,
                    "asked again to drain: cancelling running attempts now"
                );
                d.grace_end = now;
            }
            None => {
                tracing::info!(
                    reason,
                    grace_secs = self.settings.grace.as_secs_f64(),
                    running = self.attempts.values().filter(|e| e.running).count(),
                    "draining"
                );
                self.drain = Some(Drain {
                    grace_end: now + self.settings.grace,
                    cancelled: false,
                });
                fx.push(Effect::CloseSlots);
                // Advertise no free slots at once.
                self.heartbeat(fx);
            }
        }
    }

    fn grace_over(&mut self, fx: &mut Vec<Effect>) {
        if let Some(d) = &mut self.drain {
            d.cancelled = true;
        }
        for (id, e) in &self.attempts {
            if e.running {
                tracing::info!(attempt_id = %id, "grace period over: interrupting");
                fx.push(Effect::Interrupt {
                    attempt_id: id.clone(),
                    why: format!(
                        "worker {} drained and its grace of {}s ran out",
                        self.settings.worker_id,
                        self.settings.grace.as_secs_f64()
                    ),
                });
            }
        }
    }

    /// A session was refused (or failed to open): tries again after the backoff, or, when
    /// lasting refusals end the daemon ([`after_refusal`]), cancels every attempt and
    /// exits once they ended.
    fn refused(&mut self, r: Refusal, now: Instant, fx: &mut Vec<Effect>) {
        let in_a_row = if self.refusals.0 == r.why {
            self.refusals.1 + 1
        } else {
            1
        };
        self.refusals = (r.why, in_a_row);
        let exit = match after_refusal(r.why, in_a_row) {
            AfterRefusal::Retry => {
                tracing::warn!(coordinator = %self.coordinator(), worker_id = %self.settings.worker_id,
                    "failed to open a session: {}", r.message);
                if self.settings.coordinators.len() > 1 {
                    // Another replica may serve: the next listed is tried (the live
                    // attempts are re-presented to it in its Hello, as after a restart).
                    self.at = (self.at + 1) % self.settings.coordinators.len();
                    tracing::info!(coordinator = %self.coordinator(), "trying the next coordinator");
                }
                return self.disconnected(now, fx);
            }
            AfterRefusal::Exit(_) if r.why == Refused::IdHeld => Exit::IdHeld,
            AfterRefusal::Exit(_) if r.why == Refused::Certificate => Exit::CertificateRefused,
            AfterRefusal::Exit(_) => Exit::CredentialRefused,
        };
        tracing::error!(
            coordinator = %self.coordinator(),
            worker_id = %self.settings.worker_id,
            attempts = in_a_row,
            exit_code = exit.code(),
            "failed to open a session, refused {in_a_row} times in a row: {}; giving up \
             (fix the worker's credential or --worker-id and start it again)",
            r.message
        );
        self.link = Link::Closed;
        self.next_heartbeat = None;
        self.fatal = Some(exit);
        fx.push(Effect::CloseStream);
        fx.extend(self.attempts.keys().cloned().map(Effect::Cancel));
    }

    /// Forgets the stream and waits the backoff before opening another.
    fn disconnected(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        // Exponential backoff with +-20% jitter (core's reconnect schedule, which a
        // restarted coordinator's grace covers: LeaseTiming::restart_grace).
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let wait = jittered(self.backoff, (self.rng >> 11) as f64 / (1u64 << 53) as f64);
        self.backoff = next_reconnect_delay(self.backoff, self.heartbeat_period);
        tracing::info!(retry_in_ms = wait.as_millis() as u64, "reconnecting");
        self.link = Link::Waiting(now + wait);
        self.next_heartbeat = None;
        fx.push(Effect::CloseStream);
    }

    /// `Some` once draining and nothing is left, or once refused for good and nothing runs;
    /// starts the flush deadline once draining and nothing runs.
    fn finished(&mut self, now: Instant) -> Option<Exit> {
        if let Some(exit) = self.fatal {
            return self.attempts.values().all(|e| !e.running).then_some(exit);
        }
        self.drain.as_ref()?;
        if self.attempts.is_empty() {
            return Some(Exit::Drained);
        }
        if self.flush_deadline.is_none() && self.attempts.values().all(|e| !e.running) {
            self.flush_deadline = Some(now + FLUSH_TIMEOUT);
        }
        None
    }
}
