//! One worker session: hello, dispatch, reports, controls.

use std::collections::{BTreeMap, HashMap};

use akbench_proto::v1::{
    coordinator_message::Body as Out, worker_message::Body as In, Cancel, CoordinatorMessage,
    Drain, Hello, Subject, Welcome, WorkerMessage,
};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};
use uuid::Uuid;

use super::convert::{self, answer, malformed};
use super::trace;
use super::{heard, Control, Heard, Holder, WorkersService, HELLO_TIMEOUT};
use crate::scheduler::{ClaimAfter, Disposition, Report, ReportAck, SchedulerError};
use crate::worker_identity::{bind, WorkerCredential};
use std::sync::{Arc, Mutex};
use tracing::Instrument as _;

/// Most messages handled together (one transaction for their reports).
const MAX_BATCH: usize = 256;
/// Longest accepted worker id (the worker refuses a longer one at start).
const MAX_WORKER_ID: usize = akbench_core::identity::MAX_WORKER_ID_BYTES;

type Outbox = mpsc::Sender<Result<CoordinatorMessage, Status>>;

fn msg(body: Out) -> Result<CoordinatorMessage, Status> {
    Ok(CoordinatorMessage { body: Some(body) })
}

/// Runs a session until the worker goes away.
pub(super) async fn run(
    service: WorkersService,
    mut inbound: Streaming<WorkerMessage>,
    out: Outbox,
    credential: WorkerCredential,
) {
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, inbound.message()).await {
        Ok(Ok(Some(WorkerMessage {
            body: Some(In::Hello(hello)),
        }))) => hello,
        Ok(Ok(None)) | Ok(Err(_)) => return,
        Ok(Ok(Some(_))) => {
            let _ = out
                .send(Err(Status::invalid_argument(
                    "the first message must be a Hello",
                )))
                .await;
            return;
        }
        Err(_) => {
            let _ = out
                .send(Err(Status::deadline_exceeded("no Hello within 10 s")))
                .await;
            return;
        }
    };
    if let Err(why) = check_hello(&hello) {
        let _ = out.send(Err(Status::invalid_argument(why))).await;
        return;
    }
    if let Err(status) = credential.check_worker_id(&hello.worker_id) {
        tracing::warn!(worker = %hello.worker_id, "session refused: {}", status.message());
        let _ = out.send(Err(status)).await;
        return;
    }
    if let Some(binding) = &credential.binding {
        let refusal = match bind(service.scheduler.store(), &hello.worker_id, binding).await {
            Ok(true) => None,
            Ok(false) => Some(Status::permission_denied(format!(
                "failed to open a session for worker {:?}: that worker id belongs to another \
                 credential; fix: give this worker its own id (--worker-id)",
                hello.worker_id
            ))),
            Err(e) => Some(Status::unavailable(format!(
                "failed to check the worker's credential: {e}"
            ))),
        };
        if let Some(status) = refusal {
            tracing::warn!(worker = %hello.worker_id, "session refused: {}", status.message());
            let _ = out.send(Err(status)).await;
            return;
        }
    }
    // The worker id is taken before anything is registered: a refused session changes
    // nothing, and two sessions racing for one id cannot both get it.
    let (control_tx, control) = mpsc::unbounded_channel();
    let now = service.scheduler.now();
    // The Hello lists the leases the worker holds, as a heartbeat does: noted before the
    // database is asked anything, so that a reaper pass while this session opens (a
    // restarted coordinator's grace ending, a loaded database) spares them for a TTL.
    let heard = Arc::new(Mutex::new(Heard::listing(now, presented(&hello))));
    let ttl = service.config.lease_ttl;
    let serial = match service.registry.claim(
        &hello.worker_id,
        &hello.instance_id,
        control_tx,
        Arc::clone(&heard),
        now,
        ttl,
    ) {
        Ok(serial) => serial,
        Err(holder) => {
            let status = id_held(&hello.worker_id, &holder, ttl);
            tracing::warn!(worker = %hello.worker_id, instance = %hello.instance_id,
                "session refused: {}", status.message());
            let _ = out.send(Err(status)).await;
            return;
        }
    };
    let worker_id = hello.worker_id.clone();
    let mut session = match Session::open(service.clone(), hello, out, serial, control, heard).await
    {
        Ok(s) => s,
        Err(e) => {
            service.registry.remove(&worker_id, serial);
            tracing::warn!("session refused: {e}");
            return;
        }
    };
    session.serve(inbound).await;
    session
        .service
        .registry
        .remove(&session.worker_id, session.serial);
    session
        .service
        .release_after_grace(session.worker_id.clone());
    if let Err(e) = session
        .service
        .scheduler
        .disconnect_worker(&session.worker_id, session.connected_at)
        .await
    {
        tracing::warn!(worker = %session.worker_id, "failed to record the disconnect: {e}");
    }
}

