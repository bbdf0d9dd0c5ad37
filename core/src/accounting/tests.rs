use super::*;
use crate::clock::{Clock, ManualClock};
use crate::lifecycle::State;
use crate::plan::plan;
use crate::testkit::synthetic_spec;
use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use std::collections::HashMap;
use std::path::Path;

fn clock() -> ManualClock {
    ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 4, 0, 0, 0).unwrap())
}

fn obs(id: Uuid, state: State, ok: Option<bool>) -> Observation {
    Observation {
        trial_id: id,
        state,
        ok,
        score: None,
        attempt_id: None,
        source: Some("test".into()),
    }
}

#[test]
fn every_bucket() {
    let p = plan(&synthetic_spec(10, 1, 1, &clock()), &clock());
    let id = |i: usize| p.trials[i].trial_id;
    let o = vec![
        obs(id(0), State::Completed, Some(true)),
        obs(id(1), State::Completed, Some(false)),
        obs(id(2), State::Failed, None),
        obs(id(3), State::Cancelled, None),
        obs(id(4), State::Timeout, None),
        obs(id(5), State::InvalidConfiguration, None),
        obs(id(6), State::NotGraded, None),
        obs(id(7), State::InfrastructureError, None),
        obs(id(8), State::EvaluationError, None),
    ];
    let a = reconcile(&p, &o);
    let buckets: Vec<Bucket> = a.trials.iter().map(|t| t.bucket).collect();
    assert_eq!(
        buckets,
        [
            Bucket::Succeeded,
            Bucket::Failed,
            Bucket::AgentFailed,
            Bucket::Cancelled,
            Bucket::TimedOut,
            Bucket::Invalid,
            Bucket::NotGraded,
            Bucket::InfrastructureError,
            Bucket::EvaluationError,
            Bucket::Missing,
        ]
    );
    assert_eq!(a.counts.failed, 1);
    assert_eq!(a.counts.agent_failed, 1);
    assert_eq!(a.counts.infrastructure_error, 1);
    assert_eq!(a.counts.missing, 1);
    assert_eq!(a.counts.planned(), 10);
    assert!(a.valid);
    assert!(!a.complete);
    // Verdicts only: 1 solved of 2 graded; the agent's failure and the timeout count
    // against the solve rate.
    assert_eq!(a.rates.pass_rate, Some(0.5));
    assert_eq!(a.rates.solve_rate, Some(0.25));
    assert_eq!(a.accepted().count(), 9);
}

#[test]
fn the_streamed_accounting_equals_the_whole_plan_one() {
    // Every bucket, an identical and a conflicting duplicate, missing trials and an
    // unexpected identity seen twice, in an input order that is not the plan's.
    let p = plan(&synthetic_spec(7, 2, 1, &clock()), &clock());
    let id = |i: usize| p.trials[i].trial_id;
    let stranger = crate::ids::uuid_v7_at(clock().now());
    let o = vec![
        obs(stranger, State::Completed, Some(true)),
        obs(id(9), State::Completed, Some(true)),
        obs(id(0), State::Completed, Some(false)),
        obs(id(9), State::Completed, Some(true)),
        obs(id(3), State::Timeout, None),
        obs(id(3), State::Cancelled, None),
        obs(stranger, State::Failed, None),
        obs(id(1), State::Failed, None),
        obs(id(2), State::InvalidConfiguration, None),
        obs(id(4), State::NotGraded, None),
        obs(id(5), State::InfrastructureError, None),
        obs(id(6), State::EvaluationError, None),
        obs(id(7), State::Cancelled, None),
    ];
    let a = reconcile(&p, &o);
    assert_eq!(a, whole_plan(&p, &o));
    assert_eq!((a.counts.missing, a.counts.quarantined), (5, 1));
    assert_eq!(a.duplicates.len(), 2);
    assert_eq!(a.unexpected, [stranger]);
    assert_eq!(a.quarantined[1].observations.len(), 2);
    // Streamed by hand, one trial at a time, as the coordinator does.
    let mut index = ObservationIndex::new(&o);
    let mut accountant = Accountant::new(p.run_id, p.run_key.clone(), p.digest.clone());
    let trials: Vec<AccountedTrial> = p
        .trials
        .iter()
        .map(|t| {
            accountant.trial(
                t.ordinal,
                t.trial_id,
                t.key.clone(),
                &index.take(t.trial_id),
            )
        })
        .collect();
    let streamed = accountant.finish(o.len() as u64, index.unexpected());
    assert_eq!(trials, a.trials);
    assert_eq!(
        streamed,
        RunAccounting {
            trials: Vec::new(),
            ..a
        }
    );
}

