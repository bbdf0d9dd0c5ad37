//! The dispatch policy, pure: run states, the retry rule (infrastructure only, within budget,
//! bounded jittered exponential backoff, never while cancelling), which worker may take
//! which item (alive means heard from recently; a rescued trial does not go back to the
//! worker that lost it while another can take it), which leases the reaper may take back,
//! and how a reported terminal state counts for its trial.
//!
//! The coordinator loads typed rows, calls these functions and persists what they return:
//! the report path decides acceptance with [`current`], [`accept_finish`] and
//! [`accept_record`] and every settle with [`settle`] (`scheduler::apply`, over the
//! snapshot one statement loads, applied by one guarded statement); the reaper decides with
//! [`reap`] and [`close_lost`] and settles through the same path; a run's end is decided
//! with [`RunState::when_idle`] over the locked run's state (`finish_runs.sql` loads it,
//! `end_runs.sql` applies the decision). The coordinator's tests run this module's tables against its PostgreSQL path: the retry
//! table against the report path's settle and the acceptance table against the report path
//! (`coordinator/tests/faults.rs`, `coordinator/tests/acceptance.rs`), and the run-ending
//! table ([`RunState::when_idle`]) against the run-ending path (`faults.rs`).
//!
//! Every change of a run's or work item's state is decided by [`machine`] (one table of
//! states and events, applied by guarded statements); [`memory`] is the same dispatch over
//! memory (`sweep --local`). Both stores apply it behind one trait, [`store::DispatchStore`],
//! and one table walks both ([`store::conformance`]).
//!
//! Which replica's reaper decides a lease (coordinator replicas on one database) is
//! [`replica`].
//!
//! How runs share the workers (priority, then weighted fair share of the live leases) is
//! [`share`].
//!
//! Randomness (backoff jitter) and time come in as arguments: nothing here reads a clock.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::lifecycle::State;

pub mod hand_out;
pub mod machine;
pub mod memory;
pub mod replica;
pub mod share;
pub mod store;

#[cfg(test)]
mod tests;

/// The most infrastructure retries a plan may ask for per trial (`infrastructure_retries`).
/// Each retry re-runs an agent; more than this hides a broken environment behind hours of
/// backoff instead of reporting it.
pub const MAX_INFRASTRUCTURE_RETRIES: u32 = 10;

/// The coarse state of a run (`runs.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Planned, not started: no work items.
    Planned,
    /// Started: every planned trial has its work item.
    Running,
    /// Cancel requested; live attempts are being stopped.
    Cancelling,
    /// Cancelled; nothing live.
    Cancelled,
    /// Every work item is done.
    Finished,
}

impl RunState {
    /// Every state, in lifecycle order.
    pub const ALL: [RunState; 5] = [
        Self::Planned,
        Self::Running,
        Self::Cancelling,
        Self::Cancelled,
        Self::Finished,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Planned => "planned",
            Self::Running => "running",
            Self::Cancelling => "cancelling",
            Self::Cancelled => "cancelled",
            Self::Finished => "finished",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether the run is being cancelled or was: nothing is retried or started for it.
    pub fn is_cancelling(self) -> bool {
        matches!(self, Self::Cancelling | Self::Cancelled)
    }

    /// Whether the run has ended (nothing ready or live).
    pub fn is_ended(self) -> bool {
        matches!(self, Self::Cancelled | Self::Finished)
    }

    /// The state a run with nothing ready or live moves to, if it moves: a running run
    /// finishes, a cancelling one is cancelled. `all_enqueued` is false while its work items
    /// are still being created: then nothing ends it.
    pub fn when_idle(self, all_enqueued: bool) -> Option<RunState> {
        if !all_enqueued {
            return None;
        }
        match self {
            Self::Running => Some(Self::Finished),
            Self::Cancelling => Some(Self::Cancelled),
            _ => None,
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a retry budget is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "infrastructure_retries {0} is more than the maximum {MAX_INFRASTRUCTURE_RETRIES}: \
     lower it (a broken environment should be reported, not retried for hours)"
)]
pub struct TooManyRetries(pub u64);

/// Checks a requested `infrastructure_retries`.
pub fn check_retries(requested: u64) -> Result<u32, TooManyRetries> {
    match u32::try_from(requested) {
        Ok(n) if n <= MAX_INFRASTRUCTURE_RETRIES => Ok(n),
        _ => Err(TooManyRetries(requested)),
    }
}

/// Bounded exponential backoff between infrastructure retries of one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first retry (before jitter).
    pub base: Duration,
    /// No delay is longer than this.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 2 s, doubling, at most 1 min: ten retries wait at most about 6 minutes in all.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(2),
            cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// No delay at all (tests and `sweep --local` smoke runs may ask for it).
    pub const NONE: Backoff = Backoff {
        base: Duration::ZERO,
        cap: Duration::ZERO,
    };

    /// The delay before retry number `retry` (1 for the first), before jitter:
    /// `min(cap, base * 2^(retry-1))`.
    pub fn nominal(&self, retry: u32) -> Duration {
        let shift = retry.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << shift).min(self.cap)
    }

