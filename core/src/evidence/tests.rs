use super::*;
use crate::clock::ManualClock;
use crate::plan::plan;
use crate::testkit::synthetic_spec;
use chrono::{TimeZone, Utc};

fn clock() -> ManualClock {
    ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 4, 0, 0, 0).unwrap())
}

#[test]
fn spec_then_draft_then_ready_and_lookup_by_key_or_uuid() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path().join("runs"));
    let spec = store.create_run(synthetic_spec(2, 2, 2, &clock())).unwrap();
    let draft = plan(&spec, &clock());
    let ready = draft.ready();
    // Ready before draft is refused.
    assert!(matches!(
        store.put_plan(&ready),
        Err(EvidenceError::OutOfOrder { .. })
    ));
    store.put_plan(&draft).unwrap();
    store.put_plan(&ready).unwrap();
    // Same content again: a no-op.
    store.put_plan(&ready).unwrap();
    let by_key = store.find(spec.run_key()).unwrap();
    let by_id = store.find(&spec.run_id().to_string()).unwrap();
    assert_eq!(by_key.state(), "ready");
    assert_eq!(by_key.spec, spec);
    assert_eq!(by_id.ready.as_ref().unwrap(), &ready);
    assert_eq!(by_key.draft.unwrap(), draft);
    let e = store.find("nope").unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains(spec.run_key()), "{e}");
}

#[test]
fn documents_are_immutable() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path());
    let spec = store.create_run(synthetic_spec(1, 1, 2, &clock())).unwrap();
    let draft = plan(&spec, &clock());
    store.put_plan(&draft).unwrap();
    let other = plan(&spec, &clock()); // fresh trial UUIDs: other content
    let e = store.put_plan(&other).unwrap_err();
    assert!(matches!(e, EvidenceError::Immutable { .. }), "{e}");
    assert_eq!(store.find(spec.run_key()).unwrap().draft.unwrap(), draft);
}

#[test]
fn a_taken_key_gets_a_suffix() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path());
    let a = store.create_run(synthetic_spec(1, 1, 1, &clock())).unwrap();
    let b = store.create_run(synthetic_spec(1, 1, 1, &clock())).unwrap();
    let c = store.create_run(synthetic_spec(1, 1, 1, &clock())).unwrap();
    assert_eq!(b.run_key(), format!("{}-2", a.run_key()));
    assert_eq!(c.run_key(), format!("{}-3", a.run_key()));
    assert!(b.verify());
    // Storing the same spec again keeps its key.
    assert_eq!(store.create_run(b.clone()).unwrap().run_key(), b.run_key());
    assert_eq!(store.find(&b.run_id().to_string()).unwrap().spec, b);
    assert_eq!(store.keys().len(), 3);
}

#[test]
fn tampering_is_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let store = EvidenceStore::new(tmp.path());
    let spec = store.create_run(synthetic_spec(1, 1, 1, &clock())).unwrap();
    let p = tmp.path().join(spec.run_key()).join(SPEC_FILE);
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("\"repetitions\":1", "\"repetitions\":2");
    std::fs::write(&p, text).unwrap();
    let e = store.find(spec.run_key()).unwrap_err();
    assert!(matches!(e, EvidenceError::Corrupt { .. }), "{e}");
}
