//! `akbench run submit` and `akbench run plan --coordinator`: a stored plan sent to the
//! coordinator by the client-streaming `SubmitPlanStream`, in memory that does not grow with
//! the plan.
//!
//! A reader thread reads the ready plan file one trial at a time
//! (`EvidenceStore::stream_trials`, which checks the plan's digest as the trials pass) and
//! hands the messages `akbench_proto::plan_chunks` cuts to the RPC through a channel of
//! [`CHUNKS_IN_FLIGHT`] chunks: the reader waits while the network is slower. The file is
//! read once: a damaged plan is found when its digest is checked after the last trial, and
//! the stream then ends without its last chunk; the coordinator, which checks the count and
//! the digest itself and stores nothing unless the whole plan arrived and passed, refuses it
//! either way, and the client reports the damage. At 1,000,000 trials a separate checking pass
//! cost as much as the send (docs/performance-notebook.md, "A million trials").

use super::{state_name, Client};
use crate::cli::PlanArgs;
use crate::cmd::shared::{
    self,
    common::{counts, print_json},
};
use crate::exit;
use akbench_core::evidence::{EvidenceError, EvidenceStore};
use akbench_core::plan::RunPlan;
use akbench_core::spec::ResolvedRunSpec;
use akbench_proto::plan_chunks::PlanChunker;
use akbench_proto::v1 as pb;
use std::path::Path;

/// Chunks read ahead of the network at most.
pub const CHUNKS_IN_FLIGHT: usize = 2;

/// The plan document being sent.
#[derive(Debug)]
pub struct Outgoing<'a> {
    /// The run's spec.
    pub spec: &'a ResolvedRunSpec,
    /// The ready plan's head (`trials` empty).
    pub ready: &'a RunPlan,
    /// The store holding it.
    pub store: &'a EvidenceStore,
    /// The run's folder (its `plan.ready.json` is streamed).
    pub dir: &'a Path,
}

/// Sends the plan and prints what the coordinator stored.
pub async fn submit(c: &Client, out: Outgoing<'_>, args: &PlanArgs) -> anyhow::Result<i32> {
    let (spec, ready, dir) = (out.spec, out.ready, out.dir);
    let first = PlanChunker::new(spec, ready);
    let (tx, rx) = tokio::sync::mpsc::channel(CHUNKS_IN_FLIGHT);
    let reader = {
        let (store, ready) = (out.store.clone(), ready.clone());
        let path = dir.join(akbench_core::evidence::READY_FILE);
        std::thread::spawn(move || read_chunks(&store, &path, &ready, first, tx))
    };
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let sent = c
        .inner
        .clone()
        .submit_plan_stream(c.request_long(stream))
        .await;
    // The reader ends when the stream is drained or dropped.
    let read = reader
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    // A plan that could not be read ended the stream early: the coordinator refused it and
    // stored nothing; the reader's error is the one to tell.
    read?;
    let r = sent.map_err(|s| c.error(s))?.into_inner();
    report(c, r, spec, ready, dir, args)
}

/// Reads the plan file at `path` into the messages `chunker` cuts (its head first) on `tx`;
/// stops early when the receiver is gone (the call failed).
fn read_chunks(
    store: &EvidenceStore,
    path: &Path,
    ready: &RunPlan,
    mut chunker: PlanChunker,
    tx: tokio::sync::mpsc::Sender<pb::SubmitPlanChunk>,
) -> Result<(), EvidenceError> {
    let gone = store.stream_trials(path, ready, |text| match chunker.push(text.to_string()) {
        Some(full) => tx.blocking_send(full).map_err(|_| ()),
        None => Ok(()),
    })?;
    if let (Ok(()), Some(last)) = (gone, chunker.finish()) {
        // A closed channel means the call already failed.
        let _ = tx.blocking_send(last);
    }
    Ok(())
}

fn report(
    c: &Client,
    r: pb::SubmitPlanResponse,
    spec: &ResolvedRunSpec,
    ready: &RunPlan,
    dir: &Path,
    args: &PlanArgs,
) -> anyhow::Result<i32> {
    let run = r.run.unwrap_or_default();
    if args.store.json {
        print_json(&serde_json::json!({
            "run_key": run.run_key,
            "run_id": run.run_id,
            "dir": dir,
            "coordinator": c.url(),
            "created": r.created,
            "state": state_name(run.state),
            "spec_digest": spec.digest,
            "condition_digest": spec.condition_digest,
            "plan_digest": ready.digest,
            "summary": ready.summary,
        }))?;
    } else {
        outln!("run      {}", run.run_key);
        outln!("uuid     {}", run.run_id);
        outln!("stored   {} (local copy)", dir.display());
        shared::show::plan_summary(spec, ready);
        outln!(
            "state    {} ({})",
            state_name(run.state),
            counts(&ready.summary.by_lifecycle)
        );
        if r.created {
            outln!("submitted to {}", c.url());
        } else {
            outln!(
                "already submitted to {}: identical resubmission, nothing changed",
                c.url()
            );
        }
    }
    Ok(exit::OK)
}
