//! The `Workers` gRPC service: one long-lived `Session` stream per worker.
//!
//! Protocol as implemented:
//! 1. The worker sends `Hello` first (within [`HELLO_TIMEOUT`]); anything else, or a bad
//!    `Hello` (empty or over-long worker id), ends the stream with `INVALID_ARGUMENT`. The
//!    coordinator registers the worker (upsert of `workers`), checks the re-presented held
//!    leases (valid ones are kept and extended, the others are listed in
//!    `Welcome.revoked_attempt_ids`) and answers `Welcome` (lease TTL, heartbeat interval:
//!    [`LeaseTiming::heartbeat`], `--heartbeat-interval-ms`, by default TTL / 3).
//! 2. While the worker has free slots (its `Hello.slots` minus the attempts it holds) and is
//!    not draining, the coordinator claims up to that many items and sends one `Assignment`
//!    each. It tries again when work is enqueued or re-queued in this process (a `Notify`),
//!    when a slot frees, and every poll interval (work enqueued by other replicas).
//! 3. `Heartbeat` extends the listed leases; each one no longer valid gets a `Cancel`
//!    ("lease lost") and is forgotten. `TransitionBatch`, `AttemptFinished` and
//!    `RecordUpload` are answered with `Ack` or `Refusal{code, message}` each; messages that
//!    arrive together are stored in one transaction where their order allows.
//!    Refusal codes: `STALE_EPOCH`, `UNKNOWN_ATTEMPT`, `INVALID_TRANSITION`,
//!    `RECORD_CONFLICT`, `DIGEST_MISMATCH`, `MALFORMED` (bad UUID, unknown state, seq gap,
//!    record not JSON or not an attempt record, a second `Hello`, an empty message) and
//!    `UNAVAILABLE` (the database failed; send again). A refused message changes nothing.
//! 4. [`WorkersService::cancel_run`] sends `Cancel` for the run's live attempts whose workers
//!    are connected here; every replica's reaper pass sends it to its own workers for the
//!    live attempts of any cancelling run ([`WorkersService::tell_cancels`]), so a cancel
//!    taken by one replica reaches the workers of the others within one reap interval;
//!    [`WorkersService::drain_all`] sends `Drain` (no more assignments). The reaper
//!    ([`WorkersService::spawn_reaper`], every [`LeaseTiming::reap_interval`]) takes back expired leases and sends
//!    `Cancel` ("lease expired") to their worker when it is still connected.
//! 5. When the stream ends the session is forgotten; unless the worker opens a new session
//!    within [`LeaseTiming::session_grace`], its leases are released and reaped at once. A worker that
//!    opens a session without leases the coordinator has for it gets those released at once.
//! 6. A worker is alive while it is heard from (any message) within the lease TTL, in this
//!    process's memory: a silent one (frozen, or its network gone) gets no new work, is not
//!    counted as connected, and the items it lost go to other workers while any is alive.
//!
//! Identity, checked in this order before anything is registered: a client certificate's
//! name must equal the worker id (`PERMISSION_DENIED`, see [`crate::worker_identity`]); when
//! the session opened with a credential (a client certificate or a worker token), the worker
//! id must belong to it: the first session of an id binds it, a later one with another
//! credential ends with `PERMISSION_DENIED`; and a worker id is held by one live session
//! ([`akbench_core::identity::may_open_session`], [`Registry::claim`]): a session for an id
//! whose session is alive ends with `ALREADY_EXISTS` naming the holder's connection time,
//! unless it carries the holder's `Hello.instance_id` (the same worker process reconnecting:
//! it takes over its own session, which ends); a holder silent past the TTL is taken over.

mod convert;
mod session;
mod trace;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use akbench_proto::v1::{CoordinatorMessage, WorkerMessage};
use akbench_proto::workers_server::{Workers, WorkersServer};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use uuid::Uuid;

use crate::metrics::Metrics;
use crate::scheduler::{CancelReport, Disposition, HeardLease, Scheduler, SchedulerError};
use crate::worker_identity::WorkerCredential;
use akbench_core::lease_timing::{LeaseTiming, LeaseTimingError, DEFAULT_LEASE_TTL_MS};

pub use convert::wire_state;

/// How long a new stream may take to send its `Hello`.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Timings and limits of the service.
#[derive(Debug, Clone)]
pub struct WorkersConfig {
    /// How long a lease lives without a heartbeat.
    pub lease_ttl: Duration,
    /// How often an idle session with free slots polls for work enqueued elsewhere.
    pub poll_interval: Duration,
    /// The most slots one worker may claim (larger `Hello.slots` are capped).
    pub max_slots: u32,
    /// The heartbeat interval asked of workers (`None`: a third of the TTL); see
    /// [`WorkersConfig::timing`].
    pub heartbeat_interval: Option<Duration>,
}

