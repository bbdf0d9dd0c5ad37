//! `akbench run import-harbor RUN DIR`: Harbor's per-trial `result.json` files under DIR
//! (a Harbor jobs folder) become an observations file (docs/observations.md), which is then
//! reconciled against the run's plan and reported as `run reconcile` reports: unknown and
//! duplicate identities included. Exit 0 when the accounting is valid and every result was
//! identified, 1 otherwise, 2 for bad input (nothing written).
//!
//! The mapping (rewards to verdicts, exception types to states) is `akbench_core::harbor`.
//! The pass threshold of each trial comes from the export manifest (`--export DIR`, the
//! folder `run export-harbor` wrote), and so do a multi-step task's step names (a step
//! Harbor left no result for is `not_run`); without it every task's threshold is 1.0, akbench's
//! default.

use crate::cli::ImportHarborArgs;
use crate::cmd::shared::common::{find_run, print_json};
use crate::exit::{self, InputError};
use akbench_core::accounting::{reconcile, ObservedLine};
use akbench_core::bounded_read::{Links, ReadKind};
use akbench_core::evidence::EvidenceStore;
use akbench_core::harbor::{
    exception, observation, spend, trial_id, ExportManifest, TrialResult, EXPORT_MANIFEST,
};
use akbench_core::output::{Existing, Mode};
use akbench_core::spend::{fmt_spend, Spend};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Imports Harbor results.
pub fn run(args: ImportHarborArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let r = find_run(&store, &args.run)?;
    let key = r.spec.run_key().to_string();
    let Some(plan) = r.ready.as_ref() else {
        return Err(InputError(format!(
            "failed to import into run {key}: it has no ready plan; fix: plan it with `akbench run plan`"
        ))
        .into());
    };
    if !args.dir.is_dir() {
        return Err(InputError(format!(
            "failed to import Harbor results from {}: not a folder; fix: give Harbor's jobs folder",
            args.dir.display()
        ))
        .into());
    }
    // A device, FIFO or folder at the output is refused before any work.
    if let Some(o) = &args.observations {
        akbench_core::output::check(o)?;
    }
    let exported: HashMap<uuid::Uuid, (f64, Vec<String>)> = match &args.export {
        Some(e) => {
            let path = e.join(EXPORT_MANIFEST);
            let m: ExportManifest = ReadKind::Record
                .read(&path, Links::Follow)
                .map_err(|err| format!("it {err}"))
                .and_then(|b| serde_json::from_slice(&b).map_err(|err| err.to_string()))
                .map_err(|err| {
                    InputError(format!(
                        "failed to read the export manifest {}: {err}; fix: pass the folder `run export-harbor` wrote",
                        path.display()
                    ))
                })?;
            if m.run_id != plan.run_id {
                return Err(InputError(format!(
                    "failed to import: {} is an export of run {}, not {key}; fix: pass that run or the matching export",
                    e.display(),
                    m.run_key
                ))
                .into());
            }
            m.trials
                .iter()
                .map(|t| (t.trial_id, (t.pass_threshold, t.steps.clone())))
                .collect()
        }
        None => HashMap::new(),
    };
    let mut files = Vec::new();
    let mut unidentified: Vec<(PathBuf, String)> = Vec::new();
    find_results(&args.dir, &mut files, &mut unidentified);
    files.sort();
    let mut observations: Vec<ObservedLine> = Vec::new();
    let mut results: Vec<TrialResult> = Vec::new();
    let mut mapped: BTreeMap<String, u64> = BTreeMap::new();
    for f in &files {
        let value: serde_json::Value = match ReadKind::Record
            .read(f, Links::Refuse)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                unidentified.push((f.clone(), format!("unreadable: {e}")));
                continue;
            }
        };
        // A Harbor result is a JSON object: anything else is named, never skipped silently.
        if !value.is_object() {
            unidentified.push((
                f.clone(),
                format!(
                    "is a JSON {}, not a Harbor result (an object); skipped",
                    json_kind(&value)
                ),
            ));
            continue;
        }
        // The job's own result.json (statistics) has no trial name: not a trial.
        if value.get("trial_name").is_none() {
            continue;
        }
        let result: TrialResult = match serde_json::from_value(value) {
            Ok(r) => r,
            Err(e) => {
                unidentified.push((f.clone(), format!("not a Harbor trial result: {e}")));
                continue;
            }
        };
        match trial_id(&result) {
            Ok(id) => {
                let threshold = exported.get(&id).map_or(1.0, |e| e.0);
                let (o, why) = observation(&result, id, threshold);
                let label = match exception(&result) {
                    Some(e) => format!("{} ({}) -> {}", e.exception_type, why, o.state),
                    None => format!("{why} -> {}", o.state),
                };
                *mapped.entry(label).or_default() += 1;
                observations.push(ObservedLine {
                    observation: o,
                    spend: spend(&result),
                });
                results.push(result);
            }
            Err(e) => unidentified.push((f.clone(), e)),
        }
    }
    let out = args
        .observations
        .clone()
        .unwrap_or_else(|| args.dir.join("akbench-observations.jsonl"));
    write_observations(&out, &observations)?;
    let outcomes: Vec<_> = observations.iter().map(|l| l.observation.clone()).collect();
    let a = reconcile(plan, &outcomes);
    let records = match &args.out {
        Some(out) => write_records(&r.spec, plan, out, &results, &outcomes, &exported)?,
        None => Vec::new(),
    };
    // Tokens and cost over the results read (a value no result reported stays null).
    let spent = observations
        .iter()
        .filter_map(|l| l.spend)
        .fold(None::<Spend>, |acc, s| Some(acc.map_or(s, |a| a.plus(&s))))
        .unwrap_or_default();
    if args.store.json {
        print_json(&serde_json::json!({
            "observations_file": out,
            "results": observations.len(),
            "mapped": mapped,
            "spend": spent,
            "records": records,
            "unidentified": unidentified.iter().map(|(f, why)| serde_json::json!({"file": f, "problem": why})).collect::<Vec<_>>(),
            "accounting": a,
        }))?;
    } else {
        outln!(
            "read {} Harbor trial results from {}; wrote {}",
            observations.len(),
            args.dir.display(),
            out.display()
        );
        for (label, n) in &mapped {
            outln!("  {n:>5}  {label}");
        }
        outln!("  {}", fmt_spend(&spent));
        for (f, why) in &unidentified {
            outln!("  unidentified {}: {why}", f.display());
        }
        if let Some(out) = &args.out {
            outln!(
                "  wrote {} run records under {}",
                records.len(),
                out.display()
            );
        }
        crate::cmd::shared::accounting::show(&a, None, false, false)?;
    }
    Ok(if a.valid && unidentified.is_empty() {
        exit::OK
    } else {
        exit::NEGATIVE
    })
}

