//! Lease timing, in one type: how long a lease lives without a heartbeat (TTL), how often a
//! worker heartbeats (the interval the coordinator asks for in `Welcome`), how often the
//! reaper looks for expired leases, and how long a worker whose session broke has to come
//! back before its leases are released, how a worker spaces its attempts to open a session
//! (the reconnect schedule), and how long a coordinator that starts keeps the leases from
//! before its start (the restart grace, which covers that schedule). Every value is derived
//! here from the TTL and the optional heartbeat interval, and a combination that cannot work
//! is refused before anything starts.

use std::time::Duration;

/// The coordinator's lease TTL when `--lease-ttl-ms` is not given, in milliseconds: the one
/// place this default is written (the coordinator's flag, its local configuration and the
/// workers service's defaults use it). Inside [`crate::ranges::LEASE_TTL_MS`].
pub const DEFAULT_LEASE_TTL_MS: u64 = 30_000;

/// The lease TTL of the embedded system (`akbench sweep`, `akbench up`) when
/// `--lease-ttl-ms` is not given, in milliseconds: shorter, its workers are local.
pub const DEFAULT_EMBEDDED_LEASE_TTL_MS: u64 = 10_000;

/// `--lease-ttl-ms` as a flag gives it: a whole number of milliseconds inside
/// [`crate::ranges::LEASE_TTL_MS`] (a clap `value_parser` in every binary that takes it).
pub fn parse_lease_ttl_ms(text: &str) -> Result<u64, String> {
    crate::ranges::LEASE_TTL_MS
        .parse_whole(text)
        .map_err(|e| e.to_string())
}

/// The delay before a worker's first new try after its session failed or broke.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(100);
/// The longest delay between a worker's tries, whatever the heartbeat interval.
pub const RECONNECT_CAP: Duration = Duration::from_secs(5);

/// The worker's reconnect delay after `current`: doubled, at most [`RECONNECT_CAP`] and at
/// most the heartbeat interval the coordinator asked for (`heartbeat`, a third of its lease
/// TTL by default), at least [`RECONNECT_FIRST`]; each wait is this delay with its jitter
/// ([`jittered`]). Capped by the heartbeat so that a worker is heard again soon after a
/// restarted coordinator listens (found by the chaos check at TTL 2 s, where the uncapped
/// delay reached 3.2 s).
pub fn next_reconnect_delay(current: Duration, heartbeat: Duration) -> Duration {
    (current * 2)
        .min(reconnect_cap(heartbeat))
        .max(RECONNECT_FIRST)
}

/// The longest reconnect delay for `heartbeat` (see [`next_reconnect_delay`]).
fn reconnect_cap(heartbeat: Duration) -> Duration {
    heartbeat.min(RECONNECT_CAP).max(RECONNECT_FIRST)
}

/// A reconnect delay with its jitter: `unit` (uniform in `[0, 1)`) makes it 0.8 to 1.2
/// times `delay`, so that workers cut off together do not come back together.
pub fn jittered(delay: Duration, unit: f64) -> Duration {
    delay.mul_f64(0.8 + 0.4 * unit.clamp(0.0, 1.0))
}

/// A TTL and heartbeat interval that cannot work together.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LeaseTimingError {
    /// The TTL is zero.
    #[error("failed to use a lease TTL of 0 ms (--lease-ttl-ms / AKBENCH_LEASE_TTL_MS): every lease would expire at once; fix: give it a positive value (default {DEFAULT_LEASE_TTL_MS})")]
    ZeroTtl,
    /// The TTL is outside [`crate::ranges::LEASE_TTL_MS`].
    #[error("failed to use the lease TTL (--lease-ttl-ms / AKBENCH_LEASE_TTL_MS): {0}")]
    TtlOutOfRange(Box<crate::ranges::OutOfRange>),
    /// The heartbeat interval is zero.
    #[error("failed to use a heartbeat interval of 0 ms (--heartbeat-interval-ms / AKBENCH_HEARTBEAT_INTERVAL_MS); fix: give it a positive value, or leave it out (a third of the lease TTL)")]
    ZeroHeartbeat,
    /// The heartbeat interval is longer than half the TTL.
    #[error("failed to use a heartbeat interval of {heartbeat_ms} ms (--heartbeat-interval-ms / AKBENCH_HEARTBEAT_INTERVAL_MS) with a lease TTL of {ttl_ms} ms: it must be at most half the TTL ({max_ms} ms), or a single late heartbeat lets every lease of a healthy worker expire; fix: lower it, raise --lease-ttl-ms, or leave it out (a third of the TTL)")]
    HeartbeatTooLong {
        /// The interval asked for.
        heartbeat_ms: u128,
        /// The TTL.
        ttl_ms: u128,
        /// The longest interval allowed.
        max_ms: u128,
    },
}

