//! `akbench sweep experiment.yaml` on the embedded default: a private PostgreSQL, a
//! coordinator and local workers in this process; the run is planned locally (bad input
//! fails before anything starts), submitted, started and followed live; at the end the
//! coordinator's accounting and the results table are printed and every accepted record is
//! exported under `<out>/<trial key>/` (each one also as soon as its trial ends, so that
//! `akbench view <out>` shows the run live). SIGINT (Ctrl-C), SIGTERM or SIGHUP cancels the run
//! (every unfinished trial ends `cancelled`), still prints the accounting, and stops
//! PostgreSQL before exiting.

use super::planned::{check_run, show_result, PlannedSweep};
use crate::cli::{RemoteArgs, SweepArgs};
use crate::cmd::shared::embedded::options;
use crate::cmd::shared::inputs::cache_root;
use crate::embedded::{Embedded, StopSignals};
use crate::exit;
use crate::remote::{records, view, Remote};
use akbench_core::clock::SystemClock;
use akbench_core::report::ReportTrial;
use akbench_proto::v1 as pb;
use akbench_worker::orchestrator::Orchestrator;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the sweep on the embedded default.
pub fn run(args: SweepArgs) -> anyhow::Result<i32> {
    let orch = Orchestrator::new(&cache_root(args.cache.as_deref()), Arc::new(SystemClock));
    // Bad input fails here, before PostgreSQL starts.
    let checked = check_run(&args, &orch)?;
    let mut o = options(
        &args.embedded,
        &checked.tasks_root,
        &checked.agents_root,
        args.cache.as_deref(),
        &args.out,
        "127.0.0.1:0".parse()?,
        "127.0.0.1:0".parse()?,
    );
    // A slot starts its next trial the moment one ends (docs/PERFORMANCE.md).
    o.prefetch = akbench_worker::daemon::WorkerConfig::sweep_prefetch(o.slots);
    let json = args.json;
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (report, interrupted, spec, ready, store) = rt.block_on(async {
        // Before PostgreSQL starts: from here on no stop signal ends the process unhandled.
        let mut signals = StopSignals::install()?;
        let e = Embedded::start(&o).await?;
        // Whatever happens next, the embedded system is stopped before returning.
        let outcome = async {
            let remote = Remote::new(
                &format!("http://{}", e.grpc_addr()),
                &RemoteArgs {
                    coordinator: None,
                    token: None,
                    token_file: None,
                    ..RemoteArgs::default()
                },
            )?;
            // The data folder outlives runs: a key the coordinator already holds (the same
            // manifest planned earlier today from another folder) is skipped like a local one.
            let taken = coordinator_keys(&remote, checked.planned_key()).await?;
            let PlannedSweep {
                spec, ready, store, ..
            } = checked.store(&args, &|k| taken.contains(k))?;
            let key = spec.run_key().to_string();
            if !json {
                eprintln!(
                    "akbench sweep: run {key} ({}), {} trials; coordinator http://{}, status http://{}/runs/{key}, {} workers x {} slots\nakbench sweep: records are written to {} as trials end; watch them (also after this sweep ends) with: akbench view {}",
                    spec.run_id(),
                    ready.trials.len(),
                    e.grpc_addr(),
                    e.http_addr(),
                    o.workers,
                    o.slots,
                    args.out.join(&key).display(),
                    args.out.display()
                );
            }
            let (report, interrupted) =
                follow(&remote, &spec, &ready, json, &args.out, &mut signals).await?;
            Ok::<_, anyhow::Error>((report, interrupted, spec, ready, store))
        }
        .await;
        e.stop().await?;
        outcome
    })?;
    let trials: HashMap<String, &akbench_core::plan::PlannedTrial> = ready
        .trials
        .iter()
        .map(|t| (t.trial_id.to_string(), t))
        .collect();
    let accounting: akbench_core::accounting::RunAccounting = serde_json::from_value(report)?;
    let mut results = super::planned::Results::default();
    for t in &accounting.trials {
        let (Some(p), Some(outcome)) = (trials.get(&t.trial_id.to_string()), &t.outcome) else {
            continue;
        };
        // From the exported record (`<out>/<trial key>/run_record.json`), when it is there.
        let record = crate::cmd::shared::records::read(
            &args
                .out
                .join(&p.key)
                .join(akbench_core::record::RECORD_FILE),
        )
        .ok();
        let line = ReportTrial {
            key: p.key.clone(),
            agent: p.agent.label.clone(),
            task: p.task.id.clone(),
            observation: outcome.clone(),
            cause: None,
            spend: record
                .as_ref()
                .map(akbench_core::spend::Spend::of_record)
                .unwrap_or_default(),
            attempts: record.as_ref().map_or(0, |r| r.outcome.attempts),
            grading: record
                .as_ref()
                .map(akbench_core::grading::integrity::GradeFlags::of_record)
                .unwrap_or_default(),
            network: record
                .as_ref()
                .map(akbench_core::report::network::TrialNetwork::of_record)
                .unwrap_or_default(),
        };
        results.push(line, record.as_ref());
    }
    show_result(
        &store,
        &spec,
        &args,
        &accounting,
        &results,
        started,
        interrupted,
    )?;
    Ok(if accounting.valid && accounting.complete && !interrupted {
        exit::OK
    } else {
        exit::NEGATIVE
    })
}

