//! Remote mode: with `--coordinator URL` (or `AKBENCH_COORDINATOR`) the `run` commands become
//! calls to the coordinator's gRPC `Control` service (see docs/remote.md).
//!
//! - [`Remote`]: the URL and the bearer token, from the global flags.
//! - [`Client`]: one tonic client on one connection, driven by a current-thread runtime
//!   inside the command ([`block_on`]).
//! - [`from_status`]: the ONE mapping from a gRPC status (or a failed connection) to an
//!   error and so to an exit code.
//! - [`commands`]: the commands and [`commands::dispatch`], which runs a `run` command
//!   remotely or hands it back; [`view`]: the status projection as text and JSON;
//!   [`records`]: the record export; [`watch`]: how `run status --watch` draws updates.
//!
//! Layer: this file is the client, below `cmd::shared`; it imports nothing from `cmd` and
//! nothing from its own children (the dispatcher lives in [`commands`], the top layer).

pub mod commands;
mod reconcile;
pub mod records;
pub mod submit;
pub mod view;
pub mod watch;

use crate::cli::RemoteArgs;
use crate::exit::InputError;
use akbench_core::bounded_read::{Links, ReadKind};
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use akbench_worker::dial::{endpoint, DialError, TlsOptions};
use std::future::Future;
use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

/// The largest message sent or received (a 100,000-trial plan is about 100 MB of JSON; the
/// coordinator accepts up to 512 MiB).
pub const MAX_MESSAGE_BYTES: usize = 512 * 1024 * 1024;
/// How long connecting to the coordinator may take (TCP).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting may take in all: TCP, the TLS handshake and HTTP/2's start.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a call may take until its answer (a stream: its first message) arrives,
/// unless `--rpc-timeout` says otherwise.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(60);
/// The same for the calls that carry or account for a whole plan (`SubmitPlanStream`, the
/// unary `Reconcile`): a 100,000-trial plan is about 100 MB.
pub const LONG_RPC_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// HTTP/2 keepalive: a ping every this often on an open connection, and the connection
/// given up on when one is not answered within as long again. A coordinator that stops
/// answering during a stream (`run status --watch`, an export) is noticed within this.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// The coordinator and the credentials to use.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The gRPC URL, with its scheme.
    pub url: String,
    /// Further coordinators (replicas on the same database), tried in order after `url`
    /// when it cannot be reached (`--coordinator URL1,URL2`; docs/remote.md "Replicas").
    pub fallbacks: Vec<String>,
    token: Option<String>,
    tls: TlsOptions,
    allow_plaintext_token: bool,
    /// `--rpc-timeout`, when given: every call's deadline.
    rpc_timeout: Option<Duration>,
}

impl Remote {
    /// From the global flags: `url` is one URL or several comma-separated (replicas, tried
    /// in order); a bare `host:port` gets `http://`; the token comes from
    /// `--token`/`AKBENCH_TOKEN` or `--token-file`.
    pub fn new(url: &str, args: &RemoteArgs) -> anyhow::Result<Remote> {
        let mut urls = url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(|u| {
                let u = u.trim_end_matches('/');
                if u.contains("://") {
                    u.to_string()
                } else {
                    format!("http://{u}")
                }
            });
        let url = urls.next().ok_or_else(|| {
            InputError(format!(
                "failed to read --coordinator {url:?}: it names no URL; fix: pass a URL such \
                 as https://host:7400, or several comma-separated"
            ))
        })?;
        let fallbacks = urls.collect();
        let token = match (&args.token, &args.token_file) {
            (_, Some(path)) => {
                let text = ReadKind::Secret
                    .read_text(path, Links::Follow)
                    .map_err(|e| {
                        InputError(format!(
                        "failed to read the token file {}: it {e}; fix: pass a readable regular \
                         file holding the token (--token-file)",
                        path.display()
                    ))
                    })?;
                Some(text.trim().to_string())
            }
            (Some(t), None) => Some(t.trim().to_string()),
            (None, None) => None,
        };
        let remote = Remote {
            url,
            fallbacks,
            token: token.filter(|t| !t.is_empty()),
            tls: TlsOptions {
                ca_file: args.ca_file.clone(),
                ..TlsOptions::default()
            },
            allow_plaintext_token: args.allow_plaintext_token,
            rpc_timeout: args.rpc_timeout.map(Duration::from_secs_f64),
        };
        // Refuse bad URLs, TLS flags on http:// and plaintext tokens before anything is sent.
        for url in remote.urls() {
            remote.endpoint(url)?;
        }
        Ok(remote)
    }