impl WorkersConfig {
    /// The lease timing (core's one type): TTL, heartbeat interval, reap interval, session
    /// grace; an error for a combination that cannot work (the server refuses it at start).
    pub fn try_timing(&self) -> Result<LeaseTiming, LeaseTimingError> {
        LeaseTiming::new(self.lease_ttl, self.heartbeat_interval)
    }

    /// [`WorkersConfig::try_timing`]; a combination that cannot work (only possible when
    /// built by hand, the server checks it at start) falls back to the TTL's defaults.
    pub fn timing(&self) -> LeaseTiming {
        self.try_timing()
            .or_else(|_| LeaseTiming::new(self.lease_ttl, None))
            .unwrap_or_else(|_| {
                LeaseTiming::new(Duration::from_millis(DEFAULT_LEASE_TTL_MS), None)
                    .expect("the default lease timing is valid")
            })
    }
}

impl Default for WorkersConfig {
    fn default() -> Self {
        Self {
            lease_ttl: Duration::from_millis(DEFAULT_LEASE_TTL_MS),
            poll_interval: Duration::from_millis(250),
            max_slots: 256,
            heartbeat_interval: None,
        }
    }
}

/// What the service asks a live session to do.
#[derive(Debug)]
pub(crate) enum Control {
    /// Send `Cancel`; `forget`: the lease is gone, free the slot now.
    Cancel {
        attempt_id: Uuid,
        reason: String,
        forget: bool,
    },
    /// Send `Drain` and assign nothing more.
    Drain(String),
}

#[derive(Debug)]
struct Entry {
    serial: u64,
    control: mpsc::UnboundedSender<Control>,
    heard: Arc<Mutex<Heard>>,
    /// The worker process's `Hello.instance_id` (empty: unknown).
    instance: String,
    /// When this session took the worker id (scheduler clock).
    since: chrono::DateTime<chrono::Utc>,
}

/// The live session that holds a worker id, named when another session is refused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    /// When it took the id.
    pub(crate) since: chrono::DateTime<chrono::Utc>,
    /// When it was last heard from.
    pub(crate) heard: chrono::DateTime<chrono::Utc>,
}

/// What this coordinator last heard from a worker, in memory: it judges silence by this,
/// not by the database (which may be down while the worker keeps heartbeating).
#[derive(Debug, Clone)]
pub(crate) struct Heard {
    /// When the last message arrived (scheduler clock).
    pub(crate) at: chrono::DateTime<chrono::Utc>,
    /// The leases its last heartbeat (or its `Hello`) listed, and when. Recorded by
    /// the session's reader as each message arrives, before and whatever the database does
    /// with it: the reaper spares these leases for a TTL after that
    /// ([`akbench_core::dispatch::reap`]).
    pub(crate) leases: Vec<(Uuid, i64)>,
    /// When the heartbeat that listed [`Heard::leases`] arrived.
    pub(crate) listed_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Asked to drain or said it drains.
    pub(crate) draining: bool,
    /// When the reaper last took back a lease of this worker because it went silent.
    pub(crate) silenced: Option<chrono::DateTime<chrono::Utc>>,
}

impl Heard {
    pub(crate) fn new(at: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            at,
            leases: Vec::new(),
            listed_at: None,
            draining: false,
            silenced: None,
        }
    }

    /// Heard at `at`, listing `leases` then (a `Hello` presents the leases it holds).
    pub(crate) fn listing(at: chrono::DateTime<chrono::Utc>, leases: Vec<(Uuid, i64)>) -> Self {
        Self {
            leases,
            listed_at: Some(at),
            ..Self::new(at)
        }
    }

    /// Whether the worker is alive at `now` (`core::dispatch::alive_unless_silenced`):
    /// heard from within `ttl`, and not found silent by the reaper since.
    pub(crate) fn alive(&self, now: chrono::DateTime<chrono::Utc>, ttl: Duration) -> bool {
        akbench_core::dispatch::alive_unless_silenced(self.at, self.silenced, now, ttl)
    }
}

/// Locks a [`Heard`], ignoring poisoning (its fields are always consistent).
pub(crate) fn heard(h: &Mutex<Heard>) -> std::sync::MutexGuard<'_, Heard> {
    h.lock().unwrap_or_else(|p| p.into_inner())
}

