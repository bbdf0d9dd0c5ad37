//! The session supervisor: one task that owns the connection, the held leases and every
//! message still owed to the coordinator. Runners report to it over a channel; it sends,
//! re-sends after a reconnect, and forgets what is acknowledged or revoked.

use super::artifacts::{ArtifactError, ArtifactStore};
use super::config::{ConfigError, WorkerConfig};
use super::linger;
use super::metrics::WorkerMetrics;
use super::runner::{self, Context, Event};
use crate::orchestrator::Orchestrator;
use crate::process::CancelToken;
use akbench_core::clock::SystemClock;
use akbench_core::identity::{
    after_refusal, certificate_refusal, AfterRefusal, CertificateRefusal, Refused,
};
use akbench_core::lease_timing::{jittered, next_reconnect_delay, RECONNECT_FIRST};
use akbench_core::lifecycle::State;
use akbench_proto::v1 as pb;
use akbench_proto::v1::coordinator_message::Body as In;
use akbench_proto::v1::worker_message::Body as Out;
use akbench_proto::workers_client::WorkersClient;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::Endpoint;

/// How long a draining daemon keeps trying to deliver what it owes once its attempts ended.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);
/// Heartbeat period until a `Welcome` says otherwise.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// How long opening a session may take (connecting, the TLS handshake, the coordinator's
/// answer to the `Hello`): a coordinator that accepts the connection and says nothing is
/// given up on and tried again with the reconnect backoff.
pub const SESSION_OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the read-only handshake that tells a refused certificate from a closed
/// connection waits for the coordinator's alert ([`crate::dial_probe`]).
const CERTIFICATE_PROBE_WAIT: Duration = Duration::from_secs(3);

/// How the daemon ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Drained; everything owed was acknowledged.
    Drained,
    /// Drained, but some owed messages were never acknowledged.
    Undelivered,
    /// The coordinator kept refusing the worker's credential (`UNAUTHENTICATED` or
    /// `PERMISSION_DENIED`, [`akbench_core::identity::REFUSALS_BEFORE_EXIT`] times in a row).
    CredentialRefused,
    /// Another live session kept holding the worker id (`ALREADY_EXISTS`, as many times).
    IdHeld,
    /// The TLS handshake kept failing over a certificate (the coordinator refused the
    /// worker's, or the worker could not verify the coordinator's), as many times.
    CertificateRefused,
}

impl Exit {
    /// The process exit code (see the module docs).
    pub fn code(self) -> i32 {
        match self {
            Exit::Drained => 0,
            Exit::Undelivered => 3,
            Exit::CredentialRefused => akbench_core::identity::EXIT_AUTH_REFUSED,
            Exit::IdHeld => akbench_core::identity::EXIT_ID_HELD,
            Exit::CertificateRefused => akbench_core::identity::EXIT_CERT_REFUSED,
        }
    }
}

/// The daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The artifact store cannot be opened.
    #[error(transparent)]
    Artifacts(#[from] ArtifactError),
}

/// What the daemon is doing, published after every change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// A session is open and welcomed.
    pub connected: bool,
    /// Sessions welcomed so far (1 after the first connect; more after reconnects).
    pub sessions: u64,
    /// Draining: no new work.
    pub draining: bool,
    /// Attempts still running on this host.
    pub running: usize,
    /// Leases held (attempt id, epoch), sorted.
    pub held: Vec<(String, i64)>,
    /// Assignments received so far.
    pub assignments: u64,
    /// Assignments received while draining and not started.
    pub not_started: u64,
    /// Attempts whose lease was lost or revoked.
    pub lost: u64,
}

#[derive(Debug)]
enum Control {
    Drain(String),
}

/// Controls a running daemon and observes its [`Status`].
#[derive(Debug, Clone)]
pub struct Handle {
    control: mpsc::UnboundedSender<Control>,
    status: watch::Receiver<Status>,
}

impl Handle {
    /// Starts draining; a second call ends the grace period at once.
    pub fn drain(&self, reason: &str) {
        let _ = self.control.send(Control::Drain(reason.to_string()));
    }

    /// The latest status.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Waits until `pred` holds for the status (or the daemon is gone); returns that status.
    pub async fn wait_for(&self, pred: impl Fn(&Status) -> bool) -> Status {
        let mut rx = self.status.clone();
        let got = rx.wait_for(|s| pred(s)).await.map(|s| s.clone());
        match got {
            Ok(s) => s,
            Err(_) => rx.borrow().clone(),
        }
    }
}

