//! The session supervisor: one task that owns the connection, the held leases and every
//! message still owed to the coordinator. Runners report to it over a channel; it sends,
//! re-sends after a reconnect, and forgets what is acknowledged or revoked.
//!
//! It has the shape of nextest's runner dispatcher: each arm of the connection loop's
//! `select!` only turns what arrived (a runner's report, a coordinator message, the stream
//! opening or ending, a control request, a timer) into an [`Event`]; the pure state
//! machine ([`state::State::handle_event`], which is given the time) decides and returns
//! [`Effect`]s; the loop runs them (send on the stream, start or end an attempt, cancel or
//! interrupt one, open a session, drop the stream, exit) and sleeps until the timers the
//! state machine names ([`state::State::timers`]).

mod event;
mod owed;
mod refusal;
mod state;
#[cfg(test)]
mod state_tests;

use super::artifacts::{ArtifactError, ArtifactStore};
use super::config::{ConfigError, WorkerConfig};
use super::metrics::WorkerMetrics;
use super::runner::{self, Context};
use crate::orchestrator::Orchestrator;
use crate::process::CancelToken;
use akbench_core::clock::SystemClock;
use akbench_core::identity::Refused;
use akbench_proto::v1 as pb;
use akbench_proto::v1::worker_message::Body as Out;
use akbench_proto::workers_client::WorkersClient;
use event::{Effect, Event, Timer};
use refusal::Refusal;
use state::{Settings, State};
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
/// How long opening a session may take (connecting, the TLS handshake, the coordinator's
/// answer to the `Hello`): a coordinator that accepts the connection and says nothing is
/// given up on and tried again with the reconnect backoff.
pub const SESSION_OPEN_TIMEOUT: Duration = Duration::from_secs(30);

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
        events_tx: mpsc::UnboundedSender<runner::Event>,
    ) -> (Supervisor, mpsc::UnboundedReceiver<Control>) {
        let (coordinators, endpoints) = self
            .endpoints
            .into_iter()
            .map(|(url, e)| (url, keep_alive(e)))
            .unzip();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
        let settings = Settings {
            worker_id: self.config.worker_id.clone(),
            grace: self.config.grace,
            leases: self.config.leases(),
            coordinators,
        };
        let slots = self.config.slots as usize;
        let s = Supervisor {
            config: self.config,
            ctx: self.ctx,
            endpoints,
            events_tx,
            state: State::new(settings, seed),
            cancels: HashMap::new(),
            tx: None,
            inbound: None,
            connecting: None,
            slots: Arc::new(tokio::sync::Semaphore::new(slots)),
            status_tx: self.status_tx,
            instance_id: uuid::Uuid::now_v7().to_string(),
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

/// The connection loop: it owns the I/O that the state machine's effects name.
struct Supervisor {
    config: WorkerConfig,
    ctx: Arc<Context>,
    /// The coordinators' endpoints, in the order tried (`Effect::Connect` names one).
    endpoints: Vec<Endpoint>,
    events_tx: mpsc::UnboundedSender<runner::Event>,
    state: State,
    /// The cancel token of every attempt started and still held.
    cancels: HashMap<String, CancelToken>,
    tx: Option<mpsc::UnboundedSender<pb::WorkerMessage>>,
    inbound: Option<tonic::Streaming<pb::CoordinatorMessage>>,
    connecting: Option<Connecting>,
    /// One permit per slot: an assignment runs once it holds one (the prefetched wait).
    slots: Arc<tokio::sync::Semaphore>,
    status_tx: watch::Sender<Status>,
    /// This process's `Hello.instance_id` (the same on every reconnect).
    instance_id: String,
}

impl Supervisor {
    async fn run(
        &mut self,
        mut events: mpsc::UnboundedReceiver<runner::Event>,
        mut control: mpsc::UnboundedReceiver<Control>,
    ) -> Exit {
        let mut control_open = true;
        let mut arrived = Some(Event::Started);
        loop {
            if let Some(event) = arrived.take() {
                let effects = self.state.handle_event(event, Instant::now());
                let exit = self.apply(effects);
                self.publish();
                if let Some(exit) = exit {
                    return exit;
                }
            }
            let timers = self.state.timers(Instant::now());
            arrived = tokio::select! {
                biased;
                c = control.recv(), if control_open => match c {
                    Some(Control::Drain(reason)) => Some(Event::Drain(reason)),
                    None => {
                        control_open = false;
                        None
                    }
                },
                Some(ev) = events.recv() => {
                    let mut batch = vec![ev];
                    while let Ok(ev) = events.try_recv() {
                        batch.push(ev);
                    }
                    Some(Event::Runners(batch))
                }
                _ = sleep_until(timers.linger) => Some(Event::Timer(Timer::Linger)),
                m = next_message(&mut self.inbound) => Some(match m {
                    Ok(Some(m)) => Event::Message(m),
                    Ok(None) => {
                        self.inbound = None;
                        Event::StreamEnded(None)
                    }
                    Err(e) => {
                        self.inbound = None;
                        Event::StreamEnded(Some(Refusal::of(&e)))
                    }
                }),
                r = opened(&mut self.connecting) => {
                    self.connecting = None;
                    Some(match r {
                        Ok((tx, rx)) => {
                            self.tx = Some(tx);
                            self.inbound = Some(rx);
                            Event::Opened
                        }
                        Err(r) => Event::OpenFailed(r),
                    })
                }
                _ = sleep_until(timers.reconnect) => Some(Event::Timer(Timer::Reconnect)),
                _ = sleep_until(timers.heartbeat) => Some(Event::Timer(Timer::Heartbeat)),
                _ = sleep_until(timers.grace) => Some(Event::Timer(Timer::Grace)),
                _ = sleep_until(timers.flush) => Some(Event::Timer(Timer::Flush)),
            };
        }
    }

    /// Runs the effects in order; returns the exit when one says to.
    fn apply(&mut self, effects: Vec<Effect>) -> Option<Exit> {
        let mut exit = None;
        for effect in effects {
            match effect {
                Effect::Send(body) => {
                    if let Some(tx) = &self.tx {
                        let _ = tx.send(pb::WorkerMessage { body: Some(body) });
                    }
                }
                Effect::Connect { at, held } => self.connecting = Some(self.connect(at, held)),
                Effect::CloseStream => (self.tx, self.inbound) = (None, None),
                Effect::Start(a) => {
                    let cancel = CancelToken::new();
                    self.cancels.insert(a.attempt_id.clone(), cancel.clone());
                    tokio::spawn(runner::run(
                        self.ctx.clone(),
                        a,
                        cancel,
                        self.events_tx.clone(),
                        self.slots.clone(),
                    ));
                }
                Effect::EndUnstarted { assignment, cause } => runner::end_unstarted(
                    &self.config.worker_id,
                    &assignment,
                    akbench_core::lifecycle::State::InfrastructureError,
                    cause,
                    &self.events_tx,
                    &self.ctx.metrics,
                ),
                Effect::Cancel(id) => {
                    if let Some(c) = self.cancels.get(&id) {
                        c.cancel();
                    }
                }
                Effect::Interrupt { attempt_id, why } => {
                    if let Some(c) = self.cancels.get(&attempt_id) {
                        c.interrupt(&why);
                    }
                }
                Effect::CloseSlots => self.slots.close(),
                Effect::Exit(e) => exit = Some(e),
            }
        }
        let state = &self.state;
        self.cancels.retain(|id, _| state.holds(id));
        exit
    }

    fn publish(&self) {
        let s = self.state.status();
        self.status_tx.send_if_modified(|old| {
            if *old == s {
                false
            } else {
                *old = s;
                true
            }
        });
    }

    /// Opens a session with the `at`-th coordinator, presenting `held` in its `Hello`.
    fn connect(&self, at: usize, held: Vec<pb::HeldLease>) -> Connecting {
        let endpoint = self.endpoints[at].clone();
        let token = self.config.token.clone();
        let hello = pb::Hello {
            worker_id: self.config.worker_id.clone(),
            slots: self.config.leases(),
            labels: self.config.advertised_labels().into_iter().collect(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            held_leases: held,
            instance_id: self.instance_id.clone(),
        };
        tracing::debug!(coordinator = %self.state.coordinator(), held = hello.held_leases.len(), "connecting");
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
        let url = self.state.coordinator().clone();
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

/// The opened (or refused) session of an open attempt to connect.
async fn opened(connecting: &mut Option<Connecting>) -> <Connecting as Future>::Output {
    match connecting {
        Some(c) => c.await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; for ever when `None` (a timer not set).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
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
