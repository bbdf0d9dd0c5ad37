//! Worker messages over the session's size limit never wedge a session: an agent whose final
//! message is larger than a gRPC message may be, and a task whose evaluator reports tens of
//! thousands of long test failures, each end with their record accepted (cut to fit, the
//! cut naming the full `attempt_record.json` in the artifact store), and the same session
//! goes on to take the next trial. The real coordinator on a private PostgreSQL, real
//! processes, real gRPC over loopback.

mod common;
mod coord;

use akbench_core::lifecycle::State;
use akbench_core::record::wire::WIRE_RECORD_BYTES;
use akbench_worker::daemon::Exit;
use common::{corpus, Corpus, TEST_SH};
use coord::{config, eventually, spawn, work_items, Coord};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);

/// Runs two trials of `agent` on one worker with one slot (so the second can only start
/// once the first's record was delivered on the same session), then checks both records.
async fn both_accepted(
    c: &Corpus,
    agent: &str,
    grade: bool,
) -> Vec<akbench_core::record::AttemptRecord> {
    let coord = Coord::start(TTL).await;
    let items = work_items(c, agent, 2, grade);
    let (_, trials) = coord.enqueue_items(&items).await;
    let mut cfg = config(c, &coord, &format!("w-big-{agent}"), 1);
    let store = c.root().join(format!("artifact-store-{agent}"));
    cfg.artifacts = Some(store.display().to_string());
    let (h, run) = spawn(cfg);
    let mut records = Vec::new();
    for (trial, item) in trials.iter().zip(&items) {
        let a = coord
            .wait_attempt(*trial, "the attempt to end", |a| a.terminal.is_some())
            .await;
        let (record, _, value) =
            eventually(60, "the record", || async { coord.record(a.id).await }).await;
        let size = value.to_string().len();
        assert!(
            size <= WIRE_RECORD_BYTES + 4096,
            "{agent}: {size} bytes stored"
        );
        // The full record is in the artifact store.
        let full = store
            .join(&item.trial.key)
            .join("a1")
            .join("attempt_record.json");
        assert!(full.is_file(), "{}", full.display());
        assert!(
            std::fs::metadata(&full).unwrap().len() > WIRE_RECORD_BYTES as u64,
            "{agent}: the stored copy is the full one"
        );
        records.push(record);
    }
    // One session did all of it: never reset, nothing leased any more.
    let s = h.wait_for(|s| s.held.is_empty() && s.running == 0).await;
    assert_eq!(s.assignments, 2);
    assert_eq!(s.sessions, 1, "the session was never reset");
    coord.service.drain_all("test over");
    assert_eq!(run.await.unwrap(), Exit::Drained);
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_message_over_the_message_limit_is_accepted_and_the_session_lives() {
    let c = corpus();
    // A claude-code agent whose last event carries a 6 MiB final message.
    let script = c.agents().join("loud.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"'\n\
         head -c 6291456 /dev/zero | tr '\\0' x\nprintf '\"}\\n'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    c.add_agent(
        "loud",
        &format!(
            "adapter = \"claude-code\"\nprogram = \"{}\"\n",
            script.display()
        ),
        None,
    );
    let records = both_accepted(&c, "loud", false).await;
    for r in records {
        assert_eq!(r.state, State::NotGraded, "{:?}", r.cause);
        let m = r.observations.final_message.expect("a final message");
        assert!(m.starts_with("xxxx"), "{}", &m[..40]);
        assert!(
            m.contains("of 6291456 bytes kept; the full text is in")
                && m.ends_with("/a1/attempt_record.json]"),
            "{}",
            &m[m.len().saturating_sub(200)..]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_evaluator_output_is_accepted_and_the_session_lives() {
    let c = corpus();
    // The tests print 20 MiB and report 6,000 failed tests with long messages.
    let loud_tests = format!(
        "{TEST_SH}\nhead -c 20971520 /dev/zero | tr '\\0' y\n\
         m=$(head -c 2000 /dev/zero | tr '\\0' z)\n\
         {{ echo '<testsuite>'; i=0; while [ $i -lt 6000 ]; do \
         echo \"<testcase name=\\\"t$i\\\"><failure message=\\\"$m\\\"/></testcase>\"; i=$((i+1)); done; \
         echo '</testsuite>'; }} > \"$AKBENCH_VERIFIER_DIR/junit.xml\"\n"
    );
    std::fs::write(c.tasks().join("answer/tests/test.sh"), loud_tests).unwrap();
    let records = both_accepted(&c, "oracle", true).await;
    for r in records {
        assert_eq!(r.state, State::Completed, "{:?}", r.cause);
        let g = r.grade.expect("graded");
        assert!(g.ok, "the verdict is kept");
        assert!(g.tests.len() < 6_000, "{}", g.tests.len());
        assert!(
            g.report
                .contains("test results kept in the record sent to the coordinator"),
            "{}",
            &g.report[g.report.len().saturating_sub(300)..]
        );
    }
}
