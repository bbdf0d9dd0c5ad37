//! What the grading escape suites share: whether the sandbox works here, one trial under the
//! suite's isolating runtime, and the honest grade every attack is measured against.

use super::Corpus;
use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_core::task::Task;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::sandbox_available;

/// Whether the sandbox works here; when not, `test` is skipped saying why.
pub fn sandbox_works(test: &str) -> bool {
    match sandbox_available() {
        Ok(()) => true,
        Err(e) => {
            akbench_core::testkit::skip(test, &format!("the sandbox does not work here: {e}"));
            false
        }
    }
}

/// One trial of agent `agent` on `t` under the suite's isolating runtime.
pub fn trial(c: &Corpus, t: &Task, agent: &str) -> RunRecord {
    let a = c.agent(agent);
    let mut req = c.request(t, &a, agent);
    req.options.runtime = super::in_container::isolated();
    c.orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap()
        .record
}

/// The grader of `t` works (the attacks are only meaningful if it does): the oracle is
/// solved with the tripwire failing as it must, `noop` is not.
pub fn assert_honest_grades(c: &Corpus, t: &Task) {
    for (agent, solved) in [("oracle", true), ("noop", false)] {
        let r = trial(c, t, agent);
        let g = r.attempts[0].grade.as_ref();
        assert_eq!(
            (r.outcome.state, r.outcome.ok),
            (State::Completed, Some(solved)),
            "{agent}: {:?} {:?}",
            r.attempts[0].cause,
            g.map(|g| &g.report)
        );
        if solved {
            let trip = g.unwrap().tripwire.as_ref().unwrap();
            assert_eq!(trip.result, "failed as it must", "{trip:?}");
        }
    }
}
