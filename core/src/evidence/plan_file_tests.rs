use super::*;
use crate::clock::{Clock, ManualClock};
use crate::plan::plan;
use crate::testkit::synthetic_spec;
use chrono::TimeZone;

fn clock() -> ManualClock {
    ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 4, 0, 0, 0).unwrap())
}

/// A spec whose trials each have `n` best-of-N candidates.
fn with_candidates(tasks: usize, agents: usize, reps: u32, n: u32) -> ResolvedRunSpec {
    let mut c = crate::testkit::synthetic_condition(tasks, agents, reps);
    c.execution.candidates = n;
    ResolvedRunSpec::assemble(c, Default::default(), &clock())
}

fn read(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap()
}

/// The plan files written by `put_plan` (the whole plan in memory) and by `write_plans` (one
/// trial at a time) for the same plan.
fn both_ways(spec: ResolvedRunSpec) -> (String, String, String, String, RunPlan, RunPlan) {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        EvidenceStore::new(tmp.path().join("a")),
        EvidenceStore::new(tmp.path().join("b")),
    );
    let spec = a.create_run(spec).unwrap();
    b.create_run(spec.clone()).unwrap();
    let draft = plan(&spec, &clock());
    let ready = draft.ready();
    a.put_plan(&draft).unwrap();
    a.put_plan(&ready).unwrap();
    let head = b
        .write_plans(&draft.head(), draft.trials.clone().into_iter())
        .unwrap();
    let (da, db) = (a.root().join(spec.run_key()), b.root().join(spec.run_key()));
    (
        read(&da, DRAFT_FILE),
        read(&db, DRAFT_FILE),
        read(&da, READY_FILE),
        read(&db, READY_FILE),
        ready,
        head,
    )
}

#[test]
fn streamed_plan_files_are_byte_identical_to_whole_ones() {
    let candidates = with_candidates(2, 1, 3, 3);
    // The large one: 3 tasks x 2 agents x 400 repetitions = 2,400 trials.
    for spec in [
        synthetic_spec(2, 2, 2, &clock()),
        synthetic_spec(3, 2, 400, &clock()),
        candidates,
    ] {
        let (draft_a, draft_b, ready_a, ready_b, ready, head) = both_ways(spec);
        assert_eq!(draft_a, draft_b);
        assert_eq!(ready_a, ready_b);
        assert_eq!(head, ready.head());
        assert_eq!(ready_b, canonical_json(&ready));
    }
}

#[test]
fn plan_streamed_writes_what_find_reads_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path());
    let spec = store.create_run(with_candidates(3, 2, 5, 2)).unwrap();
    let head = store.plan_streamed(&spec, clock().now()).unwrap();
    let stored = store.find(spec.run_key()).unwrap();
    let (draft, ready) = (stored.draft.unwrap(), stored.ready.unwrap());
    assert!(draft.verify() && ready.verify());
    assert_eq!(draft.trials, ready.trials);
    assert_eq!(ready.head(), head);
    ready.check().unwrap();
    // The same membership as planning in memory (ids are fresh each time).
    let whole = plan(&spec, &clock());
    let keys = |p: &RunPlan| p.trials.iter().map(|t| t.key.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&ready), keys(&whole));
    assert_eq!(ready.summary, whole.summary);
    // The head alone, then the trials one by one with their digest checked.
    let found = store.find_head(spec.run_key()).unwrap();
    assert_eq!(found.ready.as_ref(), Some(&head));
    let mut seen = Vec::new();
    store
        .stream_trials(&found.ready_path(), &head, |text| {
            let t: PlannedTrial = serde_json::from_str(text).unwrap();
            assert_eq!(text, canonical_json(&t));
            seen.push(t);
            Ok::<(), ()>(())
        })
        .unwrap()
        .unwrap();
    assert_eq!(seen, ready.trials);
}

#[test]
fn a_consumer_error_stops_the_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path());
    let spec = store.create_run(synthetic_spec(2, 2, 3, &clock())).unwrap();
    let head = store.plan_streamed(&spec, clock().now()).unwrap();
    let found = store.find_head(spec.run_key()).unwrap();
    let mut n = 0;
    let r = store
        .stream_trials(&found.ready_path(), &head, |_| {
            n += 1;
            if n == 3 {
                Err("enough")
            } else {
                Ok(())
            }
        })
        .unwrap();
    assert_eq!((r, n), (Err("enough"), 3));
}

#[test]
fn an_altered_trial_is_caught_by_the_stream_and_a_missing_plan_is_none() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path());
    let spec = store.create_run(synthetic_spec(2, 2, 3, &clock())).unwrap();
    let found = store.find_head(spec.run_key()).unwrap();
    assert!(found.ready.is_none());
    let head = store.plan_streamed(&spec, clock().now()).unwrap();
    let path = found.ready_path();
    // Still valid JSON, one trial's repetition changed: only the digest can tell.
    let text = read(&found.dir, READY_FILE).replacen("\"repetition\":2", "\"repetition\":7", 1);
    std::fs::write(&path, text).unwrap();
    let e = store
        .stream_trials(&path, &head, |_| Ok::<(), ()>(()))
        .unwrap_err();
    assert!(matches!(e, EvidenceError::Corrupt { .. }), "{e}");
    // A head whose summary disagrees with the number of trials: the head alone reads (its
    // trials are not scanned), the stream refuses it.
    let text = read(&found.dir, READY_FILE).replacen("\"trials\":12", "\"trials\":13", 1);
    std::fs::write(&path, text).unwrap();
    let found = store.find_head(spec.run_key()).unwrap();
    let altered = found.ready.clone().unwrap();
    assert_eq!(altered.summary.trials, 13);
    let e = store
        .stream_trials(&path, &altered, |_| Ok::<(), ()>(()))
        .unwrap_err();
    assert!(matches!(e, EvidenceError::Corrupt { .. }), "{e}");
    // A head cut before its trials is refused on read.
    let text = read(&found.dir, READY_FILE);
    let cut = &text[..text.find("\"trials\":[").unwrap()];
    std::fs::write(&path, cut).unwrap();
    let e = store.find_head(spec.run_key()).unwrap_err();
    assert!(matches!(e, EvidenceError::Corrupt { .. }), "{e}");
}

#[test]
fn streamed_plans_are_immutable_and_rewriting_the_same_is_a_no_op() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path());
    let spec = store.create_run(synthetic_spec(2, 1, 2, &clock())).unwrap();
    let draft = plan(&spec, &clock());
    store
        .write_plans(&draft.head(), draft.trials.clone().into_iter())
        .unwrap();
    store
        .write_plans(&draft.head(), draft.trials.clone().into_iter())
        .unwrap();
    let e = store.plan_streamed(&spec, clock().now()).unwrap_err();
    assert!(matches!(e, EvidenceError::Immutable { .. }), "{e}");
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(store.root().join(spec.run_key()))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");
}

#[test]
fn a_plan_without_its_spec_is_out_of_order() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path());
    let spec = synthetic_spec(1, 1, 1, &clock());
    let e = store.plan_streamed(&spec, clock().now()).unwrap_err();
    assert!(matches!(e, EvidenceError::OutOfOrder { .. }), "{e}");
}
