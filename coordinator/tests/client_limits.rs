//! What a client sends is bounded before it reaches the database or an error header: a real
//! private PostgreSQL, the coordinator served in-process on loopback, a tonic client sending
//! what no akbench client would (a 300 KB run id, a NUL byte, an oversize message). Each gets
//! a status naming the field (never INTERNAL, never a closed connection), and the coordinator
//! serves the next request.

mod common;

use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use common::control_plane::Coordinator;
use tonic::Code;

/// (case, what the coordinator answered, the code wanted, words the message must hold)
type Outcome = (
    &'static str,
    Result<(), tonic::Status>,
    Code,
    &'static [&'static str],
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identifiers_and_sizes_from_a_client_are_refused_with_a_status_naming_the_field() {
    let c = Coordinator::open().await;
    // The client may send what it likes: the limits under test are the server's.
    let mut client = ControlClient::new(c.channel().await)
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(usize::MAX);
    let huge = "r".repeat(300_000);
    let nul = "demo-20260304-ab12\0x".to_string();
    // (case, status, code wanted, words the message must hold)
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (name, run) in [("get run: 300 KB id", &huge), ("get run: NUL", &nul)] {
        let r = client
            .get_run(pb::GetRunRequest {
                run: run.clone(),
                include_documents: false,
            })
            .await
            .map(drop);
        outcomes.push((name, r, Code::InvalidArgument, &["run"]));
    }
    let r = client
        .get_status(pb::GetStatusRequest { run: nul.clone() })
        .await
        .map(drop);
    outcomes.push(("get status: NUL", r, Code::InvalidArgument, &["run"]));
    let r = client
        .reconcile(pb::ReconcileRequest {
            run: huge.clone(),
            observations_json: String::new(),
        })
        .await
        .map(drop);
    outcomes.push((
        "reconcile: 300 KB id",
        r,
        Code::InvalidArgument,
        &["run", "300000 bytes"],
    ));
    let r = client
        .list_runs(pb::ListRunsRequest {
            page_size: 0,
            page_token: String::new(),
            key_prefix: "demo\0".into(),
        })
        .await
        .map(drop);
    outcomes.push((
        "list runs: NUL prefix",
        r,
        Code::InvalidArgument,
        &["key_prefix"],
    ));
    let r = client
        .cancel_run(pb::CancelRunRequest {
            run: "demo-20260304-ab12".into(),
            reason: "stop\0".into(),
        })
        .await
        .map(drop);
    outcomes.push(("cancel: NUL reason", r, Code::InvalidArgument, &["reason"]));
    let r = client
        .fetch_records(pb::FetchRecordsRequest {
            run: "demo-20260304-ab12".into(),
            trials: vec![huge.clone()],
        })
        .await
        .map(drop);
    outcomes.push((
        "fetch records: 300 KB trial key",
        r,
        Code::InvalidArgument,
        &["trials"],
    ));
    // 80 MiB in one message: refused by its length, not decoded (the 64 MiB cap is near the
    // largest legitimate message; plans stream in chunks).
    let r = client
        .submit_plan(pb::SubmitPlanRequest {
            spec_json: "x".repeat(80 << 20),
            spec_digest: String::new(),
            plan_json: String::new(),
            plan_digest: String::new(),
        })
        .await
        .map(drop);
    outcomes.push((
        "submit plan: 80 MiB message",
        r,
        Code::OutOfRange,
        &["too large"],
    ));
    let mut failures = Vec::new();
    for (name, r, code, words) in outcomes {
        match r {
            Ok(()) => failures.push(format!("{name}: accepted")),
            Err(s) => {
                let m = s.message();
                if s.code() != code || m.len() > 1000 || !words.iter().all(|w| m.contains(w)) {
                    failures.push(format!(
                        "{name}: {:?} {}",
                        s.code(),
                        m.chars().take(300).collect::<String>()
                    ));
                }
            }
        }
    }
    // Still serving.
    let after = client
        .get_run(pb::GetRunRequest {
            run: "no-such-run".into(),
            include_documents: false,
        })
        .await
        .unwrap_err();
    assert_eq!(after.code(), Code::NotFound, "{after:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    c.stop().await;
}