    /// Every coordinator, in the order tried.
    pub fn urls(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.url).chain(&self.fallbacks)
    }

    fn endpoint(&self, url: &str) -> anyhow::Result<Endpoint> {
        endpoint(
            url,
            &self.tls,
            self.token.is_some(),
            self.allow_plaintext_token,
        )
        .map_err(|e: DialError| InputError(e.to_string()).into())
    }

    /// Connects to the first listed coordinator that can be reached (once; every call of
    /// the command reuses the connection). When none can, the error names the last one
    /// tried.
    pub async fn connect(&self) -> anyhow::Result<Client> {
        let mut last = None;
        for url in self.urls() {
            match self.connect_to(url).await {
                Ok(client) => return Ok(client),
                Err(e) => {
                    if !self.fallbacks.is_empty() {
                        tracing::warn!(coordinator = %url, "{e:#}; trying the next coordinator");
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no coordinator to connect to")))
    }

    /// After the connection to `current` broke mid-command: connects to the first coordinator
    /// that can be reached in list order starting AFTER `current` and wrapping round to it
    /// last (a replica that was just lost is tried only when no other answers). With one
    /// coordinator this reconnects to it.
    pub async fn reconnect_after(&self, current: &str) -> anyhow::Result<Client> {
        let urls: Vec<&String> = self.urls().collect();
        let at = urls.iter().position(|u| *u == current).unwrap_or(0);
        let mut last = None;
        for i in 1..=urls.len() {
            let url = urls[(at + i) % urls.len()];
            match self.connect_to(url).await {
                Ok(client) => return Ok(client),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no coordinator to connect to")))
    }

    async fn connect_to(&self, url: &str) -> anyhow::Result<Client> {
        let endpoint = self
            .endpoint(url)?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(KEEPALIVE)
            .keep_alive_timeout(KEEPALIVE)
            .keep_alive_while_idle(true);
        let connect = endpoint.connect();
        // The connect timeout covers TCP only: a TLS server that never answers the
        // handshake would hold the command for ever.
        let handshake = self.rpc_timeout.unwrap_or(HANDSHAKE_TIMEOUT);
        let channel = tokio::time::timeout(handshake, connect)
            .await
            .map_err(|_| silent(url, handshake, "connecting"))?
            .map_err(|e| {
                use std::error::Error as _;
                let mut why = e.to_string();
                let mut source = e.source();
                while let Some(s) = source {
                    let s_text = s.to_string();
                    if !why.contains(&s_text) {
                        why = format!("{why}: {s_text}");
                    }
                    source = s.source();
                }
                unavailable(url, &why)
            })?;
        let header = match &self.token {
            Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| {
                InputError(
                    "failed to use the token: it holds characters a header cannot carry; fix: \
                     check --token / --token-file / AKBENCH_TOKEN"
                        .into(),
                )
            })?),
            None => None,
        };
        Ok(Client {
            inner: ControlClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            header,
            url: url.to_string(),
            has_token: self.token.is_some(),
            deadline: self.rpc_timeout.unwrap_or(RPC_TIMEOUT),
            long_deadline: self.rpc_timeout.unwrap_or(LONG_RPC_TIMEOUT),
        })
    }
}

/// A coordinator that accepted the connection and then did not answer within `waited`
/// (exit 3).
fn silent(url: &str, waited: Duration, doing: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "the coordinator at {url} did not answer within {} s while {doing}: it accepted the \
         connection but sent nothing back; fix: check that it is running and healthy (its \
         /healthz), that {url} is its gRPC port (not its HTTP port) and whether it needs \
         https://; a call that is slow but alive takes a longer --rpc-timeout \
         (AKBENCH_RPC_TIMEOUT)",
        akbench_core::limits::show_f64(waited.as_secs_f64())
    )
}

/// A connected `Control` client that adds the bearer token to every request.
#[derive(Debug, Clone)]
pub struct Client {
    /// The generated client.
    pub inner: ControlClient<Channel>,
    header: Option<MetadataValue<Ascii>>,
    url: String,
    has_token: bool,
    /// Each call's deadline until its answer (a stream: its headers) arrives.
    deadline: Duration,
    /// The deadline of [`Client::request_long`].
    long_deadline: Duration,
}

impl Client {
    /// `message` as a request carrying the token, with the call's deadline ([`RPC_TIMEOUT`]
    /// or `--rpc-timeout`). A stream's later messages are not under it: HTTP/2 keepalive
    /// ([`KEEPALIVE`]) notices a coordinator gone silent during a stream.
    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut r = self.untimed(message);
        r.set_timeout(self.deadline);
        r
    }

    /// [`Client::request`] for a call that carries or accounts for a whole plan
    /// ([`LONG_RPC_TIMEOUT`] unless `--rpc-timeout` is given).
    pub fn request_long<T>(&self, message: T) -> Request<T> {
        let mut r = self.untimed(message);
        r.set_timeout(self.long_deadline);
        r
    }

    fn untimed<T>(&self, message: T) -> Request<T> {
        let mut r = Request::new(message);
        if let Some(h) = &self.header {
            r.metadata_mut().insert("authorization", h.clone());
        }
        akbench_telemetry::inject(r.metadata_mut());
        r
    }

    /// The error for a failed call (a call past its deadline names the coordinator and
    /// what to check).
    pub fn error(&self, status: Status) -> anyhow::Error {
        if timed_out(&status) {
            return silent(&self.url, self.deadline, "waiting for an answer");
        }
        from_status(&status, &self.url, self.has_token)
    }

    /// The coordinator's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One run's summary and, with `documents`, its spec and plan.
    pub async fn get_run(&self, run: &str, documents: bool) -> anyhow::Result<pb::GetRunResponse> {
        let mut c = self.inner.clone();
        c.get_run(self.request(pb::GetRunRequest {
            run: run.to_string(),
            include_documents: documents,
        }))
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| self.error(s))
    }
}

