use super::stats::*;
use super::*;
use crate::spec_diff::ChangeKind;

fn t(task: &str, agent: &str, rep: u32, bucket: Bucket) -> CompareTrial {
    CompareTrial {
        key: format!("run/{task}/{agent}/r{rep}"),
        task: task.into(),
        agent: agent.into(),
        repetition: rep,
        bucket,
    }
}

#[test]
fn wilson_intervals_match_published_values() {
    // (successes, n) -> (low, high), from the closed form (Wilson 1927; Newcombe 1998 table).
    let table = [
        (5, 10, 0.236_593, 0.763_407),
        (0, 10, 0.0, 0.277_533),
        (10, 10, 0.722_467, 1.0),
        (81, 263, 0.255_289, 0.366_210),
    ];
    for (k, n, lo, hi) in table {
        let i = wilson(k, n).unwrap();
        assert!((i.low - lo).abs() < 1e-6, "{k}/{n}: {i:?}");
        assert!((i.high - hi).abs() < 1e-6, "{k}/{n}: {i:?}");
    }
    assert_eq!(wilson(0, 0), None);
}

#[test]
fn mcnemar_exact_p_values() {
    let table = [
        (0, 0, 1.0),
        (0, 5, 0.0625),
        (5, 0, 0.0625),
        (1, 9, 0.021_484_375),
        (3, 3, 1.0),
        (2, 6, 0.289_062_5),
    ];
    for (b, c, p) in table {
        let got = mcnemar_exact(b, c);
        assert!((got - p).abs() < 1e-12, "b={b} c={c}: {got}");
    }
    // Large counts stay finite and tiny, not NaN or 0/0.
    let p = mcnemar_exact(100, 2000);
    assert!(p > 0.0 && p < 1e-300 || p == 0.0, "{p}");
    assert!(mcnemar_exact(1500, 1500) > 0.9);
}

#[test]
fn splitmix64_matches_the_reference_sequence() {
    // Reference outputs of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
    let mut r = SplitMix64::new(0);
    assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    let mut r = SplitMix64::new(7);
    for _ in 0..1000 {
        assert!(r.below(3) < 3);
    }
}

#[test]
fn bootstrap_is_deterministic_and_degenerate_cases_are_exact() {
    let pairs = [
        (true, false),
        (false, true),
        (false, true),
        (true, true),
        (false, false),
    ];
    let a = paired_bootstrap(&pairs, 2000, 42).unwrap();
    let b = paired_bootstrap(&pairs, 2000, 42).unwrap();
    assert_eq!(a, b);
    assert!(a.interval.low <= 0.2 && a.interval.high >= 0.2, "{a:?}");
    let all_gained = [(false, true); 4];
    let g = paired_bootstrap(&all_gained, 100, 1).unwrap();
    assert_eq!((g.interval.low, g.interval.high), (1.0, 1.0));
    assert_eq!(paired_bootstrap(&[], 100, 1), None);
    assert_eq!(paired_bootstrap(&pairs, 0, 1), None);
}

#[test]
fn pairs_flips_and_unpaired_trials() {
    use Bucket::*;
    let left = vec![
        t("a", "x", 1, Succeeded),
        t("a", "x", 2, Succeeded),
        t("b", "x", 1, Failed),
        t("c", "x", 1, InfrastructureError),
        t("d", "x", 1, TimedOut),
        t("e", "x", 1, Succeeded),
    ];
    let right = vec![
        t("a", "x", 1, Failed),
        t("a", "x", 2, Succeeded),
        t("b", "x", 1, Succeeded),
        t("c", "x", 1, Succeeded),
        t("d", "x", 1, Succeeded),
        t("f", "x", 1, NotGraded),
    ];
    let c = compare(&left, &right, &AgentPairing::Shared, Options::default()).unwrap();
    assert_eq!(c.paired.pairs, 4);
    assert_eq!(
        (c.paired.lost, c.paired.gained, c.paired.both_solved),
        (1, 2, 1)
    );
    let flips: Vec<(Flip, &str)> = c
        .flips
        .iter()
        .map(|f| (f.direction, f.pair.task.as_str()))
        .collect();
    assert_eq!(
        flips,
        [(Flip::Lost, "a"), (Flip::Gained, "b"), (Flip::Gained, "d")]
    );
    let un: Vec<(&str, &str)> = c
        .unpaired
        .iter()
        .map(|u| (u.task.as_str(), u.reason.as_str()))
        .collect();
    assert_eq!(
        un,
        [("c", "excluded"), ("e", "only_left"), ("f", "only_right")]
    );
    // The infrastructure error is not a failure on either side's rates.
    assert_eq!(c.left.total.counts.infrastructure_error, 1);
    assert_eq!(c.left.total.rates.graded, 4);
    assert_eq!(c.paired.difference, Some(0.25));
    assert!((c.paired.mcnemar_p - 1.0).abs() < 1e-12);
}

