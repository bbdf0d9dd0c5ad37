//! The size-bounded copy of an attempt record that a worker sends over its gRPC session.
//!
//! A record's free texts (the agent's final message and error text, the cause, the argv, the
//! evaluator's report, per-test messages, transition notes) and its list of per-test results
//! have no size of their own; one message over the session's limit would break the session
//! every time it is re-sent. [`for_wire`] returns the record unchanged when its canonical
//! JSON fits [`WIRE_RECORD_BYTES`]; otherwise it cuts those texts (each cut ends in a marker
//! naming the full copy, the `attempt_record.json` the worker stores with the attempt's
//! artifacts) and, if that is not enough, keeps the first per-test results only (the report
//! says how many), shrinking until it fits. Everything else (identity, states, transitions,
//! outcome, grade verdict, counts) is kept exactly.

use super::AttemptRecord;
use crate::digest::canonical_json;

/// The most a record sent over a worker session may take, as canonical JSON (the session's
/// message limit, `akbench_proto::MAX_WORKER_MESSAGE_BYTES`, is 4 MiB; the rest of the
/// message is small).
pub const WIRE_RECORD_BYTES: usize = 1 << 20;

/// The steps tried in turn: (longest kept text in bytes, most per-test results kept).
const STEPS: &[(usize, usize)] = &[
    (64 * 1024, 10_000),
    (8 * 1024, 2_000),
    (1024, 200),
    (128, 20),
    (0, 0),
];

/// `record`, cut to fit `budget` bytes of canonical JSON; `full_copy` names where the
/// untruncated record is (relative to the trial's artifacts). Returns the record and
/// whether anything was cut.
pub fn for_wire(record: &AttemptRecord, budget: usize, full_copy: &str) -> (AttemptRecord, bool) {
    if canonical_json(record).len() <= budget {
        return (record.clone(), false);
    }
    let mut last = record.clone();
    for &(text_cap, tests_cap) in STEPS {
        last = shortened(record, text_cap, tests_cap, full_copy);
        if canonical_json(&last).len() <= budget {
            break;
        }
    }
    (last, true)
}

fn shortened(
    record: &AttemptRecord,
    text_cap: usize,
    tests_cap: usize,
    full_copy: &str,
) -> AttemptRecord {
    let mut r = record.clone();
    let cut = |s: &mut String| cut_text(s, text_cap, full_copy);
    let cut_opt = |s: &mut Option<String>| {
        if let Some(s) = s.as_mut() {
            cut_text(s, text_cap, full_copy);
        }
    };
    cut_opt(&mut r.cause);
    cut_opt(&mut r.observations.final_message);
    cut_opt(&mut r.observations.error_text);
    for t in &mut r.transitions {
        cut_opt(&mut t.note);
    }
    if let Some(p) = r.agent_process.as_mut() {
        p.argv.iter_mut().for_each(cut);
    }
    if let Some(g) = r.grade.as_mut() {
        for t in &mut g.tests {
            cut_opt(&mut t.message);
        }
        let before = g.report.len();
        cut(&mut g.report);
        g.report_truncated |= g.report.len() < before;
        let all = g.tests.len();
        if all > tests_cap {
            g.tests.truncate(tests_cap);
            g.report.push_str(&format!(
                "\n[akbench: {tests_cap} of {all} test results kept in the record sent to the \
                 coordinator; all of them are in {full_copy}]"
            ));
            g.report_truncated = true;
        }
    }
    r
}

