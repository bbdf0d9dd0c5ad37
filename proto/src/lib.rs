//! akbench wire protocol: the generated prost messages and tonic clients and servers for the
//! `Control` service (used by the `akbench` CLI) and the `Workers` service (one bidirectional
//! `Session` stream per worker), and the one conversion of core's lifecycle states to and from
//! the wire's ([`state`]), of core's per-step counts of multi-step tasks ([`steps`]), and how a
//! plan is cut into `SubmitPlanStream` messages ([`plan_chunks`]). No other logic lives here.
//!
//! The `.proto` sources are under `akbench/v1/` in this crate and are compiled at build time
//! with protox, so no system `protoc` is needed.

/// Version 1 of the protocol (protobuf package `akbench.v1`).
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    missing_debug_implementations
)]
pub mod v1 {
    tonic::include_proto!("akbench.v1");
}

pub mod plan_chunks;
pub mod state;
pub mod steps;

pub use v1::{control_client, control_server, workers_client, workers_server};

/// The largest message a worker sends on its `Session`, in bytes. Both ends set it: the
/// coordinator decodes nothing larger, the worker encodes nothing larger, and a worker cuts
/// an oversized record to fit before sending it (`akbench_core::record::wire`; the full
/// record travels through the artifact store).
pub const MAX_WORKER_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The largest message the coordinator sends on a `Session` (an `Assignment` carries the
/// work item with the task's instruction), in bytes; set on both ends.
pub const MAX_COORDINATOR_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::v1::*;
    use prost::Message;

    fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(message: &M) {
        let bytes = message.encode_to_vec();
        let decoded = M::decode(bytes.as_slice()).expect("decodes what it encoded");
        assert_eq!(&decoded, message);
    }

    #[test]
    fn worker_messages_round_trip() {
        let hello = WorkerMessage {
            body: Some(worker_message::Body::Hello(Hello {
                worker_id: "host-1".into(),
                slots: 4,
                labels: [("arch".to_string(), "x86_64".to_string())].into(),
                version: "0.1.0".into(),
                held_leases: vec![HeldLease {
                    attempt_id: "a".into(),
                    epoch: 7,
                }],
                instance_id: "0192f3c4-1".into(),
            })),
        };
        let batch = WorkerMessage {
            body: Some(worker_message::Body::Transitions(TransitionBatch {
                attempt_id: "a".into(),
                epoch: 7,
                transitions: vec![Transition {
                    seq: 1,
                    state: AttemptState::Preparing as i32,
                    at_unix_ms: 1_700_000_000_000,
                    note: String::new(),
                }],
                traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            })),
        };
        let finished = WorkerMessage {
            body: Some(worker_message::Body::Finished(AttemptFinished {
                attempt_id: "a".into(),
                epoch: 7,
                terminal_state: AttemptState::NotGraded as i32,
                cause: String::new(),
                ..Default::default()
            })),
        };
        for m in [hello, batch, finished] {
            round_trip(&m);
        }
        let refusal = CoordinatorMessage {
            body: Some(coordinator_message::Body::Refusal(Refusal {
                attempt_id: "a".into(),
                seq: 3,
                subject: Subject::Transitions as i32,
                code: RefusalCode::StaleEpoch as i32,
                message: "stale epoch 6, current 7".into(),
            })),
        };
        round_trip(&refusal);
        let Some(coordinator_message::Body::Refusal(r)) = refusal.body else {
            unreachable!()
        };
        assert_eq!(r.code(), RefusalCode::StaleEpoch);
    }

    #[test]
    fn control_messages_round_trip() {
        round_trip(&SubmitPlanRequest {
            spec_json: "{}".into(),
            spec_digest: "sha256:00".into(),
            plan_json: "{}".into(),
            plan_digest: "sha256:11".into(),
        });
        round_trip(&SubmitPlanChunk {
            plan_head_json: "{}".into(),
            trials_json: vec!["{}".into(), "{}".into()],
            ..Default::default()
        });
        round_trip(&RunStatus {
            run: Some(RunSummary {
                run_key: "exp-20250101-abcd".into(),
                ..Default::default()
            }),
            planned: 10,
            outcomes: vec![StateCount {
                state: "not_graded".into(),
                count: 2,
            }],
            ..Default::default()
        });
    }

    #[test]
    fn unknown_enum_values_decode_without_failing() {
        let mut bytes = Vec::new();
        Transition {
            seq: 1,
            state: 99,
            at_unix_ms: 0,
            note: String::new(),
        }
        .encode(&mut bytes)
        .unwrap();
        let t = Transition::decode(bytes.as_slice()).unwrap();
        assert_eq!(t.state, 99);
        assert!(AttemptState::try_from(t.state).is_err());
    }
}
