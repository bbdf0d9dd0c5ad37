//! The worker's side of the vouched fail-closed rule (`core::egress::vouch`): the operator's
//! known upstreams (`AKBENCH_EGRESS_KNOWN_HOSTS`, read at each grading run), and the hosts
//! earlier grading runs of each task reached on this worker (one bounded set per process,
//! in memory: a restarted worker starts empty).

use akbench_core::egress::vouch::{
    judge_grading_fetches, known_hosts, GradingFetches, SeenUpstreams, Vouchers, KNOWN_HOSTS_ENV,
};
use akbench_core::egress::Contact;
use akbench_core::task::Task;
use std::sync::Mutex;

/// `(task release, host, port)` reached by grading runs of this process.
static SEEN: Mutex<Option<SeenUpstreams>> = Mutex::new(None);

/// What one grading run's fetches make of its result, then learns what it reached; `Err`: a
/// bad `AKBENCH_EGRESS_KNOWN_HOSTS` (naming the entry and the fix).
pub(super) fn judge(
    task: &Task,
    contacts: &[Contact],
    passing: bool,
) -> Result<GradingFetches, String> {
    let setting = std::env::var(KNOWN_HOSTS_ENV).ok();
    let known = known_hosts(setting.as_deref())?;
    let key = task.release.digest.as_str();
    let seen = |host: &str, port: u16| {
        SEEN.lock()
            .map(|s| s.as_ref().is_some_and(|s| s.contains(key, host, port)))
            .unwrap_or(false)
    };
    let judged = judge_grading_fetches(
        contacts,
        passing,
        &Vouchers {
            declared: &task.network.verifier,
            known: &known,
            seen: &seen,
        },
    );
    // After judging: a run's own success does not vouch for its own failure.
    if let Ok(mut s) = SEEN.lock() {
        s.get_or_insert_with(SeenUpstreams::default)
            .learn(key, contacts);
    }
    Ok(judged)
}
