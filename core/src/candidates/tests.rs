use super::*;
use crate::accounting::{reconcile, Observation};
use crate::clock::SystemClock;
use crate::lifecycle::State;
use crate::plan::plan;
use crate::selection::SELECTION_RULES;
use crate::testkit::synthetic_spec;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// C(a, b) exactly, for small numbers.
fn binom(a: u64, b: u64) -> f64 {
    if b > a {
        return 0.0;
    }
    (0..b).fold(1.0, |acc, i| acc * (a - i) as f64 / (i + 1) as f64)
}

#[test]
fn pass_at_k_is_the_unbiased_estimator() {
    // (n, c, k, expected)
    let table: &[(u64, u64, u64, Option<f64>)] = &[
        (3, 1, 1, Some(1.0 / 3.0)),
        (3, 1, 3, Some(1.0)),
        (3, 0, 1, Some(0.0)),
        (3, 0, 3, Some(0.0)),
        (3, 3, 1, Some(1.0)),
        (5, 2, 2, Some(1.0 - binom(3, 2) / binom(5, 2))),
        (10, 3, 5, Some(1.0 - binom(7, 5) / binom(10, 5))),
        (1, 1, 1, Some(1.0)),
        (2, 1, 3, None),
        (0, 0, 1, None),
        (3, 1, 0, None),
        (3, 4, 1, None),
    ];
    for &(n, c, k, want) in table {
        let got = pass_at_k(n, c, k);
        match (got, want) {
            (Some(g), Some(w)) => assert!(close(g, w), "pass@{k} n={n} c={c}: {g} != {w}"),
            _ => assert_eq!(got, want, "pass@{k} n={n} c={c}"),
        }
    }
    // pass@1 is c/n for every n and c.
    for n in 1..30u64 {
        for c in 0..=n {
            assert!(close(pass_at_k(n, c, 1).unwrap(), c as f64 / n as f64));
        }
    }
}

#[test]
fn pass_at_k_is_stable_where_binomials_overflow() {
    // C(1000, 500) is about 1e299; C(2000, 1000) overflows an f64.
    let p = pass_at_k(2000, 1, 1000).unwrap();
    assert!(close(p, 0.5), "{p}");
    let p = pass_at_k(2000, 10, 100).unwrap();
    assert!(p.is_finite() && p > 0.0 && p < 1.0, "{p}");
}

fn cands(table: &[(Bucket, Option<f64>)]) -> Vec<Candidate> {
    table
        .iter()
        .enumerate()
        .map(|(i, (bucket, score))| Candidate {
            index: i as u32 + 1,
            bucket: *bucket,
            score: *score,
        })
        .collect()
}