/// The lease timing of a coordinator (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    ttl: Duration,
    heartbeat: Duration,
}

impl LeaseTiming {
    /// `ttl` with `heartbeat` (`None`: a third of the TTL). The heartbeat must be positive and
    /// at most half the TTL.
    pub fn new(ttl: Duration, heartbeat: Option<Duration>) -> Result<Self, LeaseTimingError> {
        if ttl.is_zero() {
            return Err(LeaseTimingError::ZeroTtl);
        }
        let heartbeat = heartbeat.unwrap_or(ttl / 3);
        if heartbeat.is_zero() {
            return Err(LeaseTimingError::ZeroHeartbeat);
        }
        if heartbeat > ttl / 2 {
            return Err(LeaseTimingError::HeartbeatTooLong {
                heartbeat_ms: heartbeat.as_millis(),
                ttl_ms: ttl.as_millis(),
                max_ms: (ttl / 2).as_millis(),
            });
        }
        Ok(Self { ttl, heartbeat })
    }

    /// [`LeaseTiming::new`] from milliseconds, as the flags give them: the TTL must also be
    /// inside [`crate::ranges::LEASE_TTL_MS`].
    pub fn from_ms(ttl_ms: u64, heartbeat_ms: Option<u64>) -> Result<Self, LeaseTimingError> {
        if ttl_ms != 0 {
            crate::ranges::LEASE_TTL_MS
                .whole(ttl_ms)
                .map_err(|e| LeaseTimingError::TtlOutOfRange(Box::new(e)))?;
        }
        Self::new(
            Duration::from_millis(ttl_ms),
            heartbeat_ms.map(Duration::from_millis),
        )
    }

    /// How long a lease lives without a heartbeat.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How often workers heartbeat (sent to them in `Welcome`).
    pub fn heartbeat(&self) -> Duration {
        self.heartbeat
    }

    /// How often the reaper runs: half the TTL, at most 1 s, at least 10 ms, so rescue
    /// takes at most TTL + 1 s.
    pub fn reap_interval(&self) -> Duration {
        (self.ttl / 2)
            .min(Duration::from_secs(1))
            .max(Duration::from_millis(10))
    }

    /// How long a worker whose session broke has to open a new one before its leases are
    /// released: one heartbeat interval, at most 2 s.
    pub fn session_grace(&self) -> Duration {
        self.heartbeat.min(Duration::from_secs(2))
    }

    /// The longest a worker of this coordinator waits between two tries to open a session:
    /// the longest reconnect delay ([`next_reconnect_delay`]) with the largest jitter.
    pub fn longest_reconnect_wait(&self) -> Duration {
        jittered(reconnect_cap(self.heartbeat), 1.0)
    }

