use super::*;
use crate::spec::resolve;
use crate::spec::tests::{clock, fixture, inputs, manifest};
use crate::testkit::{synthetic_condition, synthetic_spec, synthetic_task};
use proptest::prelude::*;

#[test]
fn three_tasks_two_agents_three_reps_plan_eighteen_trials() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let spec = resolve(&manifest(3), &inputs(&tasks, &agents), &clock()).unwrap();
    let p = plan(&spec, &clock());
    assert_eq!(p.trials.len(), 18);
    p.check().unwrap();
    assert!(p.verify());
    let ordinals: Vec<u64> = p.trials.iter().map(|t| t.ordinal).collect();
    assert_eq!(ordinals, (0..18).collect::<Vec<_>>());
    // Stable order: task x agent x repetition.
    let k = &spec.identity.run_key;
    assert_eq!(p.trials[0].key, format!("{k}/a-001/oracle/r1"));
    assert_eq!(p.trials[2].key, format!("{k}/a-001/oracle/r3"));
    assert_eq!(p.trials[3].key, format!("{k}/a-001/fail/r1"));
    assert_eq!(p.trials[17].key, format!("{k}/a-003/fail/r3"));
    let s = &p.summary;
    assert_eq!(s.trials, 18);
    assert_eq!(s.by_task.values().copied().collect::<Vec<_>>(), [6, 6, 6]);
    assert_eq!(s.by_agent["oracle"], 9);
    assert_eq!(s.by_agent["fail"], 9);
    assert_eq!(
        s.by_repetition.values().copied().collect::<Vec<_>>(),
        [6, 6, 6]
    );
    assert_eq!(s.by_family["artefact"], 18);
    assert_eq!(s.by_backend["sandbox"], 18);
    assert_eq!(s.by_visibility["private"], 18);
    assert_eq!(s.by_lifecycle["pending"], 18);
    assert!(p.trials.iter().all(|t| t.run_id == spec.identity.run_id));
    assert_eq!(p.trials[0].attempt.max_attempts, 1);
}

#[test]
fn planning_twice_gives_the_same_keys_and_fresh_uuids() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let a = plan(
        &resolve(&manifest(3), &inputs(&tasks, &agents), &clock()).unwrap(),
        &clock(),
    );
    let b = plan(
        &resolve(&manifest(3), &inputs(&tasks, &agents), &clock()).unwrap(),
        &clock(),
    );
    let keys = |p: &RunPlan| p.trials.iter().map(|t| t.key.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&a), keys(&b));
    assert_eq!(a.summary, b.summary);
    assert!(a
        .trials
        .iter()
        .zip(&b.trials)
        .all(|(x, y)| x.trial_id != y.trial_id));
}

#[test]
fn every_family_plans_the_same_way() {
    let mut c = synthetic_condition(0, 2, 2);
    c.tasks = vec![
        synthetic_task("art", "1", Family::Artefact),
        synthetic_task("int", "1", Family::Interactive),
        synthetic_task("life", "1", Family::Lifecycle),
    ];
    let spec = ResolvedRunSpec::assemble(c, Default::default(), &clock());
    let p = plan(&spec, &clock());
    p.check().unwrap();
    for f in ["artefact", "interactive", "lifecycle"] {
        assert_eq!(p.summary.by_family[f], 4, "{f}");
    }
}

#[test]
fn ready_keeps_membership_and_changes_the_digest() {
    let spec = synthetic_spec(2, 2, 2, &clock());
    let d = plan(&spec, &clock());
    let r = d.ready();
    assert_eq!(r.stage, PlanStage::Ready);
    assert_eq!(r.trials, d.trials);
    assert_ne!(r.digest, d.digest);
    assert!(r.verify());
}

#[test]
fn check_catches_broken_plans() {
    let spec = synthetic_spec(2, 1, 2, &clock());
    let mut p = plan(&spec, &clock());
    p.trials[1].ordinal = 5;
    assert!(p.check().is_err());
    let mut p = plan(&spec, &clock());
    p.trials[1].trial_id = p.trials[0].trial_id;
    assert!(p.check().unwrap_err().contains("twice"));
    // Keys are remembered as 16-byte digests: a repeated key is still named.
    let mut p = plan(&spec, &clock());
    p.trials[2].key = p.trials[0].key.clone();
    assert_eq!(
        p.check().unwrap_err(),
        format!("trial key {} appears twice", p.trials[0].key)
    );
    let mut p = plan(&spec, &clock());
    p.summary.trials = 9;
    assert!(p.check().is_err());
}