/// A worker daemon, ready to [`run`](Daemon::run).
#[derive(Debug)]
pub struct Daemon {
    config: WorkerConfig,
    /// The coordinators' endpoints, in the order tried (TLS files read once, at start).
    endpoints: Vec<(url::Url, Endpoint)>,
    ctx: Arc<Context>,
    control_tx: mpsc::UnboundedSender<Control>,
    control_rx: mpsc::UnboundedReceiver<Control>,
    status_tx: watch::Sender<Status>,
}

impl Daemon {
    /// Checks the configuration and opens the artifact store.
    pub fn new(config: WorkerConfig) -> Result<Self, StartError> {
        config.validate()?;
        let endpoints = config.endpoints()?;
        let artifacts = config
            .artifacts
            .as_deref()
            .map(ArtifactStore::open)
            .transpose()?;
        std::fs::create_dir_all(&config.out_root).map_err(|e| {
            ConfigError::Invalid(format!(
                "--out {} cannot be created: {e}",
                config.out_root.display()
            ))
        })?;
        let ctx = Arc::new(Context {
            orchestrator: Orchestrator {
                worker_id: config.worker_id.clone(),
                ..Orchestrator::new(&config.cache_root, Arc::new(SystemClock))
            },
            tasks_root: config.tasks_root.clone(),
            agents_root: config.agents_root.clone(),
            out_root: config.out_root.clone(),
            artifacts,
            metrics: Arc::new(WorkerMetrics::default()),
            worker_id: config.worker_id.clone(),
            collector: super::collect::Collector::new(config.cache_max_bytes),
        });
        ctx.metrics.set_slots(config.slots);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (status_tx, _) = watch::channel(Status::default());
        Ok(Self {
            config,
            endpoints,
            ctx,
            control_tx,
            control_rx,
            status_tx,
        })
    }

    /// The daemon's metrics (what `--metrics-listen` serves).
    pub fn metrics(&self) -> Arc<WorkerMetrics> {
        self.ctx.metrics.clone()
    }

    /// A handle to drain the daemon and watch it.
    pub fn handle(&self) -> Handle {
        Handle {
            control: self.control_tx.clone(),
            status: self.status_tx.subscribe(),
        }
    }

    /// Runs until drained.
    pub async fn run(self) -> Exit {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (mut s, control_rx) = self.supervisor(events_tx);
        s.run(events_rx, control_rx).await
    }

    /// The supervisor that runs this daemon (not connected yet), and its control channel.
    fn supervisor(
        self,
        events_tx: mpsc::UnboundedSender<Event>,
    ) -> (Supervisor, mpsc::UnboundedReceiver<Control>) {
        let endpoints = self
            .endpoints
            .into_iter()
            .map(|(url, e)| (url, keep_alive(e)))
            .collect();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
        let slots = self.config.slots as usize;
        let s = Supervisor {
            config: self.config,
            ctx: self.ctx,
            endpoints,
            at: 0,
            events_tx,
            attempts: HashMap::new(),
            tx: None,
            welcomed: false,
            backoff: RECONNECT_FIRST,
            heartbeat_period: DEFAULT_HEARTBEAT,
            rng: seed | 1,
            drain: None,
            flush_deadline: None,
            status: Status::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(slots)),
            status_tx: self.status_tx,
            instance_id: uuid::Uuid::now_v7().to_string(),
            refusals: (Refused::Other, 0),
            fatal: None,
        };
        (s, self.control_rx)
    }
}

fn keep_alive(endpoint: Endpoint) -> Endpoint {
    endpoint
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(5))
        .keep_alive_while_idle(true)
}

/// One attempt this worker holds, and what it still owes about it.
#[derive(Debug)]
struct Entry {
    epoch: i64,
    cancel: CancelToken,
    /// The runner has not sent `Done` yet.
    running: bool,
    /// The lease is gone: nothing more is sent; forgotten once the runner ends.
    lost: bool,
    /// Unacknowledged transitions, in seq order.
    transitions: Vec<pb::Transition>,
    /// Highest seq sent on the current stream.
    sent_upto: u32,
    /// When the oldest transition not sent yet was recorded (see [`linger`]).
    held_since: Option<Instant>,
    record: Option<pb::RecordUpload>,
    record_sent: bool,
    finished: Option<pb::AttemptFinished>,
    finished_sent: bool,
    /// Send everything owed again at the next heartbeat (`UNAVAILABLE`).
    retry: bool,
    /// W3C trace context of the attempt's span, sent with every report about it.
    traceparent: String,
}

impl Entry {
    fn new(epoch: i64, cancel: CancelToken) -> Self {
        Self {
            epoch,
            cancel,
            running: true,
            lost: false,
            transitions: Vec::new(),
            sent_upto: 0,
            held_since: None,
            record: None,
            record_sent: false,
            finished: None,
            finished_sent: false,
            retry: false,
            traceparent: String::new(),
        }
    }