/// Live sessions by worker id.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<String, Entry>>,
    next: AtomicU64,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `worker_id` for a new session of worker process `instance` when
    /// [`akbench_core::identity::may_open_session`] allows it (the id is free, its holder
    /// is silent past `ttl`, or it is this process's own older session, which then ends:
    /// its control channel closes); returns the session's serial, or the live holder that
    /// keeps the id. Checked and taken under one lock, so two sessions racing for an id
    /// cannot both get it.
    pub(crate) fn claim(
        &self,
        worker_id: &str,
        instance: &str,
        control: mpsc::UnboundedSender<Control>,
        heard: Arc<Mutex<Heard>>,
        now: chrono::DateTime<chrono::Utc>,
        ttl: Duration,
    ) -> Result<u64, Holder> {
        use akbench_core::identity::{may_open_session, SessionClaim};
        let mut sessions = self.lock();
        let holder = sessions.get(worker_id).map(|e| {
            let h = self::heard(&e.heard);
            (
                h.alive(now, ttl),
                e.instance.clone(),
                Holder {
                    since: e.since,
                    heard: h.at,
                },
            )
        });
        let claim = may_open_session(
            holder
                .as_ref()
                .map(|(alive, instance, _)| akbench_core::identity::Holder {
                    alive: *alive,
                    instance,
                }),
            instance,
        );
        if let (SessionClaim::Refuse, Some((_, _, holder))) = (claim, holder) {
            return Err(holder);
        }
        let serial = self.next.fetch_add(1, Ordering::Relaxed);
        sessions.insert(
            worker_id.to_string(),
            Entry {
                serial,
                control,
                heard,
                instance: instance.to_string(),
                since: now,
            },
        );
        Ok(serial)
    }

    /// Whether a session of `worker_id` is registered.
    pub(crate) fn has(&self, worker_id: &str) -> bool {
        self.lock().contains_key(worker_id)
    }

    /// The workers heard from within `ttl` of `now`, with what was heard.
    pub(crate) fn alive(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        ttl: Duration,
    ) -> Vec<(String, Arc<Mutex<Heard>>)> {
        self.lock()
            .iter()
            .filter(|(_, e)| heard(&e.heard).alive(now, ttl))
            .map(|(id, e)| (id.clone(), Arc::clone(&e.heard)))
            .collect()
    }

    /// Whether a worker other than `me` is alive and not draining (it may take the items
    /// `me` lost).
    pub(crate) fn others_eligible(
        &self,
        me: &str,
        now: chrono::DateTime<chrono::Utc>,
        ttl: Duration,
    ) -> bool {
        self.lock().iter().any(|(id, e)| {
            let h = heard(&e.heard);
            id != me && !h.draining && h.alive(now, ttl)
        })
    }

    /// The leases each worker with a session here listed in its last heartbeat, by attempt.
    pub(crate) fn heard_leases(&self) -> HashMap<Uuid, HeardLease> {
        let mut leases = HashMap::new();
        for (worker_id, e) in self.lock().iter() {
            let h = heard(&e.heard);
            let Some(at) = h.listed_at else { continue };
            for (attempt_id, epoch) in &h.leases {
                leases.insert(
                    *attempt_id,
                    HeardLease {
                        worker_id: worker_id.clone(),
                        epoch: *epoch,
                        at,
                    },
                );
            }
        }
        leases
    }

    /// Forgets a session, unless a newer one of the same worker replaced it.
    pub(crate) fn remove(&self, worker_id: &str, serial: u64) {
        let mut sessions = self.lock();
        if sessions.get(worker_id).is_some_and(|e| e.serial == serial) {
            sessions.remove(worker_id);
        }
    }

    /// Notes that the reaper took back a lease of `worker_id` for silence at `at`: its
    /// session claims nothing until the worker is heard from again.
    fn silenced(&self, worker_id: &str, at: chrono::DateTime<chrono::Utc>) {
        if let Some(e) = self.lock().get(worker_id) {
            heard(&e.heard).silenced = Some(at);
        }
    }

    fn send(&self, worker_id: &str, control: Control) -> bool {
        self.lock()
            .get(worker_id)
            .is_some_and(|e| e.control.send(control).is_ok())
    }

    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// The `Workers` service.
#[derive(Debug, Clone)]
pub struct WorkersService {
    scheduler: Scheduler,
    config: Arc<WorkersConfig>,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    /// Attempts of cancelling runs whose workers this replica has sent `Cancel` (by the
    /// reaper's pass, [`WorkersService::tell_cancels`]), so each is told once.
    cancels_told: Arc<Mutex<HashSet<Uuid>>>,
}