#[test]
fn selection_rules() {
    use Bucket::*;
    use Selection::*;
    type Row = (
        &'static str,
        Selection,
        &'static [(Bucket, Option<f64>)],
        (Bucket, Option<u32>),
    );
    let table: &[Row] = &[
        (
            "first solved wins",
            FirstSolved,
            &[
                (Failed, Some(0.0)),
                (Succeeded, Some(1.0)),
                (Succeeded, Some(1.0)),
            ],
            (Succeeded, Some(2)),
        ),
        (
            "a solved candidate decides even with one missing",
            FirstSolved,
            &[(Missing, None), (Succeeded, Some(1.0))],
            (Succeeded, Some(2)),
        ),
        (
            "none solved: the first graded",
            FirstSolved,
            &[
                (AgentFailed, None),
                (Failed, Some(0.2)),
                (Failed, Some(0.0)),
            ],
            (Failed, Some(2)),
        ),
        (
            "none graded: the first agent failure or timeout",
            FirstSolved,
            &[
                (InfrastructureError, None),
                (TimedOut, None),
                (AgentFailed, None),
            ],
            (TimedOut, Some(2)),
        ),
        (
            "a missing candidate is missing, not a failure",
            FirstSolved,
            &[(Failed, Some(0.0)), (Missing, None), (Failed, Some(0.0))],
            (Missing, None),
        ),
        (
            "executed, not graded",
            FirstSolved,
            &[(NotGraded, None), (NotGraded, None), (AgentFailed, None)],
            (NotGraded, None),
        ),
        (
            "all candidates infrastructure errors: infrastructure",
            FirstSolved,
            &[
                (InfrastructureError, None),
                (InfrastructureError, None),
                (InfrastructureError, None),
            ],
            (InfrastructureError, None),
        ),
        (
            "an infrastructure candidate is skipped, not counted",
            FirstSolved,
            &[(InfrastructureError, None), (Failed, Some(0.0))],
            (Failed, Some(2)),
        ),
        (
            "quarantine before missing",
            BestScore,
            &[(Missing, None), (Quarantined, None)],
            (Quarantined, None),
        ),
        (
            "best score",
            BestScore,
            &[
                (Failed, Some(0.3)),
                (Failed, Some(0.7)),
                (Failed, Some(0.5)),
            ],
            (Failed, Some(2)),
        ),
        (
            "best score ties keep the lower number",
            BestScore,
            &[(Succeeded, Some(1.0)), (Succeeded, Some(1.0))],
            (Succeeded, Some(1)),
        ),
        (
            "best score ties prefer the solved one",
            BestScore,
            &[(Failed, Some(1.0)), (Succeeded, Some(1.0))],
            (Succeeded, Some(2)),
        ),
        (
            "best score waits for every candidate",
            BestScore,
            &[(Succeeded, Some(1.0)), (Missing, None)],
            (Missing, None),
        ),
        (
            "all: solved, none selected",
            All,
            &[(Failed, Some(0.0)), (Succeeded, Some(1.0))],
            (Succeeded, None),
        ),
        (
            "all: unsolved, none selected",
            All,
            &[(Failed, Some(0.0)), (AgentFailed, None)],
            (Failed, None),
        ),
        (
            "cancelled before infrastructure",
            All,
            &[(InfrastructureError, None), (Cancelled, None)],
            (Cancelled, None),
        ),
    ];
    for (name, rule, rows, want) in table {
        assert_eq!(select(*rule, &cands(rows)), *want, "{name}");
    }
}

#[test]
fn selection_names_round_trip() {
    for name in SELECTION_RULES {
        assert_eq!(Selection::parse(name).unwrap().as_str(), name);
    }
    assert_eq!(Selection::parse("best_of"), None);
    assert_eq!(Selection::default(), Selection::FirstSolved);
}

fn obs(trial_id: Uuid, state: State, ok: Option<bool>) -> Observation {
    Observation {
        trial_id,
        state,
        ok,
        score: ok.map(|o| if o { 1.0 } else { 0.0 }),
        attempt_id: None,
        source: None,
    }
}

