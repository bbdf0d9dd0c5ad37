//! Waits for the agent while watching its stdout for model provider failures: once the
//! adapter reads a failure the agent has not recovered from for longer than the grace (or a
//! refused credential, at once), the agent is stopped instead of being left to retry until
//! its timeout. The decision is `akbench_core::observe::watch`; this module only polls.

use crate::adapters::Adapter;
use crate::process::{CancelToken, ProcessEnd, Running};
use akbench_core::observe::{watch, Watch};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often the outer cancel is forwarded.
const TICK: Duration = Duration::from_millis(50);
/// How often stdout is read again (when it grew).
const READ_EVERY_TICKS: u32 = 5;

/// Waits for `running`; true in the second field when it was stopped because its provider
/// kept failing (then `ProcessEnd::cancelled` is set by that stop, not by `cancel`).
pub(super) fn wait_watching(
    running: Running,
    cancel: &CancelToken,
    adapter: &dyn Adapter,
    stdout_path: &Path,
    grace: Duration,
) -> (ProcessEnd, bool) {
    let stop = CancelToken::new();
    // Dropped when the agent ended: wakes the watcher at once instead of at its next tick
    // (the scope waits for it, and a sleeping tick cost every attempt up to 50 ms).
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let provider_stop = AtomicBool::new(false);
    let end = std::thread::scope(|s| {
        s.spawn(|| {
            let done_rx = done_rx; // moved in: a receiver is not shared between threads
            let started = Instant::now();
            let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
            let mut current = None;
            let mut failing_since: Option<u64> = None;
            let mut read_len: u64 = 0;
            let mut ticks: u32 = 0;
            loop {
                if cancel.is_cancelled() {
                    stop.cancel();
                    return;
                }
                ticks += 1;
                if ticks.is_multiple_of(READ_EVERY_TICKS) {
                    let now_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    let len = std::fs::metadata(stdout_path).map_or(0, |m| m.len());
                    if len != read_len {
                        read_len = len;
                        let text = akbench_core::bounded_read::ReadKind::Log
                            .read_text(stdout_path, akbench_core::bounded_read::Links::Refuse)
                            .unwrap_or_default();
                        current = adapter.provider_failure(&text);
                        failing_since = match current {
                            None => None,
                            Some(_) => failing_since.or(Some(now_ms)),
                        };
                    }
                    if watch(current.as_ref(), failing_since, now_ms, grace_ms) == Watch::Stop {
                        provider_stop.store(true, Ordering::SeqCst);
                        stop.cancel();
                        return;
                    }
                }
                match done_rx.recv_timeout(TICK) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        });
        let end = running.wait(&stop);
        drop(done_tx);
        end
    });
    (end, provider_stop.load(Ordering::SeqCst))
}