#[test]
fn identical_duplicate_counts_once() {
    let p = plan(&synthetic_spec(2, 1, 1, &clock()), &clock());
    let o = obs(p.trials[0].trial_id, State::Completed, Some(true));
    let a = reconcile(&p, &[o.clone(), o.clone(), o]);
    assert!(a.valid);
    assert_eq!(a.counts.succeeded, 1);
    assert_eq!(
        a.duplicates,
        [Duplicate {
            trial_id: p.trials[0].trial_id,
            count: 3,
            identical: true
        }]
    );
    assert!(a.quarantined.is_empty());
}

#[test]
fn conflicting_duplicate_is_quarantined_and_invalidates() {
    let p = plan(&synthetic_spec(2, 1, 1, &clock()), &clock());
    let id = p.trials[1].trial_id;
    let a = reconcile(
        &p,
        &[
            obs(id, State::Completed, Some(true)),
            obs(id, State::Completed, Some(false)),
        ],
    );
    assert!(!a.valid);
    assert_eq!(a.counts.quarantined, 1);
    assert_eq!(a.counts.succeeded + a.counts.failed, 0);
    assert_eq!(a.trials[1].bucket, Bucket::Quarantined);
    assert!(a.trials[1].outcome.is_none());
    assert_eq!(a.quarantined[0].reason, "conflicting_duplicate");
    assert_eq!(a.quarantined[0].observations.len(), 2);
    assert!(!a.duplicates[0].identical);
}

#[test]
fn unexpected_identities_are_reported_and_invalidate() {
    let p = plan(&synthetic_spec(1, 1, 2, &clock()), &clock());
    let stranger = crate::ids::uuid_v7_at(clock().now());
    let a = reconcile(
        &p,
        &[
            obs(stranger, State::Completed, Some(true)),
            obs(p.trials[0].trial_id, State::Failed, None),
        ],
    );
    assert!(!a.valid);
    assert_eq!(a.unexpected, [stranger]);
    assert_eq!(a.quarantined[0].reason, "unexpected_identity");
    assert_eq!(a.counts.agent_failed, 1);
    assert_eq!(a.counts.missing, 1);
    assert_eq!(a.counts.planned(), 2);
}

#[test]
fn accepted_records_are_in_plan_order_whatever_the_input_order() {
    let p = plan(&synthetic_spec(5, 1, 1, &clock()), &clock());
    let o: Vec<Observation> = p
        .trials
        .iter()
        .rev()
        .map(|t| obs(t.trial_id, State::Completed, Some(true)))
        .collect();
    let a = reconcile(&p, &o);
    let ord: Vec<u64> = a.accepted().map(|(t, _)| t.ordinal).collect();
    assert_eq!(ord, [0, 1, 2, 3, 4]);
    assert!(a.complete && a.valid);
}