proptest! {
    #[test]
    fn plans_always_hold_their_invariants(t in 1usize..6, a in 1usize..4, r in 1u32..4) {
        let spec = synthetic_spec(t, a, r, &clock());
        let p = plan(&spec, &clock());
        prop_assert_eq!(p.trials.len(), t * a * r as usize);
        prop_assert!(p.check().is_ok());
        prop_assert_eq!(p.summary.by_task.len(), t);
        prop_assert!(p.summary.by_agent.values().all(|n| *n == (t * r as usize) as u64));
    }
}

#[test]
fn candidates_plan_as_whole_groups_under_their_trial() {
    use crate::clock::SystemClock;
    let mut spec = synthetic_spec(2, 1, 2, &SystemClock);
    spec.condition.execution.candidates = 3;
    let p = plan(&spec, &SystemClock);
    assert_eq!(p.trials.len(), 12);
    assert_eq!(spec.trial_count(), 12);
    p.check().unwrap();
    let first = p.trials[0].candidate.clone().unwrap();
    assert_eq!((first.index, first.of), (1, 3));
    assert_eq!(p.trials[0].key, format!("{}/c1", first.trial_key));
    assert_ne!(
        p.trials[0].trial_id, first.trial_id,
        "a candidate has its own UUID"
    );
    assert!(crate::ids::is_uuid_v7(&first.trial_id));
    let same_trial: Vec<_> = p.trials[..3]
        .iter()
        .map(|t| t.candidate.as_ref().unwrap().trial_id)
        .collect();
    assert!(same_trial.iter().all(|id| *id == first.trial_id));
    assert_ne!(
        p.trials[3].candidate.as_ref().unwrap().trial_id,
        first.trial_id
    );
    // A broken group is refused.
    let mut broken = p.clone();
    broken.trials.remove(1);
    for (i, t) in broken.trials.iter_mut().enumerate() {
        t.ordinal = i as u64;
    }
    broken.summary = PlanSummary::of(&broken.trials);
    assert!(
        broken.check().unwrap_err().contains("candidate"),
        "{:?}",
        broken.check()
    );
    let mut mixed = p.clone();
    mixed.trials[4].candidate = None;
    assert!(mixed.check().is_err());
}

/// The expansion as it was before it became lazy (one `Vec` built in nested loops), kept to
/// check [`Expansion`] against.
fn reference_trials(spec: &ResolvedRunSpec, now: DateTime<Utc>) -> Vec<PlannedTrial> {
    use crate::ids::{candidate_key, trial_key, uuid_v7_at};
    let c = &spec.condition;
    let recipe = AttemptRecipe {
        infrastructure_retries: c.execution.infrastructure_retries,
        candidates: c.execution.candidates,
        max_attempts: c
            .execution
            .candidates
            .saturating_mul(c.execution.infrastructure_retries.saturating_add(1)),
    };
    let mut trials = Vec::new();
    let mut ordinal = 0u64;
    for task in &c.tasks {
        for agent in &c.agents {
            for repetition in 1..=c.repetitions {
                let trial_id = uuid_v7_at(now);
                let key = trial_key(
                    &spec.identity.run_key,
                    &task.release.id,
                    &agent.label,
                    repetition,
                );
                let n = c.execution.candidates.max(1);
                for index in 1..=n {
                    let (id, entry_key, candidate) = if n == 1 {
                        (trial_id, key.clone(), None)
                    } else {
                        let of = CandidateOf {
                            trial_id,
                            trial_key: key.clone(),
                            index,
                            of: n,
                            selection: c.execution.selection,
                        };
                        (uuid_v7_at(now), candidate_key(&key, index), Some(of))
                    };
                    trials.push(PlannedTrial {
                        trial_id: id,
                        key: entry_key,
                        ordinal,
                        run_id: spec.identity.run_id,
                        task: task.release.clone(),
                        task_source: TrialTaskSource {
                            repo: task.source_repo.clone(),
                            commit: task.source_commit.clone(),
                            image: task.image.clone(),
                        },
                        agent: TrialAgent {
                            label: agent.label.clone(),
                            descriptor: agent.descriptor.name.clone(),
                            adapter: agent.descriptor.adapter.clone(),
                            model: agent.model.clone(),
                            digest: agent.digest.clone(),
                        },
                        compute: ComputeCondition {
                            runtime: c.execution.runtime,
                            cpus: c.compute.cpus,
                            memory_mb: c.compute.memory_mb,
                            diff_mb: c.compute.diff_mb,
                            agent_timeout_sec: task.agent_timeout_sec,
                            verifier_timeout_sec: task.verifier_timeout_sec,
                            grading_environment: c.execution.grading_environment,
                        },
                        repetition,
                        family: task.family,
                        attempt: recipe,
                        evaluation: c.evaluation.clone(),
                        visibility: c.visibility,
                        candidate,
                    });
                    ordinal += 1;
                }
            }
        }
    }
    trials
}

