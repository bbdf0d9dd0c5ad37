//! What the session's connection loop hands to its state machine ([`Event`]) and what the
//! state machine asks the loop to do ([`Effect`]): the only two ways through the boundary
//! between the session's decisions ([`super::state`], pure) and its I/O (the loop in
//! [`super`], which owns the stream, the runners' channel, the cancel tokens and the timers).

use super::refusal::Refusal;
use super::Exit;
use crate::daemon::runner;
use akbench_proto::v1 as pb;
use akbench_proto::v1::worker_message::Body as Out;

/// Something that arrived: a select arm of the loop turns it into one of these and nothing
/// else.
#[derive(Debug)]
pub(in crate::daemon) enum Event {
    /// The daemon started: the first session is to be opened.
    Started,
    /// Drain was asked for by an operator ([`super::Handle::drain`], a signal); a
    /// coordinator's `Drain` arrives as a [`Event::Message`].
    Drain(String),
    /// What the runners reported since the last event, in the order they sent it.
    Runners(Vec<runner::Event>),
    /// The session stream opened (its `Hello` is sent; no `Welcome` yet).
    Opened,
    /// Opening a session failed, or timed out.
    OpenFailed(Refusal),
    /// A message of the coordinator on the open stream.
    Message(pb::CoordinatorMessage),
    /// The stream ended: `None` when the coordinator closed it, else how it failed.
    StreamEnded(Option<Refusal>),
    /// A timer of [`super::state::Timers`] ran out.
    Timer(Timer),
}

/// The timers the state machine sets ([`super::state::State::timers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::daemon) enum Timer {
    /// Held transitions are due ([`crate::daemon::linger`]).
    Linger,
    /// The heartbeat is due.
    Heartbeat,
    /// The reconnect backoff is over: open a session again.
    Reconnect,
    /// The drain's grace period is over: running attempts are interrupted.
    Grace,
    /// The drained daemon could not deliver what it owes within
    /// [`super::FLUSH_TIMEOUT`].
    Flush,
}

/// Something to do, decided by [`super::state::State::handle_event`]; the loop runs them in
/// order.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::daemon) enum Effect {
    /// Send a message on the open stream.
    Send(Out),
    /// Open a session with the `at`-th coordinator, presenting `held` in its `Hello`.
    Connect { at: usize, held: Vec<pb::HeldLease> },
    /// Drop the stream (closing the request stream ends the session on the coordinator).
    CloseStream,
    /// Run an assignment: its runner waits for a slot, then runs it.
    Start(pb::Assignment),
    /// End an assignment without running it (`infrastructure_error` with `cause`).
    EndUnstarted {
        assignment: pb::Assignment,
        cause: String,
    },
    /// Cancel an attempt (the coordinator's cancel, a lost lease, a refused worker).
    Cancel(String),
    /// Interrupt an attempt: the worker's doing, so it ends `infrastructure_error`
    /// (core::dispatch::Stop) and is retried within its budget.
    Interrupt { attempt_id: String, why: String },
    /// Close the slots: prefetched assignments still waiting for one never start.
    CloseSlots,
    /// End the daemon.
    Exit(Exit),
}
