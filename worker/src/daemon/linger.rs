//! When the session sends an attempt's transitions: the rule that batches them.
//!
//! Every transition the coordinator stores is a transaction with an fsync; an attempt makes
//! about eleven, most of them milliseconds apart. The session therefore holds an attempt's
//! unsent transitions for up to [`LINGER`] after the oldest of them was recorded, and sends
//! what gathered as one `TransitionBatch` (stored in one transaction, in seq order, each
//! transition checked on its own against the lease's epoch and the lifecycle, as any batch
//! is). Two things go at once instead:
//!
//! - the attempt's first transition (wire seq 1): the coordinator takes an attempt with no
//!   stored transition for not started (`run status` shows it `prefetched`; a budget stop or
//!   a paused route revokes it), so the start is never held back;
//! - everything owed once the attempt has ended: its last transitions, the record and the
//!   finish leave together, so the coordinator stores them (and claims the next attempt) in
//!   one transaction.
//!
//! Nothing is acknowledged earlier for being held: the worker keeps every transition until
//! the coordinator acknowledges it (docs/remote.md), so a worker killed while it holds some
//! loses only what it had never been told was stored.

use std::time::Duration;
use tokio::time::Instant;

/// Longest time an attempt's transition waits for others to go with it.
pub const LINGER: Duration = Duration::from_millis(100);

/// When the unsent transitions of an attempt are due: `first_unsent_seq` is the lowest
/// unsent wire seq, `ended` says the attempt's work is over (its record is owed), and
/// `held_since` is when the oldest unsent one was recorded.
pub fn due(first_unsent_seq: u32, ended: bool, held_since: Instant) -> Instant {
    if first_unsent_seq <= 1 || ended {
        held_since
    } else {
        held_since + LINGER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_start_and_an_ended_attempt_skip_the_linger() {
        let t = Instant::now();
        for (seq, ended, at) in [
            (0, false, t),
            (1, false, t),
            (1, true, t),
            (2, false, t + LINGER),
            (2, true, t),
            (11, false, t + LINGER),
            (11, true, t),
            (u32::MAX, false, t + LINGER),
        ] {
            assert_eq!(due(seq, ended, t), at, "seq {seq} ended {ended}");
        }
    }
}