/// Ids replaced by their order of first appearance (fresh UUIDs differ run to run).
fn normalized(mut trials: Vec<PlannedTrial>) -> Vec<PlannedTrial> {
    let mut seen = std::collections::HashMap::new();
    let mut id = |u: Uuid| {
        let n = seen.len() as u128;
        *seen.entry(u).or_insert(Uuid::from_u128(n))
    };
    for t in &mut trials {
        if let Some(c) = &mut t.candidate {
            c.trial_id = id(c.trial_id);
        }
        t.trial_id = id(t.trial_id);
    }
    trials
}

#[test]
fn the_lazy_expansion_gives_the_trials_of_the_nested_loops() {
    let now = clock().now();
    let mut candidates = synthetic_spec(3, 2, 4, &clock());
    candidates.condition.execution.candidates = 3;
    let mut none = synthetic_spec(2, 2, 1, &clock());
    none.condition.repetitions = 0;
    for spec in [
        synthetic_spec(3, 2, 4, &clock()),
        synthetic_spec(1, 1, 1, &clock()),
        synthetic_spec(2, 3, 300, &clock()),
        candidates,
        none,
    ] {
        let lazy: Vec<PlannedTrial> = Expansion::new(&spec, now).collect();
        assert_eq!(lazy.len() as u64, spec.trial_count());
        assert_eq!(
            normalized(lazy.clone()),
            normalized(reference_trials(&spec, now))
        );
        // The summary counted one at a time equals the summary of the slice, and the
        // streamed digest the digest of the whole document.
        let mut c = SummaryCounter::default();
        lazy.iter().for_each(|t| c.add(t));
        let p = plan(&spec, &clock());
        assert_eq!(c.finish(), PlanSummary::of(&lazy));
        assert_eq!(p.digest, crate::digest::sealed_digest(&p));
        assert_eq!(p.ready().digest, crate::digest::sealed_digest(&p.ready()));
    }
}

#[test]
fn membership_is_the_specs_expansion_and_tampering_shows() {
    use crate::clock::SystemClock;
    // 8 tasks x 2 agents x 2 repetitions, as in the issue; then with candidates.
    for candidates in [1, 3] {
        let mut spec = synthetic_spec(8, 2, 2, &SystemClock);
        spec.condition.execution.candidates = candidates;
        let p = plan(&spec, &SystemClock);
        check_membership(&spec, &p.trials).unwrap();
        check_membership(&spec, &p.ready().trials).unwrap();
        let renumber = |trials: &mut Vec<PlannedTrial>| {
            for (i, t) in trials.iter_mut().enumerate() {
                t.ordinal = i as u64;
            }
        };
        // (what was done, words the refusal must have)
        let mut cases: Vec<(Vec<PlannedTrial>, &str)> = Vec::new();
        let mut removed = p.trials.clone();
        removed.pop();
        cases.push((removed, "missing"));
        let mut removed_inside = p.trials.clone();
        removed_inside.remove(5);
        renumber(&mut removed_inside);
        cases.push((removed_inside, "differs"));
        let mut extra = p.trials.clone();
        let mut more = extra.last().unwrap().clone();
        more.ordinal += 1;
        extra.push(more);
        cases.push((extra, "not in the spec"));
        let mut altered = p.trials.clone();
        altered[3].compute.memory_mb = 1;
        cases.push((altered, "compute"));
        let mut other_task = p.trials.clone();
        other_task[0].task.digest = "sha256:00".into();
        cases.push((other_task, "task"));
        for (trials, words) in cases {
            let e = check_membership(&spec, &trials).unwrap_err();
            assert!(e.contains(words), "{words}: {e}");
        }
    }
}