    /// The jittered delay: `nominal * (0.5 + jitter / 2)` with `jitter` in `[0, 1)` drawn
    /// by the caller ("equal jitter": never less than half, never more than the nominal
    /// delay, so retries of trials that failed together spread out).
    pub fn delay(&self, retry: u32, jitter: f64) -> Duration {
        self.nominal(retry).mul_f64(Self::jitter_factor(jitter))
    }

    /// The factor a draw `jitter` in `[0, 1)` applies to the nominal delay: `0.5 + jitter/2`
    /// (out-of-range or non-finite draws are clamped).
    pub fn jitter_factor(jitter: f64) -> f64 {
        let j = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        0.5 + j / 2.0
    }
}

/// What the coordinator knows about a trial whose live attempt just ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// The attempt's terminal state as reported (or recorded by the reaper).
    pub terminal: State,
    /// Attempts made so far for this trial since its budget was last renewed, this one
    /// included.
    pub attempts_used: u32,
    /// Infrastructure retries allowed.
    pub retry_budget: u32,
    /// The run's state.
    pub run: RunState,
}

/// What becomes of the trial.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Settlement {
    /// Back to the queue: a new attempt after `after`.
    Retry {
        /// The backoff delay.
        after: Duration,
    },
    /// The trial is done with this outcome.
    Done(State),
}

/// Who stopped an attempt before it ended by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The coordinator's `Cancel`: a user's cancel of the run, a budget stop.
    Cancelled,
    /// Its own worker (why): a drain whose grace ran out, a shutdown. Not the user's doing.
    Interrupted(String),
}

impl Stop {
    /// The lifecycle event and the cause of the attempt's end, stopped while `phase`
    /// ("while the agent ran", ...): `cancelled` only for the coordinator's cancel; an
    /// interruption by the worker is an `infrastructure_error` (retried within budget,
    /// counted as an infrastructure error by status, records and reconcile alike). The same
    /// rule as [`trial_terminal`], decided where the attempt ends so that its record says it.
    pub fn end(&self, phase: &str) -> (crate::lifecycle::Event, String) {
        use crate::lifecycle::Event;
        let phase = if phase.is_empty() {
            String::new()
        } else {
            format!(" {phase}")
        };
        match self {
            Self::Cancelled => (Event::Cancel, format!("cancelled{phase}")),
            Self::Interrupted(why) => (
                Event::InfrastructureFailed,
                format!("interrupted by its worker{phase}: {why}"),
            ),
        }
    }
}

/// How a reported terminal state counts for its trial: an attempt `cancelled` while its
/// run is not being cancelled was interrupted by its worker (a shutdown, a drain whose
/// grace ran out), never by the user: an infrastructure fact, retried and resumable.
pub fn trial_terminal(reported: State, run: RunState) -> State {
    if reported == State::Cancelled && !run.is_cancelling() {
        State::InfrastructureError
    } else {
        reported
    }
}

