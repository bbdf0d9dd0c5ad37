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
use super::{heard, Control, Heard, WorkersService, HELLO_TIMEOUT};
use crate::scheduler::{ClaimAfter, Report, ReportAck, SchedulerError};
use std::sync::{Arc, Mutex};

/// Most messages handled together (one transaction for their reports).
const MAX_BATCH: usize = 256;
/// Longest accepted worker id.
const MAX_WORKER_ID: usize = 200;

type Outbox = mpsc::Sender<Result<CoordinatorMessage, Status>>;

fn msg(body: Out) -> Result<CoordinatorMessage, Status> {
    Ok(CoordinatorMessage { body: Some(body) })
}

/// Runs a session until the worker goes away.
pub(super) async fn run(
    service: WorkersService,
    mut inbound: Streaming<WorkerMessage>,
    out: Outbox,
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
    let mut session = match Session::open(service, hello, out).await {
        Ok(s) => s,
        Err(e) => {
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

fn check_hello(hello: &Hello) -> Result<(), String> {
    let id = &hello.worker_id;
    if id.is_empty() || id.len() > MAX_WORKER_ID || id.chars().any(char::is_control) {
        return Err(format!(
            "worker_id {id:?} must be 1 to {MAX_WORKER_ID} printable characters"
        ));
    }
    Ok(())
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
}

impl Session {
    async fn open(
        service: WorkersService,
        hello: Hello,
        out: Outbox,
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
        let (control_tx, control) = mpsc::unbounded_channel();
        let heard = Arc::new(Mutex::new(Heard::new(scheduler.now())));
        let serial = service
            .registry
            .insert(&hello.worker_id, control_tx, Arc::clone(&heard));
        let ttl = service.config.lease_ttl;
        let welcome = Welcome {
            lease_ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            heartbeat_interval_ms: u64::try_from((ttl / 3).as_millis()).unwrap_or(u64::MAX),
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
        })
    }

    /// Whether the worker was heard from within the lease TTL.
    fn alive(&self) -> bool {
        akbench_core::dispatch::alive(
            heard(&self.heard).at,
            self.service.scheduler.now(),
            self.service.config.lease_ttl,
        )
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
        // A reader task, so that messages already received can be taken in batches.
        let (in_tx, mut in_rx) = mpsc::channel::<WorkerMessage>(MAX_BATCH);
        let reader = tokio::spawn(async move {
            while let Ok(Some(m)) = inbound.message().await {
                if in_tx.send(m).await.is_err() {
                    break;
                }
            }
        });
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
                    let Some(m) = m else { break };
                    let was_alive = self.alive();
                    heard(&self.heard).at = self.service.scheduler.now();
                    want_claim |= !was_alive;
                    let mut batch = vec![m];
                    while batch.len() < MAX_BATCH {
                        match in_rx.try_recv() {
                            Ok(m) => batch.push(m),
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
        let claimed = scheduler
            .claim_for(
                &self.worker_id,
                wanted,
                self.service.config.lease_ttl,
                self.others_eligible(),
            )
            .await;
        match claimed {
            Ok(assignments) => {
                if assignments.len() == wanted {
                    // There may be more: pass the wake-up on to another idle session.
                    scheduler.wake_claimer();
                }
                for a in &assignments {
                    self.held.insert(a.attempt_id, a.epoch);
                    if !self.send(convert::assignment(a)).await {
                        return false;
                    }
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
        let mut freed = false;
        for (i, m) in batch.iter().enumerate() {
            let (parsed, id, subject) = match &m.body {
                Some(In::Transitions(b)) => (
                    convert::transitions_report(b),
                    &b.attempt_id,
                    Subject::Transitions,
                ),
                Some(In::Finished(f)) => (
                    convert::finished_report(f).map_err(|e| (0, e)),
                    &f.attempt_id,
                    Subject::Finished,
                ),
                Some(In::Record(r)) => (
                    convert::record_report(r).map_err(|e| (0, e)),
                    &r.attempt_id,
                    Subject::Record,
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
            });
            let (outcomes, assigned) = self
                .service
                .scheduler
                .report_and_claim(&reports, claim)
                .await;
            for ((report, outcome), (i, id, subject)) in
                reports.iter().zip(&outcomes).zip(&report_of)
            {
                let done = matches!(outcome, Ok(ReportAck::Finished(_)))
                    || matches!(outcome, Err(SchedulerError::StaleEpoch { .. }));
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
                answers.push(Some(convert::assignment(a)));
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
        {
            let mut h = heard(&self.heard);
            h.leases.clone_from(&leases);
            h.stored = false;
        }
        match self
            .service
            .scheduler
            .heartbeat(&self.worker_id, &leases, ttl)
            .await
        {
            Ok(invalid) => {
                heard(&self.heard).stored = true;
                for (id, _) in invalid {
                    lost.push((id.to_string(), "lease lost".into()));
                }
            }
            // The database is down: the reaper extends these leases once it is back, as
            // long as this worker keeps being heard.
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
