//! The retry backoff the scheduler applies when it re-queues a trial (core's
//! [`Backoff`]) and the source of its jitter, injectable for tests.

use std::sync::Arc;

use akbench_core::dispatch::Backoff;

/// A draw in `[0, 1)`.
pub type JitterSource = Arc<dyn Fn() -> f64 + Send + Sync>;

/// Backoff plus jitter source.
#[derive(Clone)]
pub struct RetryPolicy {
    /// The backoff between infrastructure retries of one trial.
    pub backoff: Backoff,
    /// Where jitter comes from.
    pub jitter: JitterSource,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl Default for RetryPolicy {
    /// Core's default backoff with jitter from the random bits of UUIDv7s.
    fn default() -> Self {
        Self {
            backoff: Backoff::default(),
            jitter: Arc::new(akbench_core::ids::random_unit),
        }
    }
}

impl RetryPolicy {
    /// `backoff` with the default jitter source.
    pub fn with_backoff(backoff: Backoff) -> Self {
        Self {
            backoff,
            ..Self::default()
        }
    }
}