    fn settled(&self) -> bool {
        !self.running
            && (self.lost
                || (self.transitions.is_empty()
                    && self.record.is_none()
                    && self.finished.is_none()))
    }

    /// When its unsent transitions are due ([`linger::due`]); `None` when none are held.
    fn due(&self) -> Option<Instant> {
        let first = self.transitions.iter().find(|t| t.seq > self.sent_upto)?;
        let ended = !self.running;
        Some(linger::due(
            first.seq,
            ended,
            self.held_since.unwrap_or_else(Instant::now),
        ))
    }

    fn resend_all(&mut self) {
        self.sent_upto = 0;
        self.record_sent = false;
        self.finished_sent = false;
        self.retry = false;
    }
}

struct Drain {
    grace_end: Instant,
    cancelled: bool,
}

type Connecting = Pin<
    Box<
        dyn Future<
                Output = Result<
                    (
                        mpsc::UnboundedSender<pb::WorkerMessage>,
                        tonic::Streaming<pb::CoordinatorMessage>,
                    ),
                    Refusal,
                >,
            > + Send,
    >,
>;

/// Why a session did not open (or ended before its `Welcome`).
#[derive(Debug, Clone)]
struct Refusal {
    why: Refused,
    message: String,
}

impl Refusal {
    /// A failed connection: transient, unless its handshake failed over a certificate.
    fn transient(message: String) -> Self {
        match certificate_refusal(&message) {
            Some(side) => Self::certificate(side, message),
            None => Self {
                why: Refused::Other,
                message,
            },
        }
    }

    /// A failure that did not say why, over TLS: a refused client certificate can read as
    /// a closed connection (the alert races the first request), so the handshake is made
    /// again, reading only ([`crate::dial_probe`]); a certificate refusal it sees replaces
    /// this failure.
    async fn checked_for_certificate(self, url: &url::Url, tls: &crate::dial::TlsOptions) -> Self {
        match crate::dial_probe::certificate_verdict(url, tls, CERTIFICATE_PROBE_WAIT).await {
            crate::dial_probe::Verdict::TlsError(text) => match certificate_refusal(&text) {
                Some(side) => Self::certificate(side, text),
                None => self,
            },
            crate::dial_probe::Verdict::NothingLearned => self,
        }
    }

    fn certificate(side: CertificateRefusal, message: String) -> Self {
        let fix = match side {
            CertificateRefusal::Ours => {
                "the coordinator refused this worker's client certificate; fix: pass \
                 --tls-cert/--tls-key issued by the CA the coordinator's --client-ca names \
                 (`akbench certs --out DIR --worker WORKER_ID`), not expired"
            }
            CertificateRefusal::Theirs => {
                "this worker did not accept the coordinator's certificate; fix: pass the CA \
                 that signed it with --ca-file, and check that it is valid for the \
                 coordinator URL's host and not expired"
            }
        };
        Self {
            why: Refused::Certificate,
            message: format!("the TLS handshake failed: {message}; {fix}"),
        }
    }

    fn of(status: &tonic::Status) -> Self {
        // A transport error's cause (the TLS alert) is only in its sources.
        let mut text = format!("{:?}: {}", status.code(), status.message());
        let mut source = std::error::Error::source(status);
        while let Some(s) = source {
            let s_text = s.to_string();
            if !text.contains(&s_text) {
                text = format!("{text}: {s_text}");
            }
            source = s.source();
        }
        let why = match status.code() {
            tonic::Code::Unauthenticated => Refused::Unauthenticated,
            tonic::Code::PermissionDenied => Refused::PermissionDenied,
            tonic::Code::AlreadyExists => Refused::IdHeld,
            _ => return Self::transient(text),
        };
        Self { why, message: text }
    }
}

struct Supervisor {
    config: WorkerConfig,
    ctx: Arc<Context>,
    /// The coordinators, in the order tried; `at` is the one sessions open with now (the
    /// next is tried when a session cannot be opened).
    endpoints: Vec<(url::Url, Endpoint)>,
    at: usize,
    events_tx: mpsc::UnboundedSender<Event>,
    attempts: HashMap<String, Entry>,
    tx: Option<mpsc::UnboundedSender<pb::WorkerMessage>>,
    welcomed: bool,
    backoff: Duration,
    heartbeat_period: Duration,
    rng: u64,
    drain: Option<Drain>,
    flush_deadline: Option<Instant>,
    status: Status,
    status_tx: watch::Sender<Status>,
    /// One permit per slot: an assignment runs once it holds one (the prefetched wait).
    slots: Arc<tokio::sync::Semaphore>,
    /// This process's `Hello.instance_id` (the same on every reconnect).
    instance_id: String,
    /// The last refusal and how many sessions in a row were refused for it (reset by a
    /// `Welcome`).
    refusals: (Refused, u32),
    /// Set when lasting refusals end the daemon: it exits once no attempt runs.
    fatal: Option<Exit>,
}

