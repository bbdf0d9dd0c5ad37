//! The worker daemon: a client of the coordinator's `Workers.Session` stream that runs every
//! assignment with the same [`Orchestrator`](crate::orchestrator::Orchestrator) as
//! `akbench run single`, streams its transitions as they happen, uploads its record and
//! artifacts, and holds nothing the coordinator cannot take back.
//!
//! # Protocol as implemented
//!
//! - **Connect**: HTTP/2 with keepalive pings every 10 s (5 s timeout, also while idle), so a
//!   dead connection is noticed within seconds; `authorization: Bearer <token>` in the
//!   metadata when a token is configured. The first message is `Hello{worker_id, slots,
//!   labels, version, held_leases}`; nothing else is sent before the `Welcome`.
//! - **Welcome**: its `heartbeat_interval_ms` sets the heartbeat period; every attempt listed
//!   in `revoked_attempt_ids` is cancelled (its agent's process group is killed) and
//!   forgotten: nothing more is sent about it. Then everything still owed is sent again.
//! - **Heartbeat** every interval (and at once when draining starts): free slots (0 while
//!   draining), `draining`, and every lease still held; a draining worker is offered nothing.
//! - **Assignment**: the work item is decoded ([`WorkItem::decode`](akbench_core::work::WorkItem::decode)) and prepared
//!   ([`crate::trial::prepare`]); a bad work item, a failed preparation, an unknown kind or an
//!   unsafe trial key ends the attempt `invalid_configuration` with the cause, never the
//!   daemon. A `GRADE` assignment grades the recorded attempt its work item carries without
//!   running the agent (`daemon::grade`: the diff from the artifact store, the workspace
//!   rebuilt and checked against the recorded fingerprints). Otherwise the attempt runs on
//!   a blocking thread with its own [`CancelToken`](crate::process::CancelToken); its transitions are sent as
//!   `TransitionBatch{attempt_id, epoch, [transition]}` (wire `seq` = record `seq` + 1, so
//!   from 1): the first at once, later ones gathered for up to [`linger::LINGER`] (100 ms)
//!   into one batch, and whatever is held goes at once with the record when the attempt
//!   ends (the rule: [`linger`]). Grading follows the work item (`trial.evaluation.grade`). Artifacts go to
//!   `<out>/<trial key>/a<n>/` (with `attempt_record.json`) and, when an artifact store is
//!   configured, are copied to it under the same key and removed locally. Then
//!   `RecordUpload{record_json = canonical JSON of the AttemptRecord, digest}` and
//!   `AttemptFinished{terminal_state, cause}` are sent, in that order.
//! - **Acks**: every message about an attempt stays owed until acknowledged (transitions up
//!   to the acknowledged `seq`). On reconnect the owed messages are sent again: transitions
//!   are idempotent by (attempt, seq), records by digest.
//! - **Cancel**: the attempt's token is cancelled; it ends `cancelled` and is reported.
//! - **Refusal**: `STALE_EPOCH` or `UNKNOWN_ATTEMPT`: the lease is lost; the attempt is
//!   cancelled and everything owed about it is dropped. `UNAVAILABLE`: sent again on the next
//!   heartbeat. Any other code (a message the coordinator will never accept): logged and
//!   that message dropped.
//! - **Reconnect**: when the stream fails or ends, attempts keep running; the daemon
//!   reconnects with exponential backoff (100 ms doubling to 5 s, and to at most the
//!   heartbeat period, +-20% jitter), presents its held leases in `Hello` and re-sends what
//!   is owed. Every `Hello` of one daemon carries the same random `instance_id`, so the
//!   coordinator lets it take over its own stale session at once while another process
//!   with the same worker id is refused (`ALREADY_EXISTS`).
//! - **Refused**: a session refused with `UNAUTHENTICATED` or `PERMISSION_DENIED` (a bad
//!   credential, a certificate whose name is not the worker id, an id bound to another
//!   credential) or `ALREADY_EXISTS` (another live session holds the worker id) is tried
//!   again with the backoff; after 3 such refusals in a row
//!   ([`akbench_core::identity::after_refusal`]) the daemon logs why, cancels what runs and
//!   exits (4 or 5) instead of retrying for ever. Other failures are retried for ever.
//! - **Drain** (the coordinator's `Drain`, SIGTERM or SIGINT, or [`Handle::drain`]): no new
//!   work (free slots 0; an assignment that arrives anyway is not started and is reported
//!   `infrastructure_error`, "worker draining", so the coordinator can re-queue it within its
//!   retry budget); running attempts get `--grace` to finish, then are cancelled; what is owed
//!   is delivered (for up to [`FLUSH_TIMEOUT`] more), then the daemon exits. A second signal
//!   ends the grace period at once.
//!
//! # Exit codes of `akbench-worker`
//!
//! - `0`: drained; everything owed was acknowledged.
//! - `1`: could not start (bad configuration, unreadable token file, artifact store, or the
//!   `sandbox` runtime cannot run here: the message names the missing kernel feature or
//!   permission; `--allow-unsandboxed` starts anyway).
//! - `2`: bad command line (from clap).
//! - `3`: drained, but some owed messages could not be delivered before the deadline (the
//!   coordinator was unreachable); their leases will expire and be reaped.
//! - `4`: the coordinator refused the worker's credential (`UNAUTHENTICATED` or
//!   `PERMISSION_DENIED`) 3 times in a row.
//! - `5`: another live session held the worker id (`ALREADY_EXISTS`) 3 times in a row.
//! - `6`: the TLS handshake failed over a certificate 3 times in a row: the coordinator
//!   refused the worker's client certificate, or the worker did not accept the
//!   coordinator's (`akbench_core::identity::certificate_refusal`).

mod artifacts;
mod cli;
mod collect;
mod config;
mod grade;
pub mod linger;
pub mod metrics;
mod preflight;
mod runner;
mod session;
mod spans;

pub use artifacts::{ArtifactError, ArtifactStore};
pub use cli::{main_with_args, Args};
pub use config::{ConfigError, WorkerConfig};
pub use session::{Daemon, Exit, Handle, Status, FLUSH_TIMEOUT};