#[test]
fn observations_file_format() {
    let id = crate::ids::uuid_v7_at(clock().now());
    let good = format!(
        "{{\"trial_id\":\"{id}\",\"state\":\"completed\",\"ok\":true,\"score\":1.0,\"attempt_id\":null,\"source\":\"x\"}}\n\n\
         {{\"trial_id\":\"{id}\",\"state\":\"not_graded\",\"ok\":null,\"score\":null,\"attempt_id\":null,\"source\":null}}\n"
    );
    let o = parse_observations(&good, Path::new("o.jsonl")).unwrap();
    assert_eq!(o.len(), 2);
    assert_eq!(o[1].state, State::NotGraded);
    let line = |body: &str| {
        format!("{{\"trial_id\":\"{id}\",\"state\":\"failed\",\"ok\":null,\"score\":null,\"attempt_id\":null,\"source\":null}}\n{body}\n")
    };
    let cases = [
        (line("{\"trial_id\":\"nope\",\"state\":\"failed\",\"ok\":null,\"score\":null,\"attempt_id\":null,\"source\":null}"), "UUID"),
        (line(&format!("{{\"trial_id\":\"{id}\",\"state\":\"executing\",\"ok\":null,\"score\":null,\"attempt_id\":null,\"source\":null}}")), "not terminal"),
        (line(&format!("{{\"trial_id\":\"{id}\",\"state\":\"completed\",\"ok\":null,\"score\":null,\"attempt_id\":null,\"source\":null}}")), "needs `ok`"),
        (line(&format!("{{\"trial_id\":\"{id}\",\"state\":\"not_graded\",\"ok\":null,\"score\":0.0,\"attempt_id\":null,\"source\":null}}")), "never measured"),
        (line(&format!("{{\"trial_id\":\"{id}\",\"state\":\"failed\",\"ok\":null,\"score\":null,\"attempt_id\":null,\"source\":null,\"extra\":1}}")), "extra"),
        (line("not json"), "expected"),
        // Every field is required (null allowed), as documented.
        (line(&format!("{{\"trial_id\":\"{id}\",\"state\":\"failed\",\"ok\":null,\"score\":null,\"source\":null}}")), "missing field `attempt_id`"),
        (line(&format!("{{\"trial_id\":\"{id}\",\"state\":\"failed\",\"ok\":null,\"score\":null,\"attempt_id\":null}}")), "missing field `source`"),
        (line(&format!("{{\"trial_id\":\"{id}\",\"state\":\"failed\",\"ok\":null,\"attempt_id\":null,\"source\":null}}")), "missing field `score`"),
    ];
    for (text, needle) in cases {
        let e = parse_observations(&text, Path::new("o.jsonl")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let s = e.to_string();
        assert!(s.contains(needle) && s.contains("line 2"), "{needle}: {s}");
    }
}

/// A line may carry what the trial spent (`spend`, e.g. from a Harbor import); it round-trips,
/// may be left out, and a malformed one refuses the file like any other field.
#[test]
fn observation_lines_keep_spend() {
    let id = crate::ids::uuid_v7_at(clock().now());
    let o = obs(id, State::Failed, None);
    let spend = crate::spend::Spend {
        input_tokens: Some(600),
        cached_input_tokens: Some(400),
        output_tokens: None,
        cost_usd: Some(0.5),
    };
    let with = ObservedLine {
        observation: o.clone(),
        spend: Some(spend),
    };
    let without = ObservedLine {
        observation: o.clone(),
        spend: None,
    };
    let text = format!(
        "{}\n{}\n",
        serde_json::to_string(&with).unwrap(),
        serde_json::to_string(&without).unwrap()
    );
    assert!(!text.lines().nth(1).unwrap().contains("spend"), "{text}");
    let lines = parse_lines(&text, Path::new("o.jsonl")).unwrap();
    assert_eq!(lines, [with, without]);
    assert_eq!(
        parse_observations(&text, Path::new("o.jsonl")).unwrap(),
        [o.clone(), o]
    );
    let bad = format!(
        "{{\"trial_id\":\"{id}\",\"state\":\"failed\",\"ok\":null,\"score\":null,\"attempt_id\":null,\"source\":null,\"spend\":{{\"input_tokens\":-1}}}}\n"
    );
    let e = parse_observations(&bad, Path::new("o.jsonl")).unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
}

/// A cost below 0 (or not finite) is refused, naming the file, the line and the field.
#[test]
fn a_negative_cost_is_refused_naming_the_field() {
    let id = crate::ids::uuid_v7_at(clock().now());
    let line = |cost: &str| {
        format!(
            "{{\"trial_id\":\"{id}\",\"state\":\"failed\",\"ok\":null,\"score\":null,\"attempt_id\":null,\"source\":null,\"spend\":{{\"cost_usd\":{cost}}}}}\n"
        )
    };
    for bad in ["-0.01", "-1e300"] {
        let text = format!("{}{}", line("0.5"), line(bad));
        let e = parse_lines(&text, Path::new("o.jsonl")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let m = e.to_string();
        assert!(m.contains("o.jsonl") && m.contains("spend.cost_usd"), "{m}");
    }
    assert!(parse_lines(&line("0"), Path::new("o.jsonl")).is_ok());
}

/// What the lines spent: planned trials only, an exact repeat once, differing lines of one
/// trial each, a count no line reported stays `None`.
#[test]
fn observed_spend_sums_the_planned_trials_lines() {
    let t0 = clock().now();
    let a = crate::ids::uuid_v7_at(t0);
    let b = crate::ids::uuid_v7_at(t0 + chrono::Duration::seconds(1));
    let stranger = crate::ids::uuid_v7_at(t0 + chrono::Duration::seconds(2));
    let planned: std::collections::HashSet<Uuid> = [a, b].into_iter().collect();
    let spent = |input, cost| crate::spend::Spend {
        input_tokens: Some(input),
        cached_input_tokens: None,
        output_tokens: Some(10),
        cost_usd: cost,
    };
    let line = |id, state, ok, spend| ObservedLine {
        observation: obs(id, state, ok),
        spend,
    };
    let done = |id, spend| line(id, State::Completed, Some(true), spend);
    let failed = |id, spend| line(id, State::Failed, None, spend);
    // (lines, expected spend, lines counted, lines without spend)
    let cases: Vec<(Vec<ObservedLine>, crate::spend::Spend, u64, u64)> = vec![
        (vec![], crate::spend::Spend::default(), 0, 0),
        (
            vec![
                done(a, Some(spent(100, Some(0.5)))),
                failed(b, Some(spent(50, None))),
            ],
            crate::spend::Spend {
                input_tokens: Some(150),
                cached_input_tokens: None,
                output_tokens: Some(20),
                cost_usd: Some(0.5),
            },
            2,
            0,
        ),
        // The same result read twice counts once.
        (
            vec![
                done(a, Some(spent(100, Some(0.5)))),
                done(a, Some(spent(100, Some(0.5)))),
            ],
            spent(100, Some(0.5)),
            1,
            0,
        ),
        // Conflicting results of one trial: both were spent.
        (
            vec![
                done(a, Some(spent(100, Some(0.5)))),
                failed(a, Some(spent(100, Some(0.5)))),
            ],
            crate::spend::Spend {
                input_tokens: Some(200),
                cached_input_tokens: None,
                output_tokens: Some(20),
                cost_usd: Some(1.0),
            },
            2,
            0,
        ),
        // A trial outside the plan is left out; a line without spend is counted as such.
        (
            vec![done(stranger, Some(spent(999, Some(9.0)))), failed(b, None)],
            crate::spend::Spend::default(),
            1,
            1,
        ),
    ];
    for (i, (lines, spend, counted, without)) in cases.into_iter().enumerate() {
        let got = observed_spend(&planned, &lines);
        assert_eq!(
            got,
            ObservedSpend {
                spend,
                lines: counted,
                lines_without_spend: without
            },
            "case {i}"
        );
    }
}

proptest! {
    #[test]
    fn buckets_always_partition_the_plan(
        picks in proptest::collection::vec((0usize..30, 0usize..9, any::<bool>()), 0..80)
    ) {
        let p = plan(&synthetic_spec(5, 2, 2, &clock()), &clock());
        let states = [
            State::Completed, State::Completed, State::Failed, State::Cancelled, State::Timeout,
            State::InvalidConfiguration, State::NotGraded, State::InfrastructureError,
            State::EvaluationError,
        ];
        let strangers: Vec<Uuid> = (0..10).map(|_| crate::ids::uuid_v7_at(clock().now())).collect();
        let o: Vec<Observation> = picks
            .iter()
            .map(|(i, s, ok)| {
                let id = if *i < 20 { p.trials[*i].trial_id } else { strangers[*i - 20] };
                let st = states[*s];
                obs(id, st, if st == State::Completed { Some(*ok) } else { None })
            })
            .collect();
        let a = reconcile(&p, &o);
        prop_assert_eq!(&a, &whole_plan(&p, &o));
        prop_assert_eq!(a.counts.planned(), 20);
        prop_assert_eq!(a.trials.len(), 20);
        for b in ALL_BUCKETS {
            let n = a.trials.iter().filter(|t| t.bucket == b).count() as u64;
            prop_assert_eq!(n, a.counts.get(b));
        }
        let ords: Vec<u64> = a.trials.iter().map(|t| t.ordinal).collect();
        prop_assert_eq!(ords, (0..20).collect::<Vec<_>>());
        prop_assert_eq!(a.valid, a.counts.quarantined == 0 && a.unexpected.is_empty());
        let graded = a.counts.succeeded + a.counts.failed;
        prop_assert_eq!(a.rates.pass_rate.is_none(), graded == 0);
    }
}

#[test]
fn coverage_counts_measured_trials_over_every_planned_one() {
    // (succeeded, cancelled, missing, quarantined, infrastructure errors) -> (covered,
    // with an outcome, planned, ratio)
    type Counts = (u64, u64, u64, u64, u64);
    type Want = (u64, u64, u64, Option<f64>);
    let table: [(Counts, Want); 6] = [
        ((0, 0, 0, 0, 0), (0, 0, 0, None)),
        ((10, 0, 0, 0, 0), (10, 10, 10, Some(1.0))),
        // The cancelled run: 12 ran, 68 cancelled. Never 100%.
        ((12, 68, 0, 0, 0), (12, 80, 80, Some(0.15))),
        ((0, 80, 0, 0, 0), (0, 80, 80, Some(0.0))),
        ((2, 1, 1, 0, 0), (2, 3, 4, Some(0.5))),
        ((1, 0, 1, 1, 1), (2, 2, 4, Some(0.5))),
    ];
    for ((succeeded, cancelled, missing, quarantined, infra), want) in table {
        let c = BucketCounts {
            succeeded,
            cancelled,
            missing,
            quarantined,
            infrastructure_error: infra,
            ..BucketCounts::default()
        };
        let cov = Coverage::of(&c);
        assert_eq!(
            (cov.covered, cov.with_outcome, cov.planned, cov.ratio()),
            want,
            "{c:?}"
        );
        // Every surface prints it through Rates.
        assert_eq!(Rates::from_counts(&c).coverage, want.3);
    }
    // Reconciled observations land on the same definition.
    let p = plan(&synthetic_spec(4, 1, 1, &clock()), &clock());
    let id = |i: usize| p.trials[i].trial_id;
    let a = reconcile(
        &p,
        &[
            obs(id(0), State::Completed, Some(true)),
            obs(id(1), State::Cancelled, None),
            obs(id(2), State::Cancelled, None),
            obs(id(3), State::Cancelled, None),
        ],
    );
    assert!(a.complete);
    assert_eq!(a.rates.coverage, Some(0.25));
}

#[test]
fn flagged_counts_are_absent_without_grades_and_cover_every_agent_with_them() {
    use crate::grading::integrity::FlagCounts;
    let p = plan(&synthetic_spec(2, 2, 1, &clock()), &clock());
    let a = reconcile(&p, &[]);
    assert_eq!(a.flagged, None, "observations carry no grade");
    let json = serde_json::to_value(&a).unwrap();
    assert!(json.get("flagged").is_none(), "absent, not null: {json}");
    let labels: std::collections::BTreeSet<String> =
        p.trials.iter().map(|t| t.agent.label.clone()).collect();
    assert_eq!(labels.len(), 2);
    let first = labels.iter().next().unwrap().clone();
    let seen = [(
        first.clone(),
        FlagCounts {
            tampered: 1,
            withheld: 2,
            unguarded: 3,
        },
    )]
    .into_iter()
    .collect();
    let a = a.with_flags(&p, seen);
    let flagged = a.flagged.as_ref().unwrap();
    assert_eq!(flagged.len(), 2, "every agent of the plan: {flagged:?}");
    for l in &labels {
        let want = if *l == first {
            FlagCounts {
                tampered: 1,
                withheld: 2,
                unguarded: 3,
            }
        } else {
            FlagCounts::default()
        };
        assert_eq!(flagged[l], want, "{l}");
    }
    let back: RunAccounting = serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
    assert_eq!(back, a);
}

/// The coordinator's settled bucket: every terminal state as `Bucket::of` counts an
/// observation of it, except a `completed` attempt without its record's `ok` (not counted
/// yet); no bucket for a state that is not terminal.
#[test]
fn settled_bucket_of_every_state() {
    for state in crate::lifecycle::ALL_STATES {
        for ok in [None, Some(true), Some(false)] {
            let got = Bucket::settled(state, ok);
            let want = if !state.is_terminal() || (state == State::Completed && ok.is_none()) {
                None
            } else {
                Some(Bucket::of(&obs(Uuid::nil(), state, ok)))
            };
            assert_eq!(got, want, "{state} ok {ok:?}");
        }
    }
    assert_eq!(
        Bucket::settled(State::Completed, Some(true)),
        Some(Bucket::Succeeded)
    );
    assert_eq!(
        Bucket::settled(State::Completed, Some(false)),
        Some(Bucket::Failed)
    );
    assert_eq!(Bucket::settled(State::Executing, Some(true)), None);
}

/// The accounting as it was computed before [`Accountant`] (the whole plan and every
/// observation held at once): the reference the streamed one must equal.
fn whole_plan(plan: &RunPlan, observations: &[Observation]) -> RunAccounting {
    let index: HashMap<Uuid, usize> = plan
        .trials
        .iter()
        .enumerate()
        .map(|(i, t)| (t.trial_id, i))
        .collect();
    // Per planned trial: indices of its observations.
    let mut seen: Vec<Vec<usize>> = vec![Vec::new(); plan.trials.len()];
    let mut unexpected_order: Vec<Uuid> = Vec::new();
    let mut unexpected: HashMap<Uuid, Vec<Observation>> = HashMap::new();
    for (j, o) in observations.iter().enumerate() {
        match index.get(&o.trial_id) {
            Some(&i) => seen[i].push(j),
            None => {
                let e = unexpected.entry(o.trial_id).or_default();
                if e.is_empty() {
                    unexpected_order.push(o.trial_id);
                }
                e.push(o.clone());
            }
        }
    }
    let mut counts = BucketCounts::default();
    let mut trials = Vec::with_capacity(plan.trials.len());
    let mut duplicates = Vec::new();
    let mut quarantined = Vec::new();
    for (t, obs) in plan.trials.iter().zip(&seen) {
        let (bucket, outcome) = match obs.as_slice() {
            [] => (Bucket::Missing, None),
            [j] => {
                let o = &observations[*j];
                (Bucket::of(o), Some(o.clone()))
            }
            [first, rest @ ..] => {
                let o = &observations[*first];
                let identical = rest.iter().all(|j| observations[*j] == *o);
                duplicates.push(Duplicate {
                    trial_id: t.trial_id,
                    count: obs.len(),
                    identical,
                });
                if identical {
                    (Bucket::of(o), Some(o.clone()))
                } else {
                    quarantined.push(Quarantined {
                        trial_id: t.trial_id,
                        reason: "conflicting_duplicate".into(),
                        observations: obs.iter().map(|j| observations[*j].clone()).collect(),
                    });
                    (Bucket::Quarantined, None)
                }
            }
        };
        counts.add(bucket);
        trials.push(AccountedTrial {
            ordinal: t.ordinal,
            trial_id: t.trial_id,
            key: t.key.clone(),
            bucket,
            outcome,
        });
    }
    for id in &unexpected_order {
        quarantined.push(Quarantined {
            trial_id: *id,
            reason: "unexpected_identity".into(),
            observations: unexpected.remove(id).unwrap_or_default(),
        });
    }
    let valid = counts.quarantined == 0 && unexpected_order.is_empty();
    let candidates = super::candidates_of(plan, &trials);
    RunAccounting {
        run_id: plan.run_id,
        run_key: plan.run_key.clone(),
        plan_digest: plan.digest.clone(),
        planned: plan.trials.len() as u64,
        observations: observations.len() as u64,
        rates: Rates::from_counts(&counts),
        valid,
        complete: counts.missing == 0 && counts.quarantined == 0,
        counts,
        trials,
        duplicates,
        unexpected: unexpected_order,
        quarantined,
        candidates,
        flagged: None,
    }
}