impl Supervisor {
    async fn run(
        &mut self,
        mut events: mpsc::UnboundedReceiver<Event>,
        mut control: mpsc::UnboundedReceiver<Control>,
    ) -> Exit {
        let far = || Instant::now() + Duration::from_secs(86_400 * 365);
        let mut connecting: Option<Connecting> = Some(self.connect());
        let mut inbound: Option<tonic::Streaming<pb::CoordinatorMessage>> = None;
        let mut retry_at: Option<Instant> = None;
        let mut heartbeat = tokio::time::interval(DEFAULT_HEARTBEAT);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut control_open = true;
        loop {
            self.publish();
            if let Some(exit) = self.finished() {
                // Closing the request stream ends the session on the coordinator.
                self.tx = None;
                tracing::info!(?exit, code = exit.code(), "worker exiting");
                return exit;
            }
            let grace_end = match &self.drain {
                Some(d) if !d.cancelled => d.grace_end,
                _ => far(),
            };
            let flush_deadline = self.flush_deadline.unwrap_or_else(far);
            let linger_end = self.next_due();
            tokio::select! {
                biased;
                c = control.recv(), if control_open => match c {
                    Some(Control::Drain(reason)) => self.start_drain(&reason),
                    None => control_open = false,
                },
                Some(ev) = events.recv() => {
                    self.on_event(ev);
                    while let Ok(ev) = events.try_recv() {
                        self.on_event(ev);
                    }
                    self.flush_due();
                }
                _ = tokio::time::sleep_until(linger_end.unwrap_or_else(far)), if linger_end.is_some() => self.flush_due(),
                m = next_message(&mut inbound), if inbound.is_some() => match m {
                    Ok(Some(m)) => {
                        let welcomed = self.welcomed;
                        self.on_message(m);
                        if !welcomed && self.welcomed {
                            let period = self.heartbeat_period;
                            heartbeat = tokio::time::interval_at(Instant::now() + period, period);
                            heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        }
                    }
                    Ok(None) | Err(_) => {
                        let refusal = match (m, self.welcomed) {
                            (Err(e), false) => Some(Refusal::of(&e)),
                            (Err(e), true) => {
                                tracing::warn!("session failed: {e}");
                                None
                            }
                            _ => {
                                tracing::warn!("session ended by the coordinator");
                                None
                            }
                        };
                        inbound = None;
                        retry_at = match refusal {
                            Some(r) => self.refused(r),
                            None => Some(self.disconnected()),
                        };
                    }
                },
                r = async { connecting.as_mut().expect("guarded").await }, if connecting.is_some() => {
                    connecting = None;
                    match r {
                        Ok((tx, rx)) => {
                            self.tx = Some(tx);
                            inbound = Some(rx);
                        }
                        Err(r) => retry_at = self.refused(r),
                    }
                }
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(far)), if retry_at.is_some() => {
                    retry_at = None;
                    connecting = Some(self.connect());
                }
                _ = heartbeat.tick() => self.heartbeat(),
                _ = tokio::time::sleep_until(grace_end), if grace_end < far() => self.grace_over(),
                _ = tokio::time::sleep_until(flush_deadline), if self.flush_deadline.is_some() => {
                    tracing::warn!(owed = self.attempts.len(), "could not deliver everything owed before the deadline");
                    self.tx = None;
                    return Exit::Undelivered;
                }
            }
        }
    }
}

/// The next message of an open stream.
async fn next_message(
    inbound: &mut Option<tonic::Streaming<pb::CoordinatorMessage>>,
) -> Result<Option<pb::CoordinatorMessage>, tonic::Status> {
    match inbound {
        Some(s) => s.message().await,
        None => std::future::pending().await,
    }
}

impl Supervisor {
    /// The URL of the coordinator sessions open with now.
    fn coordinator(&self) -> &url::Url {
        &self.endpoints[self.at].0
    }