/// Whether an ended attempt's trial is tried again: infrastructure errors only (including
/// interruptions, see [`trial_terminal`]), within budget, never while the run is cancelling.
pub fn retries(e: &Ended) -> bool {
    trial_terminal(e.terminal, e.run) == State::InfrastructureError
        && e.attempts_used <= e.retry_budget
        && !e.run.is_cancelling()
}

/// The retry rule: see [`retries`]; the delay grows with the attempts used.
pub fn settle(e: &Ended, backoff: &Backoff, jitter: f64) -> Settlement {
    if retries(e) {
        Settlement::Retry {
            after: backoff.delay(e.attempts_used, jitter),
        }
    } else {
        Settlement::Done(trial_terminal(e.terminal, e.run))
    }
}

/// Whether a worker last heard from at `last_heard` is alive at `now`: it sent anything
/// (a heartbeat, a report) within `ttl`. An open stream alone says nothing: a frozen
/// process keeps its sockets open.
pub fn alive(last_heard: DateTime<Utc>, now: DateTime<Utc>, ttl: Duration) -> bool {
    match (now - last_heard).to_std() {
        Ok(silent) => silent < ttl,
        // Heard "in the future" (clock steps): alive.
        Err(_) => true,
    }
}

/// [`alive`], unless the worker was found silent after it was last heard: a lease of it
/// expired at `silenced` (its heartbeats, which extend leases, stopped for the TTL) no
/// earlier than `last_heard`. Any message counts as heard, heartbeats only extend leases, so
/// a report sent after the last heartbeat keeps `last_heard` ahead of the lease clock; it
/// must not keep a worker whose leases were just taken back for silence eligible for new
/// work. Hearing from the worker again makes it alive.
pub fn alive_unless_silenced(
    last_heard: DateTime<Utc>,
    silenced: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    ttl: Duration,
) -> bool {
    alive(last_heard, now, ttl) && silenced.is_none_or(|at| at < last_heard)
}

/// What dispatch knows about a worker when it might claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerView {
    /// Heard from within the TTL ([`alive`]).
    pub alive: bool,
    /// Asked to drain, or said it drains.
    pub draining: bool,
    /// Slots minus the attempts it holds.
    pub free_slots: u32,
}

/// Whether the worker gets new work at all.
pub fn may_claim(w: &WorkerView) -> bool {
    w.alive && !w.draining && w.free_slots > 0
}

/// Whether `worker` may take an item whose last attempt was taken back from `lost_by`:
/// not the worker that lost it while `another_eligible` (another worker may claim).
pub fn may_take(lost_by: Option<&str>, worker: &str, another_eligible: bool) -> bool {
    lost_by != Some(worker) || !another_eligible
}

/// What the reaper does with a lease whose stored expiry passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseFate {
    /// Its worker was heard holding it: it lives on, to expire at this instant (stored
    /// instead of the old expiry).
    Live(DateTime<Utc>),
    /// Its worker went silent: take it back.
    Reap,
    /// Its worker's session is on another live replica, which decides
    /// ([`replica::reap_across`]): left alone.
    Theirs,
}

/// The reaper's rule for a lease whose stored expiry `stored` passed at `now`: it expires
/// `ttl` after the later of that expiry's heartbeat and `heard`, the last heartbeat in which
/// this coordinator heard its worker list it (same attempt, same epoch), whether or not the
/// database took that heartbeat. A worker heard by the coordinator is never taken for
/// silent because the database was unavailable (down, or frozen while the coordinator's
/// session waited on it): the stored expiry is only as recent as the last heartbeat the
/// database could store.
pub fn reap(
    stored: DateTime<Utc>,
    heard: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    ttl: Duration,
) -> LeaseFate {
    let ttl = chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX);
    let expiry = match heard.and_then(|at| at.checked_add_signed(ttl)) {
        Some(heard_expiry) => stored.max(heard_expiry),
        None => stored,
    };
    if expiry <= now {
        LeaseFate::Reap
    } else {
        LeaseFate::Live(expiry)
    }
}