/// Maps a gRPC status to an error, and so to an exit code (see `exit::code_for`). This is
/// the one place that decides:
///
/// - NOT_FOUND, INVALID_ARGUMENT, ALREADY_EXISTS, FAILED_PRECONDITION: exit 2, with the
///   server's message (it already says what failed and how to fix it);
/// - UNAUTHENTICATED, PERMISSION_DENIED: exit 2, with a hint about the token;
/// - UNAVAILABLE (the coordinator or a dependency of it is down, the connection failed):
///   exit 3, naming the coordinator URL;
/// - anything else (INTERNAL, UNKNOWN, ...): exit 3.
pub fn from_status(status: &Status, url: &str, has_token: bool) -> anyhow::Error {
    let detailed = with_sources(status);
    let message = detailed.as_str();
    match status.code() {
        Code::NotFound | Code::InvalidArgument | Code::AlreadyExists | Code::FailedPrecondition => {
            InputError(message.to_string()).into()
        }
        Code::Unauthenticated | Code::PermissionDenied => {
            let sent = if has_token {
                "the token sent was refused"
            } else {
                "no token was sent"
            };
            InputError(format!(
                "{message}\nhint: {sent}; the coordinator at {url} wants a bearer token: pass \
                 --token-file FILE or set AKBENCH_TOKEN (an operator token for plan, submit, \
                 start, resume and cancel; a viewer token is enough to read)"
            ))
            .into()
        }
        Code::Unavailable => unavailable(url, message),
        Code::Unknown | Code::Internal if closed_plaintext(url, message) => {
            unavailable(url, message)
        }
        code => anyhow::anyhow!(
            "the coordinator at {url} failed ({}): {message}",
            code.description()
        ),
    }
}

/// Whether `status` is a call's deadline passing (tonic's client or the server).
fn timed_out(status: &Status) -> bool {
    status.code() == Code::DeadlineExceeded
        || (status.code() == Code::Cancelled && status.message().contains("Timeout expired"))
}

/// The status's message followed by its sources (a transport error's cause, such as
/// `connection reset by peer`, is only there).
fn with_sources(status: &Status) -> String {
    use std::error::Error as _;
    let mut text = status.message().to_string();
    let mut source = status.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text = format!("{text}: {s_text}");
        }
        source = s.source();
    }
    text
}

/// Whether `why` says the server broke off a plaintext (`http://`) connection: what a TLS
/// server does with a client that speaks plaintext HTTP/2 to it (it closes the connection,
/// or answers with a TLS alert the client reads as a malformed frame).
fn closed_plaintext(url: &str, why: &str) -> bool {
    let why = why.to_ascii_lowercase();
    url.starts_with("http://")
        && [
            "broken pipe",
            "connection reset",
            "closed",
            "frame with invalid size",
            "protocol error",
            "connection error",
            "unexpected end of file",
            "unexpected eof",
        ]
        .iter()
        .any(|p| why.contains(p))
}