/// Notes that `m` arrived at `now` (and, for a heartbeat, the leases it lists); returns
/// whether the worker was alive just before.
fn note_heard(
    heard_by: &Mutex<Heard>,
    m: &WorkerMessage,
    now: chrono::DateTime<chrono::Utc>,
    ttl: std::time::Duration,
) -> bool {
    let mut h = heard(heard_by);
    let was_alive = h.alive(now, ttl);
    h.at = now;
    if let Some(In::Heartbeat(beat)) = &m.body {
        h.leases = beat
            .leases
            .iter()
            .filter_map(|l| Some((Uuid::parse_str(&l.attempt_id).ok()?, l.epoch)))
            .collect();
        h.listed_at = Some(now);
    }
    was_alive
}

/// The leases a `Hello` presents that name an attempt (the others are revoked at open).
fn presented(hello: &Hello) -> Vec<(Uuid, i64)> {
    hello
        .held_leases
        .iter()
        .filter_map(|l| Some((Uuid::parse_str(&l.attempt_id).ok()?, l.epoch)))
        .collect()
}

fn check_hello(hello: &Hello) -> Result<(), String> {
    let id = &hello.worker_id;
    if id.is_empty() || id.len() > MAX_WORKER_ID || id.chars().any(char::is_control) {
        return Err(format!(
            "worker_id {id:?} must be 1 to {MAX_WORKER_ID} printable characters"
        ));
    }
    let instance = &hello.instance_id;
    if instance.len() > MAX_WORKER_ID || instance.chars().any(char::is_control) {
        return Err(format!(
            "instance_id {instance:?} must be at most {MAX_WORKER_ID} printable characters"
        ));
    }
    Ok(())
}

/// The refusal of a session whose worker id is held by another live session.
fn id_held(worker_id: &str, holder: &Holder, ttl: std::time::Duration) -> Status {
    let at =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Status::already_exists(format!(
        "failed to open a session for worker {worker_id:?}: that worker id is held by a live \
         session of another worker process, connected since {} (last heard {}); a worker id \
         is held by one live session at a time; fix: give each worker its own --worker-id, \
         or stop the other worker (the id is free once its session ends or is silent for \
         the lease TTL, {} s)",
        at(holder.since),
        at(holder.heard),
        ttl.as_secs_f64()
    ))
}

struct Session {
    service: WorkersService,
    worker_id: String,
    serial: u64,
    /// When this session registered the worker (its identity in `workers.connected_at`).
    connected_at: chrono::DateTime<chrono::Utc>,
    slots: usize,
    /// Attempts this worker holds, with their epochs.
    held: HashMap<Uuid, i64>,
    draining: bool,
    out: Outbox,
    control: mpsc::UnboundedReceiver<Control>,
    /// What was last heard from the worker (shared with the registry and the reaper).
    heard: Arc<Mutex<Heard>>,
    /// Its advertised labels' canonical form (`scheduler::placement_key`).
    placement: String,
}

