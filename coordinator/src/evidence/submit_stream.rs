//! `SubmitPlanStream`: a plan's head, then its trials in chunks, stored in one transaction.
//!
//! [`submit_stream`] makes the checks of [`super::submit`] without holding the plan: the
//! head is checked against the spec first (digest syntax, run id, key, spec digest, trial
//! count from its summary); then each chunk's trials are parsed, checked in order
//! ([`PlanChecker`]), hashed under the draft and ready heads ([`PlanSealer`]) and written
//! to `planned_trials` by binary `COPY` as they arrive ([`TrialCopy`]). After the last chunk the summary,
//! the count and the digest are checked, and only then are the plan headers, the catalog row
//! and the runs row written and the transaction committed. Any refusal, a broken stream or
//! a stream that ends early rolls everything back: nothing is stored. A run already stored
//! is compared (the same plan: not created; another: a conflict) without writing.

use std::pin::pin;

use akbench_core::digest::canonical_json;
use akbench_core::plan::{PlanChecker, PlanSealer, PlanStage, PlannedTrial, RunPlan, Sealed};
use akbench_core::spec::ResolvedRunSpec;
use tokio_stream::{Stream, StreamExt};

use super::trial_copy::TrialCopy;
use super::{
    existing_run, find_run, parse_request, release_freed_memory, same_or_conflict, Submitted,
    ACTION, INSERT_HEADERS_SQL, INSERT_SPEC_SQL, RELEASE_AFTER_TRIALS, SUBMIT_LOCK,
};
use crate::error::ControlError;
use crate::store::{Store, Tx};

/// The first message of a stream: the spec and the plan's head.
#[derive(Debug, Clone, Default)]
pub struct SubmitHead {
    /// The spec, canonical JSON; empty for a spec stored earlier.
    pub spec_json: String,
    /// The spec's digest.
    pub spec_digest: String,
    /// The plan without trials, canonical JSON.
    pub plan_head_json: String,
    /// The plan's digest.
    pub plan_digest: String,
}

fn invalid(problem: String) -> ControlError {
    ControlError::invalid(ACTION, "trials_json", problem)
}

/// Stores a spec and the plan streamed after `head` (see the module docs). `chunks` gives
/// the trials of each message in plan order (the first message's too); an `Err` item is a
/// broken stream.
pub async fn submit_stream<S>(
    store: &Store,
    head: SubmitHead,
    chunks: S,
) -> Result<Submitted, ControlError>
where
    S: Stream<Item = Result<Vec<String>, ControlError>> + Send,
{
    let (spec, plan) = parse_request(
        &head.spec_json,
        &head.spec_digest,
        &head.plan_head_json,
        &head.plan_digest,
        true,
    )?;
    let mut client = store.client().await.map_err(ControlError::store(ACTION))?;
    let tx = client
        .transaction()
        .await
        .map_err(|e| ControlError::store(ACTION)(e.into()))?;
    let written = write(&tx, &plan, spec.as_ref(), chunks).await;
    let outcome = match written {
        Ok(Written::New) => tx
            .commit()
            .await
            .map_err(|e| ControlError::store(ACTION)(e.into()))
            .map(|()| None),
        Ok(Written::Found(found, ready_digest)) => {
            let _ = tx.rollback().await;
            Ok(Some((found, ready_digest)))
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    };
    drop(client);
    if plan.summary.trials >= RELEASE_AFTER_TRIALS as u64 {
        release_freed_memory();
    }
    match outcome? {
        Some((found, ready_digest)) => {
            let mut ready = plan.head();
            ready.digest = ready_digest;
            same_or_conflict(found, &ready, spec.as_ref())
        }
        None => Ok(Submitted {
            run: find_run(store, &plan.run_id.to_string()).await?,
            created: true,
        }),
    }
}

enum Written {
    /// Spec, trials and headers written (not yet committed).
    New,
    /// A run already holds this id or key: nothing written; the streamed plan's ready
    /// digest.
    Found(super::RunSummary, String),
}

async fn write<S>(
    tx: &Tx<'_>,
    plan: &RunPlan,
    spec: Option<&ResolvedRunSpec>,
    chunks: S,
) -> Result<Written, ControlError>
where
    S: Stream<Item = Result<Vec<String>, ControlError>> + Send,
{
    let store_err = |e: tokio_postgres::Error| ControlError::store(ACTION)(e.into());
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SUBMIT_LOCK])
        .await
        .map_err(store_err)?;
    if let Some(found) = existing_run(tx, plan.run_id, &plan.run_key).await? {
        let sealed = receive(plan, chunks, None).await?;
        return Ok(Written::Found(found, sealed.ready_digest));
    }
    let Some(spec) = spec else {
        return Err(ControlError::Precondition {
            action: ACTION,
            run: plan.run_key.clone(),
            problem: format!(
                "its spec (run id {}, digest {}) is not stored; fix: send spec_json with the plan",
                plan.run_id, plan.spec_digest
            ),
        });
    };
    tx.execute(
        INSERT_SPEC_SQL,
        &[
            &plan.run_id,
            &plan.run_key,
            &spec.digest,
            &canonical_json(spec),
        ],
    )
    .await
    .map_err(store_err)?;
    let mut copy = TrialCopy::start(tx)
        .await
        .map_err(ControlError::store(ACTION))?;
    let sealed = receive(plan, chunks, Some(&mut copy)).await?;
    copy.finish().await.map_err(ControlError::store(ACTION))?;
    let (draft_text, ready_text) = headers(plan, &sealed);
    let trial_count = i64::try_from(plan.summary.trials).unwrap_or(i64::MAX);
    let by_agent = canonical_json(&plan.summary.by_agent);
    tx.execute(
        INSERT_HEADERS_SQL,
        &[
            &plan.run_id,
            &plan.run_key,
            &spec.digest,
            &sealed.draft_digest,
            &draft_text,
            &sealed.ready_digest,
            &ready_text,
            &spec.condition.experiment,
            &trial_count,
            &by_agent,
        ],
    )
    .await
    .map_err(store_err)?;
    Ok(Written::New)
}