#[test]
fn accounting_groups_candidates_under_their_trial() {
    let mut spec = synthetic_spec(2, 1, 1, &SystemClock);
    spec.condition.execution.candidates = 3;
    let p = plan(&spec, &SystemClock);
    assert_eq!(p.trials.len(), 6);
    let ids: Vec<Uuid> = p.trials.iter().map(|t| t.trial_id).collect();
    // Trial 1: one solved in three. Trial 2: two infrastructure errors and a failure.
    let o = vec![
        obs(ids[0], State::Completed, Some(false)),
        obs(ids[1], State::Completed, Some(true)),
        obs(ids[2], State::Completed, Some(false)),
        obs(ids[3], State::InfrastructureError, None),
        obs(ids[4], State::InfrastructureError, None),
        obs(ids[5], State::Completed, Some(false)),
    ];
    let a = reconcile(&p, &o);
    let c = a.candidates.as_ref().expect("a candidate section");
    assert_eq!((c.candidates, c.planned_trials), (3, 2));
    assert_eq!(c.trials[0].selected, Some(2));
    assert_eq!(c.trials[0].bucket, Bucket::Succeeded);
    assert_eq!(c.trials[1].bucket, Bucket::Failed);
    assert_eq!(c.trials[1].selected, Some(3));
    assert_eq!((c.counts.succeeded, c.counts.failed), (1, 1));
    // pass@1: trial 1 1/3, trial 2 0/1: mean 1/6. pass@3: trial 1 only (trial 2 is short).
    let p1 = c.pass(1).unwrap();
    assert!(close(p1.value.unwrap(), 1.0 / 6.0), "{p1:?}");
    assert_eq!(p1.trials, 2);
    let p3 = c.pass(3).unwrap();
    assert_eq!((p3.value, p3.trials, p3.short), (Some(1.0), 1, 1));
    // Every candidate is kept, by number, with its own id and key.
    let keys: Vec<&str> = c.trials[0]
        .candidates
        .iter()
        .map(|x| x.key.as_str())
        .collect();
    assert!(
        keys[0].ends_with("/r1/c1") && keys[2].ends_with("/r1/c3"),
        "{keys:?}"
    );
    assert_eq!(
        c.trials[0].key,
        p.trials[0].candidate.as_ref().unwrap().trial_key
    );
    let text = c.to_string();
    assert!(
        text.contains("pass@1 16.7%") && text.contains("pass@3 100.0%"),
        "{text}"
    );
}

#[test]
fn a_plan_without_candidates_has_no_candidate_section() {
    let spec = synthetic_spec(2, 1, 1, &SystemClock);
    let p = plan(&spec, &SystemClock);
    assert!(p.trials.iter().all(|t| t.candidate.is_none()));
    assert_eq!(reconcile(&p, &[]).candidates, None);
}

#[test]
fn nothing_graded_is_no_pass_at_k() {
    let mut spec = synthetic_spec(1, 1, 1, &SystemClock);
    spec.condition.execution.candidates = 2;
    let p = plan(&spec, &SystemClock);
    let o = vec![
        obs(p.trials[0].trial_id, State::NotGraded, None),
        obs(p.trials[1].trial_id, State::Failed, None),
    ];
    let c = reconcile(&p, &o).candidates.unwrap();
    assert_eq!(c.pass(1).unwrap().value, None);
    assert_eq!(c.trials[0].bucket, Bucket::NotGraded);
}

#[test]
fn a_missing_candidate_leaves_its_trial_missing_not_failed() {
    let mut spec = synthetic_spec(1, 1, 1, &SystemClock);
    spec.condition.execution.candidates = 3;
    let p = plan(&spec, &SystemClock);
    let o = vec![
        obs(p.trials[0].trial_id, State::Completed, Some(false)),
        obs(p.trials[2].trial_id, State::Completed, Some(false)),
    ];
    let a = reconcile(&p, &o);
    assert!(!a.complete);
    let c = a.candidates.unwrap();
    assert_eq!(c.trials[0].bucket, Bucket::Missing);
    assert_eq!(c.trials[0].candidates[1].bucket, Bucket::Missing);
    assert_eq!((c.counts.missing, c.counts.failed), (1, 0));
    // Its two measured candidates still estimate pass@1; pass@3 leaves the trial out.
    assert_eq!(c.pass(1).unwrap().value, Some(0.0));
    assert_eq!(c.pass(3).unwrap().short, 1);
    // Grouped from records alone, a candidate number nobody holds is missing too.
    let entries: Vec<Entry> = p
        .trials
        .iter()
        .zip(&a.trials)
        .filter(|(_, t)| t.outcome.is_some())
        .map(|(pt, t)| Entry {
            candidate: pt.candidate.clone(),
            id: pt.trial_id,
            key: pt.key.clone(),
            bucket: t.bucket,
            score: Some(0.0),
            attempt_id: None,
        })
        .collect();
    let from_records = account_entries(entries).unwrap();
    assert_eq!(from_records.trials[0].bucket, Bucket::Missing);
    assert_eq!(from_records.trials[0].candidates.len(), 3);
    assert_eq!(from_records.trials[0].candidates[1].id, None);
}
