//! Lease timing, in one type: how long a lease lives without a heartbeat (TTL), how often a
//! worker heartbeats (the interval the coordinator asks for in `Welcome`), how often the
//! reaper looks for expired leases, and how long a worker whose session broke has to come
//! back before its leases are released. Every value is derived here from the TTL and the
//! optional heartbeat interval, and a combination that cannot work is refused before
//! anything starts.

use std::time::Duration;

/// A TTL and heartbeat interval that cannot work together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseTimingError {
    /// The TTL is zero.
    #[error("failed to use a lease TTL of 0 ms (--lease-ttl-ms / AKBENCH_LEASE_TTL_MS): every lease would expire at once; fix: give it a positive value (default 30000)")]
    ZeroTtl,
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

    /// [`LeaseTiming::new`] from milliseconds, as the flags give them.
    pub fn from_ms(ttl_ms: u64, heartbeat_ms: Option<u64>) -> Result<Self, LeaseTimingError> {
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
        assert!(LeaseTiming::from_ms(30_000, Some(15_000)).is_ok());
    }
}