/// Cuts `s` to at most `cap` bytes (at a character boundary) plus a marker, when longer.
fn cut_text(s: &mut String, cap: usize, full_copy: &str) {
    let marker_room = 160 + full_copy.len();
    if s.len() <= cap.max(marker_room) {
        return;
    }
    let total = s.len();
    let mut keep = cap;
    while !s.is_char_boundary(keep) {
        keep -= 1;
    }
    s.truncate(keep);
    s.push_str(&format!(
        "\n[truncated by akbench: {keep} of {total} bytes kept; the full text is in {full_copy}]"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::State;
    use crate::record::{Grade, Identity, ProcessFacts, TestOutcome, TestResult};

    fn record() -> AttemptRecord {
        serde_json::from_value(serde_json::json!({
            "attempt": {"id": "01a22eed-53e1-766f-91b0-5c72fc60e4a7", "key": "t/a1"},
            "number": 1, "transitions": [], "state": "completed", "cause": null,
            "workspace": {"kept": false}, "agent_process": null, "observations": {},
            "timings_ms": {}, "grade": null, "artifacts_dir": "a1"
        }))
        .unwrap()
    }

    fn grade(tests: usize, message: usize) -> Grade {
        Grade {
            ok: false,
            score: 0.0,
            source: "exit_code".into(),
            exit_code: Some(1),
            tests: (0..tests)
                .map(|i| TestResult {
                    name: format!("t{i:06}"),
                    outcome: TestOutcome::Failed,
                    message: Some("m".repeat(message)),
                })
                .collect(),
            report: "r".repeat(64 * 1024),
            report_truncated: true,
            tests_digest: "sha256:x".into(),
            graded_at: chrono::DateTime::UNIX_EPOCH,
            duration_ms: 1,
            runtime: None,
            cause: None,
            tampered: false,
            tripwire: None,
            withheld: Vec::new(),
            ended_by: None,
            environment: None,
        }
    }

    #[test]
    fn a_small_record_is_sent_unchanged() {
        let mut r = record();
        r.observations.final_message = Some("done".into());
        r.grade = Some(grade(3, 10));
        let (w, cut) = for_wire(&r, WIRE_RECORD_BYTES, "a1/attempt_record.json");
        assert!(!cut);
        assert_eq!(w, r);
    }

    #[test]
    fn every_oversized_record_fits_and_keeps_its_verdict() {
        let big = "é".repeat(3 << 20); // 6 MiB of two-byte characters
        let cases: Vec<(&str, AttemptRecord)> = vec![
            ("final message", {
                let mut r = record();
                r.observations.final_message = Some(big.clone());
                r
            }),
            ("error text and cause", {
                let mut r = record();
                r.state = State::Failed;
                r.observations.error_text = Some(big.clone());
                r.cause = Some(big.clone());
                r
            }),
            ("argv", {
                let mut r = record();
                r.agent_process = Some(ProcessFacts {
                    argv: vec!["claude".into(), big.clone()],
                    ..ProcessFacts::default()
                });
                r
            }),
            ("many tests", {
                let mut r = record();
                r.grade = Some(grade(50_000, 1000));
                r
            }),
            ("huge test messages", {
                let mut r = record();
                r.grade = Some(grade(3, 2 << 20));
                r
            }),
        ];
        for (what, r) in cases {
            let (w, cut) = for_wire(&r, WIRE_RECORD_BYTES, "a1/attempt_record.json");
            assert!(cut, "{what}");
            let size = canonical_json(&w).len();
            assert!(size <= WIRE_RECORD_BYTES, "{what}: {size}");
            assert_eq!(w.state, r.state, "{what}");
            assert_eq!(w.attempt, r.attempt, "{what}");
            assert_eq!(
                w.grade.as_ref().map(|g| (g.ok, g.score)),
                r.grade.as_ref().map(|g| (g.ok, g.score)),
                "{what}"
            );
            let text = canonical_json(&w);
            assert!(
                text.contains("a1/attempt_record.json"),
                "{what}: names the full copy"
            );
        }
    }

    #[test]
    fn cuts_keep_character_boundaries_and_say_how_much_was_kept() {
        let mut s = "aé".repeat(100);
        cut_text(&mut s, 3, "f");
        // 160 + 1 bytes of marker room: 300 bytes is cut, at byte 3 (a boundary).
        assert!(
            s.starts_with("aé\n[truncated by akbench: 3 of 300 bytes kept"),
            "{s}"
        );
        let mut short = "abc".to_string();
        cut_text(&mut short, 1, "f");
        assert_eq!(short, "abc", "never longer than before");
        let _ = Identity {
            id: uuid::Uuid::nil(),
            key: String::new(),
        };
    }
}
