//! How many connections a server holds and for how long: the coordinator's gRPC and HTTP
//! listeners each admit at most [`ConnectionLimits::total`] connections at once, and at
//! most [`ConnectionLimits::per_peer`] from one address; a connection that has not
//! finished its handshake (TLS, HTTP/2's preface, HTTP/1's request headers) within
//! [`ConnectionLimits::handshake`] is closed, and so is one with no traffic for
//! [`ConnectionLimits::idle`] (HTTP/2 keepalive pings every [`ConnectionLimits::keepalive`]
//! keep a live peer's connection busy). Pure: the decisions, defaults and messages; the
//! coordinator's `conn_guard` module applies them at accept. docs/limits.md lists them.

use std::time::Duration;

/// The bounds of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections held at once.
    pub total: usize,
    /// Most connections held at once from one peer address.
    pub per_peer: usize,
    /// Longest a connection may take to finish its handshake.
    pub handshake: Duration,
    /// Longest a connection may go without traffic once its handshake is done.
    pub idle: Duration,
    /// HTTP/2 keepalive: a ping this often, the connection closed when one is not
    /// answered within as long again.
    pub keepalive: Duration,
}

/// Default [`ConnectionLimits::total`] (each listener).
pub const DEFAULT_TOTAL: usize = 10_000;
/// Default [`ConnectionLimits::per_peer`]: a fleet of workers behind one NAT address fits.
pub const DEFAULT_PER_PEER: usize = 1_000;
/// Default [`ConnectionLimits::handshake`].
pub const DEFAULT_HANDSHAKE: Duration = Duration::from_secs(10);
/// Default [`ConnectionLimits::idle`].
pub const DEFAULT_IDLE: Duration = Duration::from_secs(300);
/// Default [`ConnectionLimits::keepalive`].
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(30);
/// Descriptors a process keeps for everything but the listeners' connections (its
/// database pool, files, the listeners themselves).
pub const RESERVED_FDS: u64 = 256;

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            total: DEFAULT_TOTAL,
            per_peer: DEFAULT_PER_PEER,
            handshake: DEFAULT_HANDSHAKE,
            idle: DEFAULT_IDLE,
            keepalive: DEFAULT_KEEPALIVE,
        }
    }
}

impl ConnectionLimits {
    /// These limits with `total` lowered so that `listeners` listeners at their total fit
    /// in the open-files limit `nofile` (minus [`RESERVED_FDS`]), so that the listeners
    /// shed connections before the process runs out of descriptors; at least 16.
    pub fn within_files(self, nofile: Option<u64>, listeners: u64) -> ConnectionLimits {
        let Some(n) = nofile else { return self };
        let fit = (n.saturating_sub(RESERVED_FDS) / listeners.max(1)).max(16);
        let total = self.total.min(usize::try_from(fit).unwrap_or(usize::MAX));
        ConnectionLimits {
            total,
            per_peer: self.per_peer.min(total),
            ..self
        }
    }

    /// Whether a new connection from a peer that holds `from_peer` connections may be
    /// admitted while the listener holds `held`.
    pub fn admit(&self, held: usize, from_peer: usize) -> Result<(), Shed> {
        if held >= self.total {
            Err(Shed::Total { limit: self.total })
        } else if from_peer >= self.per_peer {
            Err(Shed::PerPeer {
                limit: self.per_peer,
            })
        } else {
            Ok(())
        }
    }

    /// The timeout flags' range: 1 ms to a week, and the keepalive below the idle timeout
    /// (else a live peer's idle connection is closed before it is pinged).
    pub fn check(&self) -> Result<(), String> {
        if self.total == 0 || self.per_peer == 0 {
            return Err(
                "--max-connections and --max-connections-per-peer must be at least 1".into(),
            );
        }
        for (flag, d) in [
            ("--handshake-timeout", self.handshake),
            ("--idle-timeout", self.idle),
            ("--keepalive", self.keepalive),
        ] {
            crate::limits::timeout_sec(d.as_secs_f64()).map_err(|e| format!("{flag}: {e}"))?;
        }
        if self.keepalive >= self.idle {
            return Err(format!(
                "--keepalive ({} s) must be shorter than --idle-timeout ({} s): a live peer's connection would be closed as idle before it is pinged",
                crate::limits::show_f64(self.keepalive.as_secs_f64()),
                crate::limits::show_f64(self.idle.as_secs_f64())
            ));
        }
        Ok(())
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Shed {
    /// The listener holds its most connections.
    #[error("the server holds its most connections ({limit}, --max-connections); retry later")]
    Total {
        /// The limit.
        limit: usize,
    },
    /// The peer holds its most connections.
    #[error("this address holds its most connections ({limit}, --max-connections-per-peer); close some or retry later")]
    PerPeer {
        /// The limit.
        limit: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_admitted_within_the_total_and_its_peers_share() {
        let l = ConnectionLimits {
            total: 10,
            per_peer: 3,
            ..ConnectionLimits::default()
        };
        assert_eq!(l.admit(0, 0), Ok(()));
        assert_eq!(l.admit(9, 2), Ok(()));
        assert_eq!(l.admit(10, 0), Err(Shed::Total { limit: 10 }));
        assert_eq!(l.admit(5, 3), Err(Shed::PerPeer { limit: 3 }));
        assert!(Shed::PerPeer { limit: 3 }
            .to_string()
            .contains("--max-connections-per-peer"));
    }

    #[test]
    fn the_total_fits_the_open_files_limit() {
        let l = ConnectionLimits::default();
        assert_eq!(l.within_files(None, 2), l);
        assert_eq!(l.within_files(Some(1_048_576), 2).total, DEFAULT_TOTAL);
        let small = l.within_files(Some(1024), 2);
        assert_eq!(small.total, (1024 - 256) / 2);
        assert_eq!(small.per_peer, small.total);
        assert_eq!(l.within_files(Some(10), 2).total, 16, "a floor");
    }

    #[test]
    fn timeouts_are_in_range_and_the_keepalive_below_the_idle_timeout() {
        assert!(ConnectionLimits::default().check().is_ok());
        let bad = |f: fn(&mut ConnectionLimits)| {
            let mut l = ConnectionLimits::default();
            f(&mut l);
            l.check().unwrap_err()
        };
        assert!(bad(|l| l.total = 0).contains("--max-connections"));
        assert!(bad(|l| l.handshake = Duration::ZERO).contains("--handshake-timeout"));
        assert!(bad(|l| l.keepalive = l.idle).contains("--keepalive"));
    }
}