    fn connect(&self) -> Connecting {
        let endpoint = self.endpoints[self.at].1.clone();
        let token = self.config.token.clone();
        let hello = pb::Hello {
            worker_id: self.config.worker_id.clone(),
            slots: self.config.leases(),
            labels: self.config.advertised_labels().into_iter().collect(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            held_leases: self.held_leases(),
            instance_id: self.instance_id.clone(),
        };
        tracing::debug!(coordinator = %self.coordinator(), held = hello.held_leases.len(), "connecting");
        let open = async move {
            let channel = endpoint.connect().await.map_err(|e| {
                let mut s = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(c) = src {
                    s.push_str(&format!(": {c}"));
                    src = c.source();
                }
                Refusal::transient(s)
            })?;
            // Explicit on both ends (the coordinator sets the same limits); records are cut
            // to fit before they are sent (runner::done).
            let mut client = WorkersClient::new(channel)
                .max_encoding_message_size(akbench_proto::MAX_WORKER_MESSAGE_BYTES)
                .max_decoding_message_size(akbench_proto::MAX_COORDINATOR_MESSAGE_BYTES);
            let (tx, rx) = mpsc::unbounded_channel();
            let _ = tx.send(pb::WorkerMessage {
                body: Some(Out::Hello(hello)),
            });
            let mut req = tonic::Request::new(UnboundedReceiverStream::new(rx));
            if let Some(t) = token {
                let v = format!("Bearer {t}").parse().map_err(|_| {
                    Refusal::transient("the token is not valid in a header".to_string())
                })?;
                req.metadata_mut().insert("authorization", v);
            }
            let stream = client
                .session(req)
                .await
                .map_err(|s| Refusal::of(&s))?
                .into_inner();
            Ok((tx, stream))
        };
        let url = self.coordinator().clone();
        let tls = self.config.tls.clone();
        Box::pin(async move {
            let opened = tokio::time::timeout(SESSION_OPEN_TIMEOUT, open)
                .await
                .unwrap_or_else(|_| {
                    Err(Refusal::transient(format!(
                        "the coordinator did not answer within {} s: it accepted the \
                         connection but sent nothing back (check that the URL is its gRPC \
                         port and whether it needs https://)",
                        SESSION_OPEN_TIMEOUT.as_secs()
                    )))
                });
            match opened {
                Err(r) if r.why == Refused::Other && url.scheme() == "https" => {
                    Err(r.checked_for_certificate(&url, &tls).await)
                }
                other => other,
            }
        })
    }

    /// A session was refused (or failed to connect): logs why, and returns when to try
    /// again, or `None` when lasting refusals end the daemon
    /// ([`akbench_core::identity::after_refusal`]): every running attempt is cancelled and
    /// the daemon exits once they ended.
    fn refused(&mut self, r: Refusal) -> Option<Instant> {
        let in_a_row = if self.refusals.0 == r.why {
            self.refusals.1 + 1
        } else {
            1
        };
        self.refusals = (r.why, in_a_row);
        let exit = match after_refusal(r.why, in_a_row) {
            AfterRefusal::Retry => {
                tracing::warn!(coordinator = %self.coordinator(), worker_id = %self.config.worker_id,
                    "failed to open a session: {}", r.message);
                if self.endpoints.len() > 1 {
                    // Another replica may serve: the next listed is tried (the live
                    // attempts are re-presented to it in its Hello, as after a restart).
                    self.at = (self.at + 1) % self.endpoints.len();
                    tracing::info!(coordinator = %self.coordinator(), "trying the next coordinator");
                }
                return Some(self.disconnected());
            }
            AfterRefusal::Exit(_) if r.why == Refused::IdHeld => Exit::IdHeld,
            AfterRefusal::Exit(_) if r.why == Refused::Certificate => Exit::CertificateRefused,
            AfterRefusal::Exit(_) => Exit::CredentialRefused,
        };
        tracing::error!(
            coordinator = %self.coordinator(),
            worker_id = %self.config.worker_id,
            attempts = in_a_row,
            exit_code = exit.code(),
            "failed to open a session, refused {in_a_row} times in a row: {}; giving up \
             (fix the worker's credential or --worker-id and start it again)",
            r.message
        );
        self.tx = None;
        self.welcomed = false;
        self.fatal = Some(exit);
        for e in self.attempts.values() {
            e.cancel.cancel();
        }
        None
    }

    /// Forgets the stream; returns when to try again.
    fn disconnected(&mut self) -> Instant {
        self.tx = None;
        self.welcomed = false;
        // Exponential backoff with +-20% jitter (core's reconnect schedule, which a
        // restarted coordinator's grace covers: LeaseTiming::restart_grace).
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let wait = jittered(self.backoff, (self.rng >> 11) as f64 / (1u64 << 53) as f64);
        self.backoff = next_reconnect_delay(self.backoff, self.heartbeat_period);
        tracing::info!(retry_in_ms = wait.as_millis() as u64, "reconnecting");
        Instant::now() + wait
    }

    fn held_leases(&self) -> Vec<pb::HeldLease> {
        let mut v: Vec<_> = self
            .attempts
            .iter()
            .filter(|(_, e)| !e.lost)
            .map(|(id, e)| pb::HeldLease {
                attempt_id: id.clone(),
                epoch: e.epoch,
            })
            .collect();
        v.sort_by(|a, b| a.attempt_id.cmp(&b.attempt_id));
        v
    }

    fn free_slots(&self) -> u32 {
        if self.drain.is_some() {
            return 0;
        }
        let used = u32::try_from(self.attempts.len()).unwrap_or(u32::MAX);
        self.config.leases().saturating_sub(used)
    }

    fn send(&self, body: Out) {
        if let (Some(tx), true) = (&self.tx, self.welcomed) {
            let _ = tx.send(pb::WorkerMessage { body: Some(body) });
        }
    }

    fn publish(&mut self) {
        let mut held: Vec<(String, i64)> = self
            .held_leases()
            .into_iter()
            .map(|l| (l.attempt_id, l.epoch))
            .collect();
        held.sort();
        self.status.connected = self.welcomed;
        self.status.draining = self.drain.is_some();
        self.status.running = self.attempts.values().filter(|e| e.running).count();
        self.status.held = held;
        let s = self.status.clone();
        self.status_tx.send_if_modified(|old| {
            if *old == s {
                false
            } else {
                *old = s;
                true
            }
        });
    }

    /// `Some` once draining and nothing is left, or once refused for good and nothing runs.
    fn finished(&mut self) -> Option<Exit> {
        if let Some(exit) = self.fatal {
            return self.attempts.values().all(|e| !e.running).then_some(exit);
        }
        self.drain.as_ref()?;
        if self.attempts.is_empty() {
            return Some(Exit::Drained);
        }
        if self.flush_deadline.is_none() && self.attempts.values().all(|e| !e.running) {
            self.flush_deadline = Some(Instant::now() + FLUSH_TIMEOUT);
        }
        None
    }

    fn start_drain(&mut self, reason: &str) {
        match &mut self.drain {
            Some(d) => {
                tracing::info!(
                    reason,
                    "asked again to drain: cancelling running attempts now"
                );
                d.grace_end = Instant::now();
            }
            None => {
                tracing::info!(
                    reason,
                    grace_secs = self.config.grace.as_secs_f64(),
                    running = self.attempts.values().filter(|e| e.running).count(),
                    "draining"
                );
                self.drain = Some(Drain {
                    grace_end: Instant::now() + self.config.grace,
                    cancelled: false,
                });
                // Prefetched assignments still waiting for a slot never start.
                self.slots.close();
                // Advertise no free slots at once.
                self.heartbeat();
            }
        }
    }

    fn grace_over(&mut self) {
        if let Some(d) = &mut self.drain {
            d.cancelled = true;
        }
        for (id, e) in &self.attempts {
            if e.running {
                tracing::info!(attempt_id = %id, "grace period over: interrupting");
                // The worker's doing, not a user's cancel: the attempt ends
                // `infrastructure_error` (core::dispatch::Stop), retried within budget.
                e.cancel.interrupt(&format!(
                    "worker {} drained and its grace of {}s ran out",
                    self.config.worker_id,
                    self.config.grace.as_secs_f64()
                ));
            }
        }
    }

    fn heartbeat(&mut self) {
        if !self.welcomed {
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
            self.flush();
        }
        self.send(Out::Heartbeat(pb::Heartbeat {
            free_slots: self.free_slots(),
            leases: self.held_leases(),
            draining: self.drain.is_some(),
        }));
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Transition {
                attempt_id,
                transition,
                traceparent,
            } => {
                if let Some(e) = self.attempts.get_mut(&attempt_id) {
                    if !e.lost {
                        e.held_since.get_or_insert_with(Instant::now);
                        e.transitions.push(transition);
                        if !traceparent.is_empty() {
                            e.traceparent = traceparent;
                        }
                    }
                }
            }
            Event::Done {
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

    /// The earliest time an attempt's held transitions are due, while a session is open.
    fn next_due(&self) -> Option<Instant> {
        if self.tx.is_none() || !self.welcomed {
            return None;
        }
        self.attempts
            .values()
            .filter(|e| !e.lost)
            .filter_map(Entry::due)
            .min()
    }

    /// Sends what is owed and due ([`linger`]): transitions held less than their linger stay
    /// for the next call.
    fn flush_due(&mut self) {
        self.send_owed(Some(Instant::now()));
    }

    /// Sends everything owed that was not sent on this stream yet.
    fn flush(&mut self) {
        self.send_owed(None);
    }

    /// Sends what was not sent on this stream yet: everything, or with `now`, the
    /// transitions of attempts whose linger is over (records and finishes always).
    fn send_owed(&mut self, now: Option<Instant>) {
        let (Some(tx), true) = (&self.tx, self.welcomed) else {
            return;
        };
        let send = |body| {
            let _ = tx.send(pb::WorkerMessage { body: Some(body) });
        };
        for (id, e) in &mut self.attempts {
            if e.lost {
                continue;
            }
            let new: Vec<pb::Transition> = e
                .transitions
                .iter()
                .filter(|t| t.seq > e.sent_upto)
                .cloned()
                .collect();
            let due = match now {
                Some(now) => e.due().is_some_and(|d| d <= now),
                None => true,
            };
            if let (Some(last), true) = (new.last(), due) {
                e.sent_upto = last.seq;
                e.held_since = None;
                send(Out::Transitions(pb::TransitionBatch {
                    attempt_id: id.clone(),
                    epoch: e.epoch,
                    transitions: new,
                    traceparent: e.traceparent.clone(),
                }));
            }
            if let (Some(r), false) = (&e.record, e.record_sent) {
                e.record_sent = true;
                send(Out::Record(r.clone()));
            }
            if let (Some(f), false) = (&e.finished, e.finished_sent) {
                e.finished_sent = true;
                send(Out::Finished(f.clone()));
            }
        }
    }

    fn settle(&mut self, attempt_id: &str) {
        if self.attempts.get(attempt_id).is_some_and(Entry::settled) {
            self.attempts.remove(attempt_id);
        }
    }

    fn lose(&mut self, attempt_id: &str, why: &str) {
        if let Some(e) = self.attempts.get_mut(attempt_id) {
            if !e.lost {
                tracing::warn!(
                    attempt_id,
                    why,
                    "lease lost: cancelling the attempt and dropping what it owes"
                );
                self.status.lost += 1;
            }
            e.lost = true;
            e.cancel.cancel();
            e.transitions.clear();
            e.record = None;
            e.finished = None;
        }
        self.settle(attempt_id);
    }

    fn on_message(&mut self, m: pb::CoordinatorMessage) {
        match m.body {
            Some(In::Welcome(w)) => {
                self.welcomed = true;
                self.backoff = RECONNECT_FIRST;
                self.refusals = (Refused::Other, 0);
                self.status.sessions += 1;
                self.heartbeat_period = Duration::from_millis(w.heartbeat_interval_ms.max(50))
                    .min(DEFAULT_HEARTBEAT * 6);
                tracing::info!(coordinator = %self.coordinator(), worker_id = %self.config.worker_id,
                    held = self.attempts.len(), revoked = w.revoked_attempt_ids.len(), "session open");
                for id in &w.revoked_attempt_ids {
                    self.lose(id, "revoked by the coordinator at reconnect");
                }
                for e in self.attempts.values_mut() {
                    e.resend_all();
                }
                self.flush();
                if self.drain.is_some() {
                    self.heartbeat();
                }
            }
            Some(In::Assignment(a)) => self.on_assignment(a),
            Some(In::Cancel(c)) => {
                if let Some(e) = self.attempts.get(&c.attempt_id) {
                    tracing::info!(attempt_id = %c.attempt_id, reason = %c.reason, "cancel");
                    e.cancel.cancel();
                }
            }
            Some(In::Drain(d)) => self.start_drain(&format!("coordinator: {}", d.reason)),
            Some(In::Ack(a)) => {
                let Some(e) = self.attempts.get_mut(&a.attempt_id) else {
                    return;
                };
                match pb::Subject::try_from(a.subject) {
                    Ok(pb::Subject::Transitions) => e.transitions.retain(|t| t.seq > a.seq),
                    Ok(pb::Subject::Record) => e.record = None,
                    Ok(pb::Subject::Finished) => e.finished = None,
                    _ => {}
                }
                self.settle(&a.attempt_id);
            }
            Some(In::Refusal(r)) => self.on_refusal(r),
            None => {}
        }
    }

    fn on_refusal(&mut self, r: pb::Refusal) {
        let code = pb::RefusalCode::try_from(r.code).unwrap_or(pb::RefusalCode::Unspecified);
        match code {
            pb::RefusalCode::StaleEpoch | pb::RefusalCode::UnknownAttempt => {
                self.lose(
                    &r.attempt_id,
                    &format!("{}: {}", code.as_str_name(), r.message),
                );
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
                let Some(e) = self.attempts.get_mut(&r.attempt_id) else {
                    return;
                };
                match pb::Subject::try_from(r.subject) {
                    Ok(pb::Subject::Transitions) => e.transitions.clear(),
                    Ok(pb::Subject::Record) => e.record = None,
                    Ok(pb::Subject::Finished) => e.finished = None,
                    _ => {}
                }
                self.settle(&r.attempt_id);
            }
        }
    }

    fn on_assignment(&mut self, a: pb::Assignment) {
        if self.attempts.contains_key(&a.attempt_id) {
            tracing::warn!(attempt_id = %a.attempt_id, "duplicate assignment ignored");
            return;
        }
        self.status.assignments += 1;
        let cancel = CancelToken::new();
        self.attempts
            .insert(a.attempt_id.clone(), Entry::new(a.epoch, cancel.clone()));
        if self.drain.is_some() {
            self.status.not_started += 1;
            runner::end_unstarted(
                &self.config.worker_id,
                &a,
                State::InfrastructureError,
                format!(
                    "worker {} is draining and did not start the attempt",
                    self.config.worker_id
                ),
                &self.events_tx,
                &self.ctx.metrics,
            );
            return;
        }
        tokio::spawn(runner::run(
            self.ctx.clone(),
            a,
            cancel,
            self.events_tx.clone(),
            self.slots.clone(),
        ));
    }
}

#[cfg(test)]
mod linger_tests {
    use super::*;

    fn transition(seq: u32) -> Event {
        Event::Transition {
            attempt_id: "a".into(),
            transition: pb::Transition {
                seq,
                state: pb::AttemptState::Preparing as i32,
                at_unix_ms: 1,
                note: String::new(),
            },
            traceparent: String::new(),
        }
    }

    /// What was sent: per message, the transition seqs of a batch, or the record's
    /// or finish's name.
    fn sent(rx: &mut mpsc::UnboundedReceiver<pb::WorkerMessage>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(m) = rx.try_recv() {
            out.push(match m.body {
                Some(Out::Transitions(b)) => {
                    assert_eq!((b.attempt_id.as_str(), b.epoch), ("a", 3));
                    let seqs: Vec<String> =
                        b.transitions.iter().map(|t| t.seq.to_string()).collect();
                    seqs.join(",")
                }
                Some(Out::Record(_)) => "record".into(),
                Some(Out::Finished(_)) => "finished".into(),
                other => format!("{other:?}"),
            });
        }
        out
    }

    fn held_since(s: &Supervisor) -> Instant {
        s.attempts["a"].held_since.expect("transitions are held")
    }

    // Times are given, never read from the clock, so the test does not depend on how fast
    // the machine runs it.
    #[tokio::test]
    async fn transitions_gather_for_the_linger_and_leave_with_the_record_unacknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let config = WorkerConfig::new(
            "http://127.0.0.1:1".parse().unwrap(),
            d.join("cache"),
            d.join("out"),
            d.into(),
            d.into(),
        );
        let (events_tx, _events) = mpsc::unbounded_channel();
        let (mut s, _control) = Daemon::new(config).unwrap().supervisor(events_tx);
        let (tx, mut rx) = mpsc::unbounded_channel();
        (s.tx, s.welcomed) = (Some(tx), true);
        s.attempts
            .insert("a".into(), Entry::new(3, CancelToken::new()));

        // The first transition (the attempt started) goes at once.
        s.on_event(transition(1));
        s.send_owed(Some(held_since(&s)));
        assert_eq!(sent(&mut rx), ["1"]);

        // Later ones wait for the linger, then go as one batch, in order.
        s.on_event(transition(2));
        let t = held_since(&s);
        s.on_event(transition(3));
        assert_eq!(
            held_since(&s),
            t,
            "the oldest held transition sets the time"
        );
        s.send_owed(Some(t + linger::LINGER - Duration::from_millis(1)));
        assert_eq!(sent(&mut rx), Vec::<String>::new());
        assert_eq!(s.next_due(), Some(t + linger::LINGER));
        s.send_owed(Some(t + linger::LINGER));
        assert_eq!(sent(&mut rx), ["2,3"]);
        assert_eq!(s.next_due(), None);

        // The attempt ends: what is held goes at once, before the record and the finish.
        s.on_event(transition(4));
        let t = held_since(&s);
        s.send_owed(Some(t));
        assert_eq!(sent(&mut rx), Vec::<String>::new());
        s.on_event(Event::Done {
            attempt_id: "a".into(),
            record_json: "{}".into(),
            digest: "d".into(),
            terminal: pb::AttemptState::Completed,
            cause: String::new(),
            traceparent: String::new(),
        });
        s.send_owed(Some(t));
        assert_eq!(sent(&mut rx), ["4", "record", "finished"]);

        // Sent is not stored: every transition stays owed until acknowledged.
        let e = &s.attempts["a"];
        let owed: Vec<u32> = e.transitions.iter().map(|t| t.seq).collect();
        assert_eq!(owed, [1, 2, 3, 4]);
        assert!(e.record.is_some() && e.finished.is_some());
        s.on_message(pb::CoordinatorMessage {
            body: Some(In::Ack(pb::Ack {
                attempt_id: "a".into(),
                subject: pb::Subject::Transitions as i32,
                seq: 3,
            })),
        });
        let owed: Vec<u32> = s.attempts["a"].transitions.iter().map(|t| t.seq).collect();
        assert_eq!(owed, [4]);
    }
}