/// The keys of the coordinator's runs that start with `base` (`base`, `base-2`, ...).
async fn coordinator_keys(
    remote: &Remote,
    base: &str,
) -> anyhow::Result<std::collections::HashSet<String>> {
    let c = remote.connect().await?;
    let mut keys = std::collections::HashSet::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .inner
            .clone()
            .list_runs(c.request(pb::ListRunsRequest {
                page_size: 0,
                page_token: page_token.clone(),
                key_prefix: base.to_string(),
            }))
            .await
            .map_err(|s| c.error(s))?
            .into_inner();
        keys.extend(page.runs.into_iter().map(|r| r.run_key));
        if page.next_page_token.is_empty() {
            return Ok(keys);
        }
        page_token = page.next_page_token;
    }
}

/// Submits and starts the run, follows it to its end (a stop signal cancels), exports the records;
/// returns the coordinator's accounting report and whether it was interrupted.
async fn follow(
    remote: &Remote,
    spec: &akbench_core::spec::ResolvedRunSpec,
    ready: &akbench_core::plan::RunPlan,
    json: bool,
    out: &std::path::Path,
    signals: &mut StopSignals,
) -> anyhow::Result<(serde_json::Value, bool)> {
    let c = remote.connect().await?;
    let mut inner = c.inner.clone();
    // Streamed in chunks: a whole plan in one message would pass the coordinator's cap.
    let chunks = akbench_proto::plan_chunks::PlanChunker::all(spec, ready);
    inner
        .submit_plan_stream(c.request_long(tokio_stream::iter(chunks)))
        .await
        .map_err(|s| c.error(s))?;
    let run = spec.run_key().to_string();
    inner
        .start_run(c.request(pb::StartRunRequest { run: run.clone() }))
        .await
        .map_err(|s| c.error(s))?;
    let mut interrupted = false;
    let mut last = String::new();
    // Records written as trials end (what `akbench view <out>` shows live), as --local does.
    let mut ended = records::EndedSoFar::default();
    let (mut exported_at, mut pending, mut warned) = (0, 0, false);
    loop {
        let s = inner
            .get_status(c.request(pb::GetStatusRequest { run: run.clone() }))
            .await
            .map_err(|s| c.error(s))?
            .into_inner();
        if s.finished != exported_at || pending > 0 {
            match records::export_ended(&c, &run, ready, out, &mut ended).await {
                Ok(p) => (exported_at, pending) = (s.finished, p),
                // The export at the end tries every record again.
                Err(e) if !warned => {
                    warned = true;
                    eprintln!("akbench sweep: writing the ended trials' records failed (retried at the end): {e:#}");
                }
                Err(_) => {}
            }
        }
        let line = view::line(&s);
        // Print on progress only (the timestamp, throughput and ETA move on every poll).
        let progress = line
            .split_once(' ')
            .map_or(line.as_str(), |(_, rest)| rest)
            .split("; throughput")
            .next()
            .unwrap_or_default()
            .to_string();
        if !json && progress != last {
            eprintln!("{line}");
            last = progress;
        }
        if s.run
            .as_ref()
            .is_some_and(|r| crate::remote::is_over(r.state))
        {
            break;
        }
        tokio::select! {
            signal = signals.recv(), if !interrupted => {
                interrupted = true;
                eprintln!("akbench sweep: cancelling ({signal}); running agents are stopped");
                inner
                    .cancel_run(c.request(pb::CancelRunRequest { run: run.clone(), reason: format!("interrupted ({signal})") }))
                    .await
                    .map_err(|s| c.error(s))?;
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
    let r = inner
        .reconcile(c.request_long(pb::ReconcileRequest {
            run: run.clone(),
            observations_json: String::new(),
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    match records::export(&c, &run, out, &[]).await {
        Err(e) => eprintln!("akbench sweep: exporting records failed: {e:#}"),
        Ok(exported) => {
            for (key, why) in &exported.unexported {
                eprintln!("akbench sweep: failed to export the record of trial {key}: {why}");
            }
        }
    }
    Ok((serde_json::from_str(&r.report_json)?, interrupted))
}