/// The coordinator cannot be reached or cannot serve now (exit 3). A plaintext connection
/// the server broke off is named as such, with the likely cause: the server speaks TLS.
fn unavailable(url: &str, why: &str) -> anyhow::Error {
    if closed_plaintext(url, why) {
        let tls = url.replacen("http://", "https://", 1);
        return anyhow::anyhow!(
            "failed to talk to the coordinator at {url}: the server closed the connection \
             ({why}); it may expect TLS; fix: use {tls} (with --ca-file if its certificate \
             is not signed by a system root)"
        );
    }
    anyhow::anyhow!(
        "the coordinator at {url} is unavailable: {why}; fix: check that it is running and \
         reachable, and that --coordinator / AKBENCH_COORDINATOR names it, then retry"
    )
}

/// Runs `future` to completion on a current-thread runtime made for this command.
pub fn block_on<F: Future>(future: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("failed to start the async runtime: {e}"))?;
    Ok(rt.block_on(future))
}

/// The snake_case name of a run state (`planned`, `running`, ...).
pub fn state_name(state: i32) -> String {
    pb::RunState::try_from(state)
        .map(|s| {
            s.as_str_name()
                .trim_start_matches("RUN_STATE_")
                .to_ascii_lowercase()
        })
        .unwrap_or_else(|_| format!("unknown({state})"))
}

/// True when nothing more will happen to a run in `state`.
pub fn is_over(state: i32) -> bool {
    state == pb::RunState::Finished as i32 || state == pb::RunState::Cancelled as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_coordinators_are_tried_in_the_order_given_and_each_is_checked() {
        let args = RemoteArgs::default();
        let r = Remote::new(" 127.0.0.1:7400/, http://127.0.0.1:7402 ,", &args).unwrap();
        assert_eq!(
            r.urls().cloned().collect::<Vec<_>>(),
            ["http://127.0.0.1:7400", "http://127.0.0.1:7402"]
        );
        let one = Remote::new("http://127.0.0.1:7400", &args).unwrap();
        assert!(one.fallbacks.is_empty());
        let e = Remote::new(" , ", &args).unwrap_err().to_string();
        assert!(e.contains("names no URL"), "{e}");
        // A bad URL anywhere in the list is refused before anything is sent.
        let e = Remote::new("http://127.0.0.1:7400,ftp://x:1", &args)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ftp://x:1"), "{e}");
    }

    #[test]
    fn statuses_map_to_exit_codes() {
        let code = |c: Code| crate::exit::code_for(&from_status(&Status::new(c, "m"), "u", false));
        for c in [
            Code::NotFound,
            Code::InvalidArgument,
            Code::AlreadyExists,
            Code::FailedPrecondition,
            Code::Unauthenticated,
            Code::PermissionDenied,
        ] {
            assert_eq!(code(c), crate::exit::USAGE, "{c:?}");
        }
        for c in [Code::Unavailable, Code::Internal, Code::Unknown] {
            assert_eq!(code(c), crate::exit::FAILURE, "{c:?}");
        }
        let e = from_status(&Status::unauthenticated("no"), "http://x:1", true).to_string();
        assert!(e.contains("AKBENCH_TOKEN") && e.contains("refused"), "{e}");
        let e = from_status(&Status::unavailable("down"), "http://x:1", false).to_string();
        assert!(e.contains("http://x:1"), "{e}");
        // A plaintext connection broken off by the server: it may expect TLS.
        for (code, url, why, hint) in [
            (
                Code::Unknown,
                "http://x:1",
                "transport error: broken pipe",
                true,
            ),
            (
                Code::Unavailable,
                "http://x:1",
                "connection reset by peer",
                true,
            ),
            (
                Code::Internal,
                "http://x:1",
                "h2 protocol error: frame with invalid size",
                true,
            ),
            (Code::Unknown, "https://x:1", "broken pipe", false),
            (
                Code::Unavailable,
                "http://x:1",
                "tcp connect error: refused",
                false,
            ),
        ] {
            let e = from_status(&Status::new(code, why), url, false);
            let text = e.to_string();
            assert_eq!(
                text.contains("may expect TLS"),
                hint,
                "{code:?} {url} {why}: {text}"
            );
            assert_eq!(crate::exit::code_for(&e), crate::exit::FAILURE, "{text}");
        }
    }

    #[test]
    fn run_states_have_snake_case_names() {
        assert_eq!(state_name(pb::RunState::Planned as i32), "planned");
        assert_eq!(state_name(pb::RunState::Cancelling as i32), "cancelling");
        assert_eq!(state_name(42), "unknown(42)");
    }
}
