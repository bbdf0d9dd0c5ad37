//! Planning and accounting at scale, in memory (no disk I/O), timed with `Instant`.
//!
//! `cargo bench -p akbench-core --bench plans` plans 10,000 and 100,000 trials
//! (tasks x 10 agents x 10 repetitions, synthetic task releases) and reconciles as many
//! observations; figures go in docs/PERFORMANCE.md.

use akbench_core::accounting::{reconcile, Observation};
use akbench_core::clock::SystemClock;
use akbench_core::digest::canonical_json;
use akbench_core::lifecycle::State;
use akbench_core::plan::plan;
use akbench_core::testkit::synthetic_spec;
use std::time::Instant;

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(v);
    }
    (best, out.expect("at least one run"))
}

fn main() {
    let clock = SystemClock;
    println!(
        "{:>8} {:>12} {:>14} {:>12} {:>14}",
        "trials", "plan (s)", "serialize (s)", "reconcile (s)", "per trial (us)"
    );
    for tasks in [100usize, 1_000] {
        let spec = synthetic_spec(tasks, 10, 10, &clock);
        let (t_plan, p) = best_of(3, || plan(&spec, &clock));
        let n = p.trials.len();
        let (t_ser, bytes) = best_of(3, || canonical_json(&p).len());
        let states = [
            State::Completed,
            State::Failed,
            State::Timeout,
            State::InfrastructureError,
            State::NotGraded,
        ];
        let obs: Vec<Observation> = p
            .trials
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let state = states[i % states.len()];
                Observation {
                    trial_id: t.trial_id,
                    state,
                    ok: (state == State::Completed).then_some(i % 2 == 0),
                    score: None,
                    attempt_id: None,
                    source: Some("bench".into()),
                }
            })
            .collect();
        let (t_rec, a) = best_of(3, || reconcile(&p, &obs));
        assert_eq!(a.counts.planned(), n as u64);
        assert!(a.valid && a.complete);
        println!(
            "{n:>8} {t_plan:>12.3} {t_ser:>14.3} {t_rec:>12.3} {:>14.2}   (plan JSON {} MB)",
            (t_plan + t_rec) * 1e6 / n as f64,
            bytes / 1_000_000
        );
    }
}
