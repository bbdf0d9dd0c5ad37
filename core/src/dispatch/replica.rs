//! Lease liveness across coordinator replicas: which replica's reaper decides a lease whose
//! stored expiry passed.
//!
//! Every replica shares the database; each owns only its worker sessions and what it heard
//! on them (the heard set [`super::reap`] reads). Heartbeats store a lease's expiry (TTL
//! after the heartbeat), so a worker heartbeating through any replica keeps its leases out
//! of every reaper's sight. A stored expiry can pass while the worker was heard: the
//! database could not store the heartbeats (down, or frozen). Only the replica holding the
//! worker's session knows that, so another replica leaves such a lease to it while that
//! replica is alive ([`Holder::OtherLive`]). A replica marks itself alive in the database on
//! every reaper pass; it is judged dead when it missed marking for a TTL while the judging
//! replica kept marking ([`replica_alive`]: measured against the judge's own previous mark,
//! never against the clock, so a database frozen for both counts against neither). The
//! leases of a dead replica's sessions are then decided by the stored expiry like any other
//! (their workers reconnected elsewhere and re-presented them, or they are taken back).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{reap, LeaseFate};

/// Whose heard set speaks for a lease's worker, as one replica's reaper sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// The worker's session is on this replica.
    Here,
    /// The worker's session is open on another replica that is alive: that replica decides.
    OtherLive,
    /// No session of the worker is open on a live replica (it disconnected, never had one,
    /// or its replica died): the stored expiry (and this replica's heard set) decide.
    Nobody,
}

/// Whether replica B, that last marked itself alive at `seen`, is alive for replica A whose
/// previous mark (before the pass judging) was at `judge_previous`: B marked within `ttl`
/// before it. A judge with no previous mark (its first pass) takes every replica for alive.
pub fn replica_alive(
    seen: DateTime<Utc>,
    judge_previous: Option<DateTime<Utc>>,
    ttl: Duration,
) -> bool {
    let Some(previous) = judge_previous else {
        return true;
    };
    let ttl = chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX);
    match seen.checked_add_signed(ttl) {
        Some(until) => until > previous,
        None => true,
    }
}

/// The holder of a lease's worker for the replica judging: `session` is the replica of the
/// worker's last session (`None`: never had one) with that replica's last mark
/// (`None`: no mark stored), `disconnected` whether that session ended, `here` whether
/// `session` is the judging replica, and `judge_previous` the judge's previous mark.
pub fn holder(
    session: Option<(bool, Option<DateTime<Utc>>)>,
    disconnected: bool,
    judge_previous: Option<DateTime<Utc>>,
    ttl: Duration,
) -> Holder {
    match session {
        _ if disconnected => Holder::Nobody,
        None => Holder::Nobody,
        Some((true, _)) => Holder::Here,
        // No mark at all (registering a session marks its replica): not a live replica.
        Some((false, None)) => Holder::Nobody,
        Some((false, Some(seen))) => {
            if replica_alive(seen, judge_previous, ttl) {
                Holder::OtherLive
            } else {
                Holder::Nobody
            }
        }
    }
}

/// The reaper's rule across replicas, for a lease whose stored expiry `stored` passed at
/// `now`: left to the replica holding its worker's session while that replica is alive
/// ([`LeaseFate::Theirs`]), else [`reap`] with this replica's `heard`.
pub fn reap_across(
    stored: DateTime<Utc>,
    heard: Option<DateTime<Utc>>,
    holder: Holder,
    now: DateTime<Utc>,
    ttl: Duration,
) -> LeaseFate {
    match holder {
        Holder::OtherLive => LeaseFate::Theirs,
        Holder::Here | Holder::Nobody => reap(stored, heard, now, ttl),
    }
}

/// How many TTLs a replica must have missed marking itself, as its judge counts them (see
/// [`replica_alive`]), before its row is deleted (`replicas` would otherwise grow by one row
/// per coordinator start forever). A replica already counts as dead after one TTL; the
/// margin keeps a recently dead one visible to an operator reading the table. A forgotten
/// replica that comes back marks itself again.
pub const FORGET_AFTER_TTLS: u32 = 10;

/// Whether the row of replica B, last marked at `seen`, may be deleted by replica A whose
/// previous mark was `judge_previous`: B missed marking for [`FORGET_AFTER_TTLS`] TTLs while
/// A kept marking. A judge on its first pass forgets nobody.
pub fn forgotten(
    seen: DateTime<Utc>,
    judge_previous: Option<DateTime<Utc>>,
    ttl: Duration,
) -> bool {
    judge_previous.is_some() && !replica_alive(seen, judge_previous, ttl * FORGET_AFTER_TTLS)
}

/// Another replica's last mark, with the lease TTL it runs with (`None`: marked before TTLs
/// were recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// The replica.
    pub replica: String,
    /// Its last mark (the scheduler's clock).
    pub seen: DateTime<Utc>,
    /// Its `--lease-ttl-ms`.
    pub ttl: Option<Duration>,
}

/// The first live replica (marked within its own TTL before `now`) whose lease TTL differs
/// from `ttl`: replicas judge each other's marks and leases by their own TTL, so a replica
/// with another TTL would reap too early or too late. A coordinator refuses to start then.
pub fn ttl_conflict(others: &[Marked], now: DateTime<Utc>, ttl: Duration) -> Option<&Marked> {
    others.iter().find(|m| {
        let Some(theirs) = m.ttl else {
            return false;
        };
        theirs != ttl && replica_alive(m.seen, Some(now), theirs)
    })
}
