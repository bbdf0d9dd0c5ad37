//! The attempts of a trial run on its own ([`super::Orchestrator::run_trial`]: `run single`,
//! `run execute`): the trial is planned as the one work item of an [`InMemoryDispatch`], the
//! store `sweep --local` dispatches from, and each attempt goes claim -> run -> report ->
//! settle through it as a sweep slot's does. Retries (infrastructure errors only, within the
//! budget), their jittered backoff and the terminal mapping are core's one code path
//! (`core::dispatch::settle` and the item machine, as the coordinator and `sweep --local`
//! settle). A cancel cancels the dispatch's run: a live attempt ends and is not retried, a
//! retry waiting for its backoff never starts.

use super::{Observer, Orchestrator, TrialRequest};
use crate::process::CancelToken;
use akbench_core::dispatch::memory::{InMemoryDispatch, NewItem, Next};
use akbench_core::dispatch::{Backoff, RunCaps, Settlement};
use akbench_core::record::AttemptRecord;
use std::time::{Duration, Instant};

/// How often a wait for a retry's backoff looks at the cancel token.
const TICK: Duration = Duration::from_millis(50);

/// Runs the trial `req` through a one-item dispatch with `backoff` until the dispatch says
/// nothing will start again; returns every attempt made, in order.
pub(super) fn attempts(
    orch: &Orchestrator,
    req: &TrialRequest<'_>,
    backoff: &Backoff,
    observer: &dyn Observer,
    cancel: &CancelToken,
) -> Vec<AttemptRecord> {
    let mut dispatch = InMemoryDispatch::new(
        vec![NewItem {
            agent: req.agent.name.clone(),
            route: None,
            retry_budget: req.infrastructure_retries,
        }],
        &RunCaps::default(),
        1,
        *backoff,
        Instant::now(),
    );
    let mut attempts = Vec::new();
    loop {
        let now = Instant::now();
        match dispatch.next(now, &|_| false) {
            Next::Lease { item, number } => {
                if number > 1 {
                    observer.before_retry(number, cancel);
                }
                let a = orch.run_attempt(&orch.attempt_request(req, number), observer, cancel);
                let terminal = a.state;
                attempts.push(a);
                if cancel.is_cancelled() {
                    // The run is cancelling: the attempt's end is not retried.
                    dispatch.cancel();
                }
                let jitter = akbench_core::ids::random_unit();
                if let Settlement::Retry { after } =
                    dispatch.ended(item, terminal, jitter, Instant::now())
                {
                    observer.retrying(number, after);
                }
            }
            Next::Wait(until) => {
                let wait = InMemoryDispatch::wait_for(until, now, TICK);
                if cancel.is_cancelled() {
                    dispatch.cancel();
                } else {
                    std::thread::sleep(wait);
                }
            }
            Next::Stop => return attempts,
        }
    }
}
