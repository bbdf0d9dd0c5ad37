//! One attempt the worker holds and what it still owes the coordinator about it: its
//! transitions until acknowledged, its record and its finish. Pure bookkeeping: the times
//! it is given say when transitions were recorded and whether their linger
//! ([`crate::daemon::linger`]) is over.

use crate::daemon::linger;
use akbench_proto::v1 as pb;
use akbench_proto::v1::worker_message::Body as Out;
use tokio::time::Instant;

/// One attempt this worker holds, and what it still owes about it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub epoch: i64,
    /// The runner has not reported `Done` yet.
    pub running: bool,
    /// The lease is gone: nothing more is sent; forgotten once the runner ends.
    pub lost: bool,
    /// Unacknowledged transitions, in seq order.
    pub transitions: Vec<pb::Transition>,
    /// Highest seq sent on the current stream.
    pub sent_upto: u32,
    /// When the oldest transition not sent yet was recorded (see [`linger`]).
    pub held_since: Option<Instant>,
    pub record: Option<pb::RecordUpload>,
    pub record_sent: bool,
    pub finished: Option<pb::AttemptFinished>,
    pub finished_sent: bool,
    /// Send everything owed again at the next heartbeat (`UNAVAILABLE`).
    pub retry: bool,
    /// W3C trace context of the attempt's span, sent with every report about it.
    pub traceparent: String,
}

impl Entry {
    pub fn new(epoch: i64) -> Self {
        Self {
            epoch,
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

    /// Its runner ended and nothing about it is owed any more (or its lease is gone).
    pub fn settled(&self) -> bool {
        !self.running
            && (self.lost
                || (self.transitions.is_empty()
                    && self.record.is_none()
                    && self.finished.is_none()))
    }

    /// When its unsent transitions are due ([`linger::due`]); `None` when none are held.
    pub fn due(&self, now: Instant) -> Option<Instant> {
        let first = self.transitions.iter().find(|t| t.seq > self.sent_upto)?;
        Some(linger::due(
            first.seq,
            !self.running,
            self.held_since.unwrap_or(now),
        ))
    }

    /// Everything owed is to be sent again (a new stream, or the coordinator was
    /// unavailable).
    pub fn resend_all(&mut self) {
        self.sent_upto = 0;
        self.record_sent = false;
        self.finished_sent = false;
        self.retry = false;
    }

    /// Forgets what a refused or acknowledged message of `subject` carried: for
    /// transitions, those up to `seq`.
    pub fn forget(&mut self, subject: i32, seq: u32) {
        match pb::Subject::try_from(subject) {
            Ok(pb::Subject::Transitions) => self.transitions.retain(|t| t.seq > seq),
            Ok(pb::Subject::Record) => self.record = None,
            Ok(pb::Subject::Finished) => self.finished = None,
            _ => {}
        }
    }

    /// The messages about `attempt_id` not sent on this stream yet, marked sent:
    /// everything, or with `due_by`, the transitions only once their linger is over
    /// (records and finishes always).
    pub fn unsent(&mut self, attempt_id: &str, due_by: Option<Instant>) -> Vec<Out> {
        let mut out = Vec::new();
        if self.lost {
            return out;
        }
        let new: Vec<pb::Transition> = self
            .transitions
            .iter()
            .filter(|t| t.seq > self.sent_upto)
            .cloned()
            .collect();
        let due = match due_by {
            Some(now) => self.due(now).is_some_and(|d| d <= now),
            None => true,
        };
        if let (Some(last), true) = (new.last(), due) {
            self.sent_upto = last.seq;
            self.held_since = None;
            out.push(Out::Transitions(pb::TransitionBatch {
                attempt_id: attempt_id.to_string(),
                epoch: self.epoch,
                transitions: new,
                traceparent: self.traceparent.clone(),
            }));
        }
        if let (Some(r), false) = (&self.record, self.record_sent) {
            self.record_sent = true;
            out.push(Out::Record(r.clone()));
        }
        if let (Some(f), false) = (&self.finished, self.finished_sent) {
            self.finished_sent = true;
            out.push(Out::Finished(f.clone()));
        }
        out
    }
}