    /// How long a coordinator that starts keeps every lease from before its start, counted
    /// from when it accepts sessions: a worker cut off by the restart is still backing off
    /// (its next try comes at most [`LeaseTiming::longest_reconnect_wait`] after the
    /// coordinator listens), then connects and says `Hello` (which counts as a heartbeat of
    /// the leases it presents): one TTL more covers that. Before, the grace was one TTL from
    /// the reaper's first pass, and at TTL 2 s on a loaded machine healthy workers came back
    /// after it and lost their attempts ("lease expired: worker went silent").
    pub fn restart_grace(&self) -> Duration {
        self.ttl + self.longest_reconnect_wait()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn derived_timings_follow_the_ttl_and_the_heartbeat() {
        // (ttl, heartbeat asked) -> (heartbeat, reap interval, session grace)
        let table = [
            (30_000, None, (10_000, 1_000, 2_000)),
            (30_000, Some(15_000), (15_000, 1_000, 2_000)),
            (30_000, Some(500), (500, 1_000, 500)),
            (900, None, (300, 450, 300)),
            (30, None, (10, 15, 10)),
            (12, None, (4, 10, 4)),
        ];
        for (ttl, hb, (h, r, g)) in table {
            let t = LeaseTiming::new(MS(ttl), hb.map(MS)).unwrap();
            assert_eq!(t.ttl(), MS(ttl));
            assert_eq!(
                (t.heartbeat(), t.reap_interval(), t.session_grace()),
                (MS(h), MS(r), MS(g)),
                "{ttl} {hb:?}"
            );
        }
    }

    #[test]
    fn a_restart_grace_covers_the_workers_reconnect_schedule_and_one_ttl() {
        // (ttl, heartbeat asked) -> (longest reconnect wait, restart grace)
        let table = [
            (30_000, None, (6_000, 36_000)),
            (30_000, Some(500), (600, 30_600)),
            (2_000, None, (799, 2_799)),
            (900, None, (360, 1_260)),
            (30, None, (120, 150)),
        ];
        for (ttl, hb, (wait, grace)) in table {
            let t = LeaseTiming::new(MS(ttl), hb.map(MS)).unwrap();
            // Rounded down to the millisecond (1.2 x 666.66 ms = 799.99 ms).
            let ms = |d: Duration| d.as_millis() as u64;
            assert_eq!(
                (ms(t.longest_reconnect_wait()), ms(t.restart_grace())),
                (wait, grace),
                "{ttl} {hb:?}"
            );
            // No wait the schedule makes is longer, whatever the jitter draws.
            let mut delay = RECONNECT_FIRST;
            for _ in 0..20 {
                for unit in [0.0, 0.5, 0.999_999] {
                    assert!(jittered(delay, unit) <= t.longest_reconnect_wait());
                }
                delay = next_reconnect_delay(delay, t.heartbeat());
            }
        }
    }

    #[test]
    fn reconnect_delays_double_up_to_the_heartbeat_and_five_seconds() {
        // (current, heartbeat) -> next
        for (current, heartbeat, next) in [
            (100, 10_000, 200),
            (3_200, 10_000, 5_000),
            (5_000, 10_000, 5_000),
            (5_000, 60_000, 5_000),
            (400, 666, 666),
            (666, 666, 666),
            (100, 50, 100),
            (0, 10_000, 100),
        ] {
            assert_eq!(
                next_reconnect_delay(MS(current), MS(heartbeat)),
                MS(next),
                "{current} {heartbeat}"
            );
        }
        // The jitter spans 0.8 to 1.2 times the delay; out-of-range draws are clamped.
        for (unit, ms) in [
            (0.0, 800),
            (0.5, 1_000),
            (1.0, 1_200),
            (-1.0, 800),
            (7.0, 1_200),
        ] {
            assert_eq!(jittered(MS(1_000), unit), MS(ms), "{unit}");
        }
    }

    #[test]
    fn combinations_that_cannot_work_are_refused_naming_the_flags() {
        assert_eq!(
            LeaseTiming::from_ms(0, None),
            Err(LeaseTimingError::ZeroTtl)
        );
        assert_eq!(
            LeaseTiming::from_ms(30_000, Some(0)),
            Err(LeaseTimingError::ZeroHeartbeat)
        );
        let e = LeaseTiming::from_ms(30_000, Some(40_000)).unwrap_err();
        assert_eq!(
            e,
            LeaseTimingError::HeartbeatTooLong {
                heartbeat_ms: 40_000,
                ttl_ms: 30_000,
                max_ms: 15_000
            }
        );
        let text = e.to_string();
        assert!(
            text.starts_with("failed to use a heartbeat interval of 40000 ms"),
            "{text}"
        );
        assert!(
            text.contains("--heartbeat-interval-ms") && text.contains("fix:"),
            "{text}"
        );
        assert!(LeaseTiming::from_ms(30_000, Some(15_001)).is_err());
        // The flags' range: u64::MAX ms would overflow the database's arithmetic.
        for ttl in [999, 86_400_001, u64::MAX] {
            let e = LeaseTiming::from_ms(ttl, None).unwrap_err().to_string();
            assert!(
                e.contains("--lease-ttl-ms") && e.contains("1000 to 86400000 ms"),
                "{e}"
            );
        }
        assert!(parse_lease_ttl_ms("18446744073709551615").is_err());
        assert_eq!(parse_lease_ttl_ms("30000"), Ok(DEFAULT_LEASE_TTL_MS));
        assert!(LeaseTiming::from_ms(30_000, Some(15_000)).is_ok());
    }
}