/// The draft and ready headers (the plan documents with `"trials": []`).
fn headers(plan: &RunPlan, sealed: &Sealed) -> (String, String) {
    let mut draft = plan.head();
    draft.stage = PlanStage::Draft;
    draft.digest = sealed.draft_digest.clone();
    let mut ready = plan.head();
    ready.stage = PlanStage::Ready;
    ready.digest = sealed.ready_digest.clone();
    (canonical_json(&draft), canonical_json(&ready))
}

/// Reads the trials of every chunk: parses, checks and hashes each, and writes it to `copy`
/// when given; after the last chunk checks the count, the summary and the digest. Returns
/// both sealed digests.
async fn receive<S>(
    plan: &RunPlan,
    chunks: S,
    mut copy: Option<&mut TrialCopy>,
) -> Result<Sealed, ControlError>
where
    S: Stream<Item = Result<Vec<String>, ControlError>> + Send,
{
    let mut chunks = pin!(chunks);
    let mut checker = PlanChecker::with_capacity(plan.run_id, plan.summary.trials);
    let mut sealer = PlanSealer::new(plan);
    let expected = plan.summary.trials;
    while let Some(batch) = chunks.next().await {
        for text in batch? {
            let n = checker.trials();
            if n >= expected {
                return Err(invalid(format!(
                    "holds more trials than the plan's summary counts ({expected}); fix: send the plan's own trials"
                )));
            }
            let t: PlannedTrial = serde_json::from_str(&text)
                .map_err(|e| invalid(format!("trial {n} is not a PlannedTrial: {e}")))?;
            checker
                .push(&t)
                .map_err(|e| invalid(format!("is not a valid plan: {e}")))?;
            let canonical = canonical_json(&t);
            sealer.add(&canonical);
            if let Some(c) = copy.as_mut() {
                c.row(&plan.run_id, &t, &canonical)
                    .await
                    .map_err(ControlError::store(ACTION))?;
            }
        }
    }
    if checker.trials() != expected {
        return Err(invalid(format!(
            "the stream ended after {} of the plan's {expected} trials; nothing was stored; fix: send the whole plan",
            checker.trials()
        )));
    }
    checker
        .finish(&plan.summary)
        .map_err(|e| invalid(format!("is not a valid plan: {e}")))?;
    let sealed = sealer.finish();
    let computed = sealed.digest(plan.stage);
    if computed != plan.digest {
        return Err(invalid(format!(
            "the plan's content does not match its digest {} (computed {computed}); fix: the plan was edited or damaged, plan again",
            plan.digest
        )));
    }
    Ok(sealed)
}