/// Writes each planned trial that exactly one distinct result names as its run record
/// (`out/<trial key>/run_record.json`); a trial with conflicting results (quarantined) or
/// outside the plan gets none. `exported` holds each exported trial's pass threshold and
/// step names (the export manifest's). Returns the record files written.
fn write_records(
    spec: &akbench_core::spec::ResolvedRunSpec,
    plan: &akbench_core::plan::RunPlan,
    out: &Path,
    results: &[TrialResult],
    outcomes: &[akbench_core::accounting::Observation],
    exported: &HashMap<uuid::Uuid, (f64, Vec<String>)>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut by_trial: BTreeMap<uuid::Uuid, Vec<usize>> = BTreeMap::new();
    for (i, o) in outcomes.iter().enumerate() {
        by_trial.entry(o.trial_id).or_default().push(i);
    }
    let now = chrono::Utc::now();
    let mut written = Vec::new();
    for t in &plan.trials {
        let Some(idx) = by_trial.get(&t.trial_id) else {
            continue;
        };
        if idx.iter().any(|&i| outcomes[i] != outcomes[idx[0]]) {
            continue;
        }
        let i = idx[0];
        let tests_digest = spec
            .condition
            .tasks
            .iter()
            .find(|x| x.release == t.task)
            .map(|x| x.tests_digest.clone())
            .unwrap_or_default();
        let (threshold, steps) = exported
            .get(&t.trial_id)
            .map_or((1.0, &[][..]), |(p, s)| (*p, &s[..]));
        let attempt = akbench_core::harbor::record::attempt(
            &results[i],
            &outcomes[i],
            steps,
            threshold,
            &t.key,
            uuid::Uuid::now_v7(),
            &tests_digest,
            now,
        );
        let finished_at = attempt.transitions.last().map_or(now, |x| x.at);
        let record = akbench_core::trial_record::assemble(
            spec,
            t,
            vec![akbench_core::trial_record::StoredAttempt {
                id: attempt.attempt.id,
                number: 1,
                terminal: attempt.state,
                cause: attempt.cause.clone(),
                finished_at,
                record: Some(attempt),
                transitions: Vec::new(),
                worker_id: None,
            }],
            &format!("akbench {} (run import-harbor)", env!("CARGO_PKG_VERSION")),
        )
        .map_err(|e| anyhow::anyhow!("failed to make the run record of trial {}: {e}", t.key))?;
        let bytes = serde_json::to_vec_pretty(&record)?;
        written.push(crate::remote::records::write_record(out, &t.key, &bytes)?);
    }
    Ok(written)
}

/// Every `result.json` under `dir` that is a regular file; one that is not (a FIFO, a
/// device, a socket, a link) goes to `skipped` with why, never opened.
fn find_results(dir: &Path, out: &mut Vec<PathBuf>, skipped: &mut Vec<(PathBuf, String)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            find_results(&e.path(), out, skipped);
        } else if e.file_name() == "result.json" {
            if ft.is_file() {
                out.push(e.path());
            } else {
                skipped.push((
                    e.path(),
                    format!(
                        "is a {}, not a regular file; skipped (never opened)",
                        akbench_core::bounded_read::kind_name(&ft)
                    ),
                ));
            }
        }
    }
}

/// The name of a JSON value's kind, for a message.
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// Writes the observations as JSON Lines, atomically ([`akbench_core::output`]).
fn write_observations(path: &Path, observations: &[ObservedLine]) -> anyhow::Result<()> {
    akbench_core::output::write_with(path, Mode::Public, Existing::Replace, |w| {
        for o in observations {
            writeln!(w, "{}", serde_json::to_string(o)?)?;
        }
        Ok(())
    })?;
    Ok(())
}