/// Why the coordinator took a lease back from its worker: the cause written on the attempt
/// says which, so an operator reads what happened, never "went silent" for a worker that
/// was heard to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Loss {
    /// Its lease expired: no heartbeat for the TTL.
    WentSilent,
    /// Its session broke and it did not come back within the grace.
    SessionBroke,
    /// It reconnected without the lease (it no longer holds the attempt).
    RevokedAtReconnect,
}

impl Loss {
    /// Every loss, for table tests.
    pub const ALL: [Loss; 3] = [
        Self::WentSilent,
        Self::SessionBroke,
        Self::RevokedAtReconnect,
    ];

    /// The stored name (`leases.released_because`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WentSilent => "went_silent",
            Self::SessionBroke => "session_broke",
            Self::RevokedAtReconnect => "revoked_at_reconnect",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The cause written on the attempt taken back from `worker`.
    pub fn cause(self, worker: &str) -> String {
        match self {
            Self::WentSilent => format!("lease expired: worker {worker} went silent"),
            Self::SessionBroke => format!(
                "lease released: the session of worker {worker} broke and it did not come back \
                 within the grace"
            ),
            Self::RevokedAtReconnect => {
                format!("lease revoked: worker {worker} reconnected without it")
            }
        }
    }
}

/// What the coordinator writes when it takes an attempt back from its worker (the reaper).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close {
    /// The transition to append to the attempt's stored history (`None`: it already ends
    /// there).
    pub step: Option<State>,
    /// The attempt's terminal state, which also settles its trial.
    pub terminal: State,
}

/// How an attempt in `state` (its last stored transition; a lease exists, so no finish was
/// accepted) is closed when its lease is taken back: `infrastructure_error` through the
/// lifecycle's [`Event::Lost`](crate::lifecycle::Event::Lost) step, appended after whatever
/// its worker last reported, a terminal state included (a `completed` whose record never
/// arrived is not a grade the coordinator holds). So every history the reaper writes is one
/// [`validate_path`](crate::lifecycle::validate_path), and so the record assembly, accepts.
pub fn close_lost(state: State) -> Close {
    use crate::lifecycle::{apply, Event};
    Close {
        step: apply(state, Event::Lost).ok(),
        terminal: State::InfrastructureError,
    }
}

/// What holds back work that has not started: a lease whose attempt has no transition yet
/// (a worker's prefetched assignment waiting for a slot, or one just assigned) is taken back
/// when its run's budget is spent or its provider route pauses, so that the stop holds for
/// prefetched work too (issue 28: a budget stop let two prefetched trials start after the
/// cap). A started attempt runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// The run's `execution.budget` is spent: the trial is cancelled with reason `budget`.
    BudgetSpent,
    /// The provider route is paused: the trial goes back to the queue (its retry budget
    /// untouched) and is claimed once the pause ends.
    RoutePaused(String),
}

impl Hold {
    /// The cause written on the revoked attempt (ended `cancelled`: the coordinator's doing).
    pub fn cause(&self) -> String {
        match self {
            Self::BudgetSpent => "revoked before it started: the run's budget is spent".to_string(),
            Self::RoutePaused(route) => {
                format!("revoked before it started: provider route {route} is paused; queued again")
            }
        }
    }
}

/// What a worker's report about an attempt meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptView {
    /// The attempt's current fencing epoch.
    pub epoch: i64,
    /// Its lease was taken back: every epoch of it is stale.
    pub fenced: bool,
    /// Its terminal state, when it ended.
    pub terminal: Option<State>,
}

/// The decision about one report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acceptance {
    /// Store it.
    Accept,
    /// Already stored identically: acknowledge, change nothing.
    Duplicate,
    /// From a worker that lost the lease: refuse, change nothing.
    Stale,
    /// Contradicts what was accepted: refuse (and quarantine records).
    Conflict,
}

/// Whether a report at `epoch` may touch the attempt at all: the attempt's own epoch (a
/// finished attempt keeps it, so its record may follow the finish) and not fenced (its lease
/// was taken back). Every report, transitions included, is refused as stale otherwise: a
/// late report never overwrites the attempt that replaced it.
pub fn current(a: &AttemptView, epoch: i64) -> bool {
    epoch == a.epoch && !a.fenced
}