impl Session {
    /// Registers the worker that holds registry `serial` (taken by [`Registry::claim`]
    /// with `heard` and the sender of `control`), checks its re-presented leases and
    /// answers `Welcome`.
    ///
    /// [`Registry::claim`]: super::Registry::claim
    async fn open(
        service: WorkersService,
        hello: Hello,
        out: Outbox,
        serial: u64,
        control: mpsc::UnboundedReceiver<Control>,
        heard: Arc<Mutex<Heard>>,
    ) -> Result<Self, SchedulerError> {
        let scheduler = &service.scheduler;
        let slots = hello.slots.min(service.config.max_slots);
        let labels: BTreeMap<String, String> = hello.labels.clone().into_iter().collect();
        let connected_at = scheduler
            .register_worker(&hello.worker_id, slots, &labels, &hello.version)
            .await?;
        let mut revoked = Vec::new();
        let mut presented = Vec::new();
        for lease in &hello.held_leases {
            match Uuid::parse_str(&lease.attempt_id) {
                Ok(id) => presented.push((id, lease.epoch)),
                Err(_) => revoked.push(lease.attempt_id.clone()),
            }
        }
        let lost = scheduler
            .heartbeat(&hello.worker_id, &presented, service.config.lease_ttl)
            .await?;
        revoked.extend(lost.iter().map(|(id, _)| id.to_string()));
        let held: HashMap<Uuid, i64> = presented
            .into_iter()
            .filter(|p| !lost.contains(p))
            .collect();
        // Leases it holds in the database but did not present: it lost them (a restart).
        let keep: Vec<Uuid> = held.keys().copied().collect();
        scheduler
            .release_worker(&hello.worker_id, &keep, false)
            .await?;
        let ttl = service.config.lease_ttl;
        let welcome = Welcome {
            lease_ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            heartbeat_interval_ms: u64::try_from(service.config.timing().heartbeat().as_millis())
                .unwrap_or(u64::MAX),
            revoked_attempt_ids: revoked,
        };
        let _ = out.send(msg(Out::Welcome(welcome))).await;
        Ok(Self {
            service,
            worker_id: hello.worker_id,
            serial,
            connected_at,
            slots: slots as usize,
            held,
            draining: false,
            out,
            control,
            heard,
            placement: crate::scheduler::placement_key(&labels),
        })
    }

    /// Whether the worker was heard from within the lease TTL and not found silent by the
    /// reaper since ([`super::Heard::alive`]).
    fn alive(&self) -> bool {
        heard(&self.heard).alive(self.service.scheduler.now(), self.service.config.lease_ttl)
    }

    /// Whether another worker may take the items this one lost.
    fn others_eligible(&self) -> bool {
        self.service.registry.others_eligible(
            &self.worker_id,
            self.service.scheduler.now(),
            self.service.config.lease_ttl,
        )
    }

    fn set_draining(&mut self) {
        self.draining = true;
        heard(&self.heard).draining = true;
    }

    fn free(&self) -> usize {
        self.slots.saturating_sub(self.held.len())
    }

    /// Whether this session would claim now (core::dispatch::may_claim): heard from within
    /// the TTL, not draining, a free slot.
    fn can_claim(&self) -> bool {
        akbench_core::dispatch::may_claim(&akbench_core::dispatch::WorkerView {
            alive: self.alive(),
            draining: self.draining,
            free_slots: u32::try_from(self.free()).unwrap_or(u32::MAX),
        })
    }

    async fn send(&self, m: CoordinatorMessage) -> bool {
        self.out.send(Ok(m)).await.is_ok()
    }