impl WorkersService {
    /// A service over `scheduler`.
    pub fn new(scheduler: Scheduler, config: WorkersConfig) -> Self {
        let registry = Arc::new(Registry::default());
        // A budget stop or a route pause took back leases whose attempts had not started
        // (prefetched): their workers must not start them.
        let to = Arc::clone(&registry);
        // The reaper spares leases their workers were heard holding, whatever the database
        // could store meanwhile.
        let heard_in = Arc::clone(&registry);
        let ttl = config.lease_ttl;
        scheduler.on_heard(move || crate::scheduler::Heard {
            leases: heard_in.heard_leases(),
            ttl,
        });
        scheduler.on_revoked(move |revoked| {
            for r in revoked {
                to.send(
                    &r.worker_id,
                    Control::Cancel {
                        attempt_id: r.attempt_id,
                        reason: r.reason.clone(),
                        forget: true,
                    },
                );
            }
        });
        Self {
            scheduler,
            config: Arc::new(config),
            registry,
            metrics: Arc::new(Metrics::default()),
            cancels_told: Arc::default(),
        }
    }

    /// The same service counting into `metrics` (the ones `/metrics` renders).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The tonic server to add to a `tonic::transport::Server`.
    pub fn into_server(self) -> WorkersServer<Self> {
        // Explicit on both ends (the worker sets the same limits, and cuts a record to fit).
        WorkersServer::new(self)
            .max_decoding_message_size(akbench_proto::MAX_WORKER_MESSAGE_BYTES)
            .max_encoding_message_size(akbench_proto::MAX_COORDINATOR_MESSAGE_BYTES)
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Workers with a session on this replica that were heard from within the lease TTL
    /// (a frozen worker's open stream does not count).
    pub fn connected(&self) -> usize {
        self.registry
            .alive(self.scheduler.now(), self.config.lease_ttl)
            .len()
    }

    /// Workers with an open session on this replica, alive or not.
    pub fn sessions(&self) -> usize {
        self.registry.len()
    }

    /// Cancels a run (see [`Scheduler::cancel_run`]) and sends `Cancel` for each live
    /// attempt to its worker's session, when it is connected here.
    pub async fn cancel_run(&self, run_id: Uuid) -> Result<CancelReport, SchedulerError> {
        let report = self.scheduler.cancel_run(run_id).await?;
        let mut told = self.cancels_told.lock().unwrap_or_else(|p| p.into_inner());
        for (attempt_id, worker_id) in &report.live {
            if self
                .registry
                .send(worker_id, cancelled_by_user(*attempt_id))
            {
                told.insert(*attempt_id);
            }
        }
        Ok(report)
    }

    /// Sends `Cancel` for each live attempt of a cancelling run whose worker has a session
    /// here and was not told yet: a run cancelled through another replica reaches this
    /// replica's workers on its next reaper pass. Forgets attempts that are no longer live.
    /// Returns how many were told now.
    pub async fn tell_cancels(&self) -> Result<usize, SchedulerError> {
        let live = self.scheduler.live_attempts_of_cancelling_runs().await?;
        let mut told = self.cancels_told.lock().unwrap_or_else(|p| p.into_inner());
        let still: HashSet<Uuid> = live.iter().map(|(a, _)| *a).collect();
        told.retain(|a| still.contains(a));
        let mut now_told = 0;
        for (attempt_id, worker_id) in live {
            if !told.contains(&attempt_id)
                && self
                    .registry
                    .send(&worker_id, cancelled_by_user(attempt_id))
            {
                told.insert(attempt_id);
                now_told += 1;
            }
        }
        Ok(now_told)
    }

    /// Asks every connected worker to drain; returns how many were asked.
    pub fn drain_all(&self, reason: &str) -> usize {
        let sessions = self.registry.lock();
        sessions
            .values()
            .filter(|e| e.control.send(Control::Drain(reason.to_string())).is_ok())
            .count()
    }

    /// Starts the reaper: every [`LeaseTiming::reap_interval`], it
    /// [`Scheduler::reap`]s at the scheduler's clock and sends `Cancel` to each reaped
    /// attempt's worker when it is still connected here. Silence is judged by what this
    /// coordinator heard (each session's reader notes every heartbeat's leases as it
    /// arrives, see [`Scheduler::on_heard`]), so a database that is down or frozen does not
    /// expire the leases of workers that kept heartbeating; a lease is taken back at most
    /// TTL + one interval after its worker went silent. Before its first pass it restarts the clock of every lease
    /// ([`WorkersService::restart_lease_clocks`]): a coordinator that just started has heard
    /// from no worker, so the time it was down is not counted as silence. Spawn it once the
    /// listener accepts sessions (the server does): the grace counts from then.
    pub fn spawn_reaper(&self) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(this.config.timing().reap_interval());
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut clocks_restarted = false;
            loop {
                tick.tick().await;
                if !clocks_restarted {
                    match this.restart_lease_clocks().await {
                        Ok(_) => clocks_restarted = true,
                        Err(e) => {
                            tracing::warn!("reaper: {e}");
                            continue; // never reap before the clocks are restarted
                        }
                    }
                }
                if let Err(e) = this.reap_once().await {
                    tracing::warn!("reaper: {e}");
                }
                if let Err(e) = this.tell_cancels().await {
                    tracing::warn!("reaper: telling cancels: {e}");
                }
            }
        })
    }

    /// What the reaper does once before its first pass: every live lease gets the restart
    /// grace from now ([`LeaseTiming::restart_grace`]: one TTL plus the longest wait between
    /// a worker's tries to reconnect; see [`Scheduler::restart_lease_clocks`]). Returns how
    /// many were extended.
    pub async fn restart_lease_clocks(&self) -> Result<u64, SchedulerError> {
        let grace = self.config.timing().restart_grace();
        let n = self.scheduler.restart_lease_clocks(grace).await?;
        if n > 0 {
            tracing::info!(
                leases = n,
                grace_ms = grace.as_millis() as u64,
                "coordinator start: live leases kept for the restart grace (one TTL and the \
                 workers' longest reconnect wait) from now"
            );
        }
        Ok(n)
    }

    /// One pass of the reaper (see [`WorkersService::spawn_reaper`]).
    pub async fn reap_once(&self) -> Result<usize, SchedulerError> {
        let now = self.scheduler.now();
        let started = std::time::Instant::now();
        let reaped = {
            use tracing::Instrument as _;
            self.scheduler
                .reap_unwoken(now)
                .instrument(trace::poll("reap"))
                .await?
        };
        self.metrics.db_time("reap", started.elapsed());
        // Its lease expired: the worker went silent, even if a report it sent after its
        // last heartbeat keeps it "heard" for a little longer. Marked before its slot is
        // freed (the Cancel below) and before a claimer is woken, so that its session
        // takes none of the trials just re-queued, nor anything else, until it is heard
        // from again.
        for r in &reaped {
            self.registry.silenced(&r.worker_id, now);
        }
        self.scheduler.wake_if_requeued(&reaped);
        for r in &reaped {
            self.metrics.lease_expired();
            self.metrics
                .attempt_finished("infrastructure_error", "lease expired");
            if r.disposition == Disposition::Requeued {
                self.metrics.retried();
            }
            tracing::info!(attempt = %r.attempt_id, worker = %r.worker_id,
                disposition = ?r.disposition, "lease expired");
            self.registry.send(
                &r.worker_id,
                Control::Cancel {
                    attempt_id: r.attempt_id,
                    reason: "lease expired".into(),
                    forget: true,
                },
            );
        }
        Ok(reaped.len())
    }

    /// After a session of `worker_id` ended: unless the worker opened a new session within
    /// [`LeaseTiming::session_grace`], its leases are released at once (fencing makes that safe) instead
    /// of waiting for them to expire.
    pub(crate) fn release_after_grace(&self, worker_id: String) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(this.config.timing().session_grace()).await;
            if this.registry.has(&worker_id) {
                return;
            }
            match this.scheduler.release_worker(&worker_id, &[], true).await {
                Ok(reaped) if !reaped.is_empty() => {
                    for r in &reaped {
                        this.metrics
                            .attempt_finished("infrastructure_error", "session broke");
                        if r.disposition == Disposition::Requeued {
                            this.metrics.retried();
                        }
                    }
                    tracing::info!(worker = %worker_id, released = reaped.len(),
                        "session broke with no reconnect: leases released")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(worker = %worker_id, "failed to release leases: {e}"),
            }
        });
    }
}

#[tonic::async_trait]
impl Workers for WorkersService {
    type SessionStream = ReceiverStream<Result<CoordinatorMessage, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<WorkerMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let credential = request
            .extensions()
            .get::<WorkerCredential>()
            .cloned()
            .unwrap_or_default();
        let inbound = request.into_inner();
        let (out, rx) = mpsc::channel(256);
        tokio::spawn(session::run(self.clone(), inbound, out, credential));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// The `Cancel` of an attempt whose run a user cancelled: the worker stops it and reports it
/// `cancelled` (its lease is not forgotten: the report ends it).
fn cancelled_by_user(attempt_id: Uuid) -> Control {
    Control::Cancel {
        attempt_id,
        reason: "run cancelled by user".into(),
        forget: false,
    }
}