/// Whether a finish report (`terminal` at `epoch`) is accepted: not [`current`] is stale,
/// a re-send of the accepted terminal state is a duplicate (whatever cause it carries: the
/// accepted one stays, nothing changes), a different terminal state a conflict.
pub fn accept_finish(a: &AttemptView, epoch: i64, terminal: State) -> Acceptance {
    if !current(a, epoch) {
        return Acceptance::Stale;
    }
    match a.terminal {
        None => Acceptance::Accept,
        Some(t) if t == terminal => Acceptance::Duplicate,
        Some(_) => Acceptance::Conflict,
    }
}

/// Whether a record upload at `epoch` is accepted: not [`current`] is stale; the same
/// digest again is a duplicate, another one a conflict.
pub fn accept_record(
    a: &AttemptView,
    epoch: i64,
    stored_digest: Option<&str>,
    digest: &str,
) -> Acceptance {
    if !current(a, epoch) {
        return Acceptance::Stale;
    }
    match stored_digest {
        None => Acceptance::Accept,
        Some(d) if d == digest => Acceptance::Duplicate,
        Some(_) => Acceptance::Conflict,
    }
}

/// The concurrency caps of one run (`execution.concurrency`) as they meet one candidate:
/// live attempts of the run, of the candidate's agent and of its provider route, and the
/// caps on each (`None`: uncapped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapView {
    /// Live attempts of the run.
    pub run_live: i64,
    /// `max_trials`.
    pub run_cap: Option<i64>,
    /// Live attempts of the candidate's agent.
    pub agent_live: i64,
    /// `per_agent` of the candidate's agent.
    pub agent_cap: Option<i64>,
    /// Live attempts of the candidate's provider route (0 without a route).
    pub route_live: i64,
    /// `per_provider_route` of its route (`None` without a route).
    pub route_cap: Option<i64>,
}

/// Live attempts of a run, of one agent and of one provider route (0 without a route), as
/// a candidate meets them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Live {
    /// Of the run.
    pub run: i64,
    /// Of the candidate's agent.
    pub agent: i64,
    /// Of the candidate's provider route.
    pub route: i64,
}

/// The concurrency caps of one run (`execution.concurrency`, widened to the database's
/// integers), in the one form dispatch admits by: the coordinator stores it (`runs.caps`,
/// these field names) and `sweep --local` holds it in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCaps {
    /// At most this many live attempts per agent label (`per_agent`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub per_agent: std::collections::BTreeMap<String, i64>,
    /// At most this many live attempts per provider route (`per_provider_route`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub per_provider: std::collections::BTreeMap<String, i64>,
    /// At most this many live attempts in the run (`max_trials`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_trials: Option<i64>,
}

impl RunCaps {
    /// Whether nothing is capped.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// What a candidate of `agent` on `route` meets: these caps and `live`.
    pub fn view(&self, agent: &str, route: Option<&str>, live: Live) -> CapView {
        CapView {
            run_live: live.run,
            run_cap: self.max_trials,
            agent_live: live.agent,
            agent_cap: self.per_agent.get(agent).copied(),
            route_live: if route.is_some() { live.route } else { 0 },
            route_cap: route.and_then(|r| self.per_provider.get(r).copied()),
        }
    }
}

/// The cap a candidate meets full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The run's `max_trials`.
    Run,
    /// The agent's `per_agent`.
    Agent,
    /// The route's `per_provider_route`.
    Route,
}

/// Whether one more live attempt fits the caps; the first full cap (run, agent, route)
/// otherwise. The coordinator's claim and `sweep --local` both admit through this.
pub fn within_caps(c: &CapView) -> Result<(), Full> {
    let full = |live: i64, cap: Option<i64>| cap.is_some_and(|cap| live >= cap);
    if full(c.run_live, c.run_cap) {
        Err(Full::Run)
    } else if full(c.agent_live, c.agent_cap) {
        Err(Full::Agent)
    } else if full(c.route_live, c.route_cap) {
        Err(Full::Route)
    } else {
        Ok(())
    }
}