    async fn serve(&mut self, mut inbound: Streaming<WorkerMessage>) {
        // A reader task, so that messages already received can be taken in batches, and so
        // that the worker is heard while this loop waits on the database: it notes when
        // each message arrived and the leases each heartbeat lists (the reaper judges
        // silence by that, never by what the database could store), and whether the worker
        // was alive just before.
        let (in_tx, mut in_rx) = mpsc::channel::<(WorkerMessage, bool)>(MAX_BATCH);
        let reader = {
            let (heard_by, scheduler) = (Arc::clone(&self.heard), self.service.scheduler.clone());
            let ttl = self.service.config.lease_ttl;
            tokio::spawn(async move {
                while let Ok(Some(m)) = inbound.message().await {
                    let was_alive = note_heard(&heard_by, &m, scheduler.now(), ttl);
                    let is_heartbeat = matches!(m.body, Some(In::Heartbeat(_)));
                    match in_tx.try_send((m, was_alive)) {
                        Ok(()) => {}
                        // A heartbeat that finds the queue full is noted above and dropped:
                        // the next one extends the leases in the database, and the reader
                        // stays free to hear the worker.
                        Err(mpsc::error::TrySendError::Full(_)) if is_heartbeat => {}
                        Err(mpsc::error::TrySendError::Full(m)) => {
                            if in_tx.send(m).await.is_err() {
                                break;
                            }
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => break,
                    }
                }
            })
        };
        let work = std::sync::Arc::clone(self.service.scheduler.work_available());
        let mut poll = tokio::time::interval(self.service.config.poll_interval);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut want_claim = true;
        loop {
            // Registered before the claim, so that work enqueued meanwhile is not missed; kept
            // only while this session can take work: a wake-up it cannot use is handed to
            // another waiting session when the registration is dropped (tokio `Notify`).
            let mut notified = Some(Box::pin(work.notified()));
            if let Some(n) = notified.as_mut() {
                n.as_mut().enable();
            }
            if want_claim && self.can_claim() {
                want_claim = false;
                if !self.dispatch().await {
                    break;
                }
            }
            if !self.can_claim() {
                notified = None;
            }
            tokio::select! {
                biased;
                c = self.control.recv() => match c {
                    Some(c) => if !self.on_control(c).await { break },
                    None => break,
                },
                m = in_rx.recv() => {
                    let Some((m, was_alive)) = m else { break };
                    want_claim |= !was_alive;
                    let mut batch = vec![m];
                    while batch.len() < MAX_BATCH {
                        match in_rx.try_recv() {
                            Ok((m, was_alive)) => {
                                want_claim |= !was_alive;
                                batch.push(m);
                            }
                            Err(_) => break,
                        }
                    }
                    match self.on_messages(batch).await {
                        Some(freed) => want_claim |= freed,
                        None => break,
                    }
                }
                Some(()) = async {
                    match notified.as_mut() {
                        Some(n) => {
                            n.as_mut().await;
                            Some(())
                        }
                        None => None,
                    }
                } => want_claim = true,
                _ = poll.tick() => want_claim = true,
            }
        }
        reader.abort();
    }

    /// Claims up to the free slots and sends the assignments; false when the worker is gone.
    /// Whether a claim may ride on a batch of reports: alive (it just spoke) and not draining.
    fn can_claim_after_reports(&self) -> bool {
        !self.draining
    }

    async fn dispatch(&mut self) -> bool {
        let scheduler = &self.service.scheduler;
        let wanted = self.free();
        let started = std::time::Instant::now();
        let db = trace::poll("claim");
        let claimed = scheduler
            .claim_for(
                &self.worker_id,
                wanted,
                self.service.config.lease_ttl,
                self.others_eligible(),
            )
            .instrument(db.clone())
            .await;
        self.service.metrics.db_time("claim", started.elapsed());
        if let Ok(a) = &claimed {
            db.record("db.response.returned_rows", a.len() as i64);
        }
        drop(db);
        match claimed {
            Ok(assignments) => {
                if assignments.len() == wanted {
                    // There may be more: pass the wake-up on to another idle session.
                    scheduler.wake_claimer();
                }
                let took = started.elapsed();
                for a in &assignments {
                    self.held.insert(a.attempt_id, a.epoch);
                    let (span, tp) = trace::assign(a, &self.worker_id);
                    trace::claimed(&span, assignments.len(), took);
                    if !self.send(convert::assignment(a, tp)).await {
                        return false;
                    }
                    self.service.metrics.assigned(started.elapsed());
                }
                true
            }
            Err(e) => {
                tracing::warn!(worker = %self.worker_id, "claim failed: {e}");
                true
            }
        }
    }

    async fn on_control(&mut self, control: Control) -> bool {
        match control {
            Control::Cancel {
                attempt_id,
                reason,
                forget,
            } => {
                if forget {
                    self.held.remove(&attempt_id);
                }
                self.send(CoordinatorMessage {
                    body: Some(Out::Cancel(Cancel {
                        attempt_id: attempt_id.to_string(),
                        reason,
                    })),
                })
                .await
            }
            Control::Drain(reason) => {
                self.set_draining();
                self.send(CoordinatorMessage {
                    body: Some(Out::Drain(Drain { reason })),
                })
                .await
            }
        }
    }

    /// Handles messages received together; `Some(true)` when a slot freed, `None` when
    /// the worker is gone.
    async fn on_messages(&mut self, batch: Vec<WorkerMessage>) -> Option<bool> {
        let mut answers: Vec<Option<CoordinatorMessage>> = vec![None; batch.len()];
        let mut reports: Vec<Report> = Vec::new();
        let mut report_of: Vec<(usize, String, Subject)> = Vec::new();
        // Spans only while exporting: nothing is collected for them otherwise.
        let tracing_on = akbench_telemetry::enabled();
        let mut traceparents: Vec<&str> = Vec::new();
        let mut freed = false;
        for (i, m) in batch.iter().enumerate() {
            let (parsed, id, subject, tp) = match &m.body {
                Some(In::Transitions(b)) => (
                    convert::transitions_report(b),
                    &b.attempt_id,
                    Subject::Transitions,
                    b.traceparent.as_str(),
                ),
                Some(In::Finished(f)) => (
                    convert::finished_report(f).map_err(|e| (0, e)),
                    &f.attempt_id,
                    Subject::Finished,
                    f.traceparent.as_str(),
                ),
                Some(In::Record(r)) => (
                    convert::record_report(r).map_err(|e| (0, e)),
                    &r.attempt_id,
                    Subject::Record,
                    r.traceparent.as_str(),
                ),
                Some(In::Heartbeat(h)) => {
                    if h.draining && !self.draining {
                        tracing::info!(worker = %self.worker_id, "worker draining: no new work for it");
                        self.set_draining();
                    }
                    let lost = self.heartbeat(h).await?;
                    freed |= lost;
                    continue;
                }
                Some(In::Hello(_)) => {
                    answers[i] = Some(malformed(
                        "",
                        Subject::Unspecified,
                        0,
                        "a Hello was already received on this session".into(),
                    ));
                    continue;
                }
                None => {
                    answers[i] = Some(malformed(
                        "",
                        Subject::Unspecified,
                        0,
                        "the message has no body".into(),
                    ));
                    continue;
                }
            };
            match parsed {
                Ok(r) => {
                    reports.push(r);
                    report_of.push((i, id.clone(), subject));
                    if tracing_on {
                        traceparents.push(tp);
                    }
                }
                Err((seq, why)) => answers[i] = Some(malformed(id, subject, seq, why)),
            }
        }
        if !reports.is_empty() {
            let others_eligible = self.others_eligible();
            let claim = self.can_claim_after_reports().then(|| ClaimAfter {
                others_eligible,
                worker_id: self.worker_id.clone(),
                free: self.free(),
                slots: self.slots,
                held: self.held.keys().copied().collect(),
                ttl_ms: i64::try_from(self.service.config.lease_ttl.as_millis())
                    .unwrap_or(i64::MAX),
                placement: self.placement.clone(),
            });
            let spans: Vec<tracing::Span> = reports
                .iter()
                .zip(&traceparents)
                .map(|(r, tp)| trace::report(r, tp, &self.worker_id))
                .collect();
            let db = trace::db("report", spans.first());
            db.record("db.response.returned_rows", reports.len() as i64);
            let started = std::time::Instant::now();
            let (outcomes, assigned) = self
                .service
                .scheduler
                .report_and_claim(&reports, claim)
                .instrument(db.clone())
                .await;
            self.service.metrics.db_time("report", started.elapsed());
            drop(db);
            for (span, outcome) in spans.iter().zip(&outcomes) {
                trace::outcome(
                    span,
                    if outcome.is_ok() {
                        "accepted"
                    } else {
                        "refused"
                    },
                );
            }
            drop(spans);
            for ((report, outcome), (i, id, subject)) in
                reports.iter().zip(&outcomes).zip(&report_of)
            {
                if let (
                    Report::Finished {
                        terminal, cause, ..
                    },
                    Ok(ReportAck::Finished(Some(disposition))),
                ) = (report, outcome)
                {
                    self.service
                        .metrics
                        .attempt_finished(terminal.as_str(), cause);
                    if *disposition == Disposition::Requeued {
                        self.service.metrics.retried();
                    }
                }
                // The scheduler's one rule of which outcome frees a slot.
                let done = crate::scheduler::frees(outcome);
                if done && self.held.remove(&report.attempt_id()).is_some() {
                    freed = true;
                }
                answers[*i] = Some(answer(id, *subject, outcome));
            }
            if !self.draining {
                // The claim already used the freed slots.
                freed = false;
            }
            for a in &assigned {
                self.held.insert(a.attempt_id, a.epoch);
                let (_span, tp) = trace::assign(a, &self.worker_id);
                answers.push(Some(convert::assignment(a, tp)));
                self.service.metrics.assigned(started.elapsed());
            }
        }
        for a in answers.into_iter().flatten() {
            if !self.send(a).await {
                return None;
            }
        }
        Some(freed)
    }

    /// Extends the listed leases; cancels and forgets the lost ones. `Some(true)` when a
    /// slot freed.
    async fn heartbeat(&mut self, h: &akbench_proto::v1::Heartbeat) -> Option<bool> {
        let mut leases = Vec::new();
        let mut lost: Vec<(String, String)> = Vec::new();
        for l in &h.leases {
            match Uuid::parse_str(&l.attempt_id) {
                Ok(id) => leases.push((id, l.epoch)),
                Err(_) => lost.push((
                    l.attempt_id.clone(),
                    "not a lease of this coordinator".into(),
                )),
            }
        }
        let ttl = self.service.config.lease_ttl;
        let started = std::time::Instant::now();
        let extended = self
            .service
            .scheduler
            .heartbeat(&self.worker_id, &leases, ttl)
            .instrument(trace::poll("heartbeat"))
            .await;
        self.service.metrics.db_time("heartbeat", started.elapsed());
        match extended {
            Ok(invalid) => {
                for (id, _) in invalid {
                    lost.push((id.to_string(), "lease lost".into()));
                }
            }
            // The database is down: the reaper spares these leases as long as this worker
            // keeps being heard listing them (the reader noted this heartbeat).
            Err(e) => tracing::warn!(worker = %self.worker_id, "heartbeat failed: {e}"),
        }
        let mut freed = false;
        for (id, reason) in lost {
            if let Ok(uuid) = Uuid::parse_str(&id) {
                freed |= self.held.remove(&uuid).is_some();
            }
            let cancel = CoordinatorMessage {
                body: Some(Out::Cancel(Cancel {
                    attempt_id: id,
                    reason,
                })),
            };
            if !self.send(cancel).await {
                return None;
            }
        }
        Some(freed)
    }
}