#[test]
fn duplicates_are_not_paired() {
    use Bucket::*;
    let left = vec![t("a", "x", 1, Succeeded), t("a", "x", 1, Failed)];
    let right = vec![t("a", "x", 1, Succeeded)];
    let c = compare(&left, &right, &AgentPairing::Shared, Options::default()).unwrap();
    assert_eq!(c.paired.pairs, 0);
    assert_eq!(c.unpaired[0].reason, "duplicate");
    assert_eq!(c.paired.difference, None);
    assert_eq!(c.paired.bootstrap, None);
}

#[test]
fn agent_pairing() {
    use Bucket::*;
    let left = vec![t("a", "x", 1, Succeeded), t("a", "y", 1, Failed)];
    let right = vec![t("a", "x", 1, Failed), t("a", "z", 1, Succeeded)];
    let e = compare(&left, &right, &AgentPairing::Shared, Options::default()).unwrap_err();
    assert!(matches!(e, CompareError::AgentsDiffer { .. }), "{e}");
    assert!(e.to_string().contains("--left-agent"), "{e}");
    let named = AgentPairing::Named {
        left: "y".into(),
        right: "z".into(),
    };
    let c = compare(&left, &right, &named, Options::default()).unwrap();
    assert_eq!(c.pairing, [("y".to_string(), "z".to_string())]);
    assert_eq!(c.paired.gained, 1);
    assert_eq!(
        c.left.total.trials, 1,
        "only the named agent's trials count"
    );
    let bad = AgentPairing::Named {
        left: "nope".into(),
        right: "z".into(),
    };
    let e = compare(&left, &right, &bad, Options::default()).unwrap_err();
    assert!(
        matches!(e, CompareError::UnknownAgent { side: "left", .. }),
        "{e}"
    );
    // One agent on each side: paired without naming them.
    let l1 = vec![t("a", "old", 1, Failed)];
    let r1 = vec![t("a", "new", 1, Succeeded)];
    let c = compare(&l1, &r1, &AgentPairing::Shared, Options::default()).unwrap();
    assert_eq!(c.paired.gained, 1);
}

#[test]
fn which_spec_changes_block_a_comparison() {
    let ch = |path: &str| Change {
        path: path.into(),
        kind: ChangeKind::Changed,
        left: None,
        right: None,
    };
    let d = SpecDiff {
        changes: vec![
            ch("agents.x.digest"),
            ch("evaluation.profile"),
            ch("repetitions"),
            ch("tasks.a.release.digest"),
            ch("taskset"),
        ],
    };
    let paths: Vec<String> = blocking_changes(&d).into_iter().map(|c| c.path).collect();
    assert_eq!(paths, ["evaluation.profile", "tasks.a.release.digest"]);
}

#[test]
fn flat_conditions_diff() {
    use serde_json::json;
    let l = BTreeMap::from([
        ("tasks.a".to_string(), json!("v1")),
        ("tasks.b".to_string(), json!("v1")),
        ("evaluation.grade".to_string(), json!(true)),
    ]);
    let r = BTreeMap::from([
        ("tasks.a".to_string(), json!("v2")),
        ("tasks.c".to_string(), json!("v1")),
        ("evaluation.grade".to_string(), json!(true)),
    ]);
    let d = diff_flat(&l, &r);
    let got: Vec<(&str, ChangeKind)> = d
        .changes
        .iter()
        .map(|c| (c.path.as_str(), c.kind))
        .collect();
    assert_eq!(
        got,
        [
            ("tasks.a", ChangeKind::Changed),
            ("tasks.b", ChangeKind::Removed),
            ("tasks.c", ChangeKind::Added)
        ]
    );
    assert!(diff_flat(&l, &l).is_empty());
}
