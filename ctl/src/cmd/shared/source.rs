//! Where a run's records come from, for the commands that read a finished run (`run
//! compare`, `run report`): a folder of `run_record.json` files (such as a sweep's
//! `out/<run key>`), a run key or UUID of the local store (records under `--out/<run key>`),
//! or, with `--coordinator`, a run on a coordinator (its spec, plan and records fetched).
//!
//! When the run's spec and ready plan are known, the records are reconciled against the plan,
//! so a planned trial without a record is `missing`, never silently absent.

use crate::cli::RemoteArgs;
use crate::exit::InputError;
use akbench_core::accounting::{reconcile, Bucket, Observation, RunAccounting};
use akbench_core::compare::CompareTrial;
use akbench_core::evidence::{EvidenceError, EvidenceStore};
use akbench_core::plan::RunPlan;
use akbench_core::record::RunRecord;
use akbench_core::spec::ResolvedRunSpec;
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// A run read for comparison or a report.
#[derive(Debug)]
pub struct LoadedRun {
    /// Run key.
    pub run_key: String,
    /// Run UUID.
    pub run_id: Uuid,
    /// Where it came from (a folder or a coordinator URL).
    pub source: String,
    /// The spec, when known.
    pub spec: Option<ResolvedRunSpec>,
    /// The accounting of the records against the ready plan, when the plan is known.
    pub accounting: Option<RunAccounting>,
    /// Every record read, in trial-key order.
    pub records: Vec<RunRecord>,
    /// One entry per trial (planned trials when the plan is known, else records).
    pub trials: Vec<CompareTrial>,
}

impl LoadedRun {
    /// The best-of-N candidate section: from the accounting when the plan is known, else
    /// grouped from the records' `candidate` fields; `None` without candidates.
    pub fn candidates(&self) -> Option<akbench_core::candidates::CandidateAccounting> {
        match &self.accounting {
            Some(a) => a.candidates.clone(),
            None => akbench_core::candidates::account_entries(
                self.records
                    .iter()
                    .map(akbench_core::candidates::Entry::of_record),
            ),
        }
    }
}

/// How to find runs.
#[derive(Debug)]
pub struct Finder<'a> {
    /// The local evidence store.
    pub store: &'a EvidenceStore,
    /// The local records root (`<out>/<run key>`).
    pub out: &'a Path,
    /// The coordinator flags.
    pub remote: &'a RemoteArgs,
}

impl Finder<'_> {
    /// Loads `run`: with `--coordinator`, a run key or UUID on the coordinator; else a
    /// folder of records, or a run key or UUID of the local store.
    pub fn load(&self, run: &str) -> anyhow::Result<LoadedRun> {
        if let Some(url) = self
            .remote
            .coordinator
            .as_deref()
            .filter(|u| !u.trim().is_empty())
        {
            return self.load_remote(url, run);
        }
        let path = Path::new(run);
        if path.is_dir() {
            let records = read_records(path)?;
            let Some(first) = records.first() else {
                return Err(InputError(format!(
                    "failed to read run records under {}: there are none; fix: give the folder of a run's records (a sweep's out/<run key>)",
                    path.display()
                ))
                .into());
            };
            let run_id = first.run.id;
            if let Some(other) = records.iter().find(|r| r.run.id != run_id) {
                return Err(InputError(format!(
                    "failed to read {}: it holds records of more than one run ({} and {}); fix: give the folder of one run (out/<run key>)",
                    path.display(),
                    first.run.key,
                    other.run.key
                ))
                .into());
            }
            let stored = match self.store.find(&run_id.to_string()) {
                Ok(s) => Some(s),
                Err(EvidenceError::NotFound { .. }) => None,
                Err(e) => return Err(e.into()),
            };
            let (spec, plan) = match stored {
                Some(s) => (Some(s.spec), s.ready),
                None => (None, None),
            };
            return assemble(
                first.run.key.clone(),
                run_id,
                path.display().to_string(),
                spec,
                plan,
                records,
            );
        }
        let stored = crate::cmd::shared::common::find_run(self.store, run).map_err(|e| {
            InputError(format!(
                "{e:#}\n(`{run}` is not a folder either; fix: give a folder of run records or a run key)"
            ))
        })?;
        let key = stored.spec.run_key().to_string();
        let dir = self.out.join(&key);
        let records = if dir.is_dir() {
            read_records(&dir)?
        } else {
            Vec::new()
        };
        assemble(
            key,
            stored.spec.run_id(),
            dir.display().to_string(),
            Some(stored.spec),
            stored.ready,
            records,
        )
    }

    fn load_remote(&self, url: &str, run: &str) -> anyhow::Result<LoadedRun> {
        let remote = crate::remote::Remote::new(url, self.remote)?;
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().to_path_buf();
        let (got, _) = crate::remote::block_on(async {
            let c = remote.connect().await?;
            let got = c.get_run(run, true).await?;
            let exported = crate::remote::records::export(&c, run, &dir, &[]).await?;
            anyhow::Ok((got, exported))
        })??;
        let spec: ResolvedRunSpec = serde_json::from_str(&got.spec_json)
            .map_err(|e| anyhow::anyhow!("failed to read the spec of run {run} from {url}: {e}"))?;
        let plan: RunPlan = serde_json::from_str(&got.plan_json)
            .map_err(|e| anyhow::anyhow!("failed to read the plan of run {run} from {url}: {e}"))?;
        let records = read_records(&dir)?;
        assemble(
            spec.run_key().to_string(),
            spec.run_id(),
            remote.url.to_string(),
            Some(spec),
            Some(plan),
            records,
        )
    }
}

fn observation(r: &RunRecord) -> Observation {
    Observation {
        trial_id: r.trial.id,
        state: r.outcome.state,
        ok: r.outcome.ok,
        score: r.outcome.score,
        attempt_id: r.attempts.last().map(|a| a.attempt.id),
        source: None,
    }
}

fn assemble(
    run_key: String,
    run_id: Uuid,
    source: String,
    spec: Option<ResolvedRunSpec>,
    plan: Option<RunPlan>,
    records: Vec<RunRecord>,
) -> anyhow::Result<LoadedRun> {
    let (accounting, trials) = match &plan {
        Some(plan) => {
            let obs: Vec<Observation> = records.iter().map(observation).collect();
            let a = reconcile(plan, &obs);
            let trials = match &a.candidates {
                // Best-of-N: one entry per planned trial, its selected bucket.
                Some(c) => c
                    .trials
                    .iter()
                    .map(|t| {
                        let p = plan
                            .trials
                            .iter()
                            .find(|p| p.candidate.as_ref().map(|c| c.trial_id) == Some(t.trial_id))
                            .expect("every candidate trial comes from the plan");
                        CompareTrial {
                            key: t.key.clone(),
                            task: p.task.id.clone(),
                            agent: p.agent.label.clone(),
                            repetition: p.repetition,
                            bucket: t.bucket,
                        }
                    })
                    .collect(),
                None => plan
                    .trials
                    .iter()
                    .zip(&a.trials)
                    .map(|(p, t)| CompareTrial {
                        key: p.key.clone(),
                        task: p.task.id.clone(),
                        agent: p.agent.label.clone(),
                        repetition: p.repetition,
                        bucket: t.bucket,
                    })
                    .collect(),
            };
            (Some(a), trials)
        }
        None if records.iter().any(|r| r.candidate.is_some()) => {
            // Best-of-N records without their plan: grouped under their planned trials.
            let c = akbench_core::candidates::account_entries(
                records
                    .iter()
                    .map(akbench_core::candidates::Entry::of_record),
            )
            .expect("some record is a candidate");
            let mut trials = Vec::new();
            for t in &c.trials {
                let (task, agent, repetition) = parse_key(&run_key, &t.key)?;
                trials.push(CompareTrial {
                    key: t.key.clone(),
                    task,
                    agent,
                    repetition,
                    bucket: t.bucket,
                });
            }
            (None, trials)
        }
        None => {
            let mut trials = Vec::new();
            for r in &records {
                let (task, agent, repetition) = parse_key(&r.run.key, &r.trial.key)?;
                let o = observation(r);
                trials.push(CompareTrial {
                    key: r.trial.key.clone(),
                    task,
                    agent,
                    repetition,
                    bucket: Bucket::of(&o),
                });
            }
            (None, trials)
        }
    };
    Ok(LoadedRun {
        run_key,
        run_id,
        source,
        spec,
        accounting,
        records,
        trials,
    })
}

/// `<run key>/<task>/<agent>/r<rep>` -> (task, agent, rep).
fn parse_key(run_key: &str, key: &str) -> anyhow::Result<(String, String, u32)> {
    let parsed = key
        .strip_prefix(run_key)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| {
            let mut parts = rest.split('/');
            let (task, agent, rep) = (parts.next()?, parts.next()?, parts.next()?);
            let rep = rep.strip_prefix('r')?.parse().ok()?;
            parts
                .next()
                .is_none()
                .then(|| (task.to_string(), agent.to_string(), rep))
        });
    parsed.ok_or_else(|| {
        InputError(format!(
            "failed to read trial key `{key}`: it is not `<run key>/<task>/<agent>/r<n>`; fix: give records written by akbench"
        ))
        .into()
    })
}

/// Reads and validates every `run_record.json` under `dir` (sorted by path); a record that
/// cannot be read or fails validation refuses the whole folder (exit 2), naming the file.
pub fn read_records(dir: &Path) -> anyhow::Result<Vec<RunRecord>> {
    let mut files: Vec<PathBuf> = Vec::new();
    crate::cmd::shared::records::find_records(dir, &mut files);
    files.sort();
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let r = crate::cmd::shared::records::read(&f);
        match r {
            Ok(r) => out.push(r),
            Err(e) => {
                return Err(InputError(format!(
                    "failed to read {}: {e}; fix: remove or repair that record (`akbench run aggregate` lists every refused one)",
                    f.display()
                ))
                .into())
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_key;

    #[test]
    fn trial_keys_parse() {
        assert_eq!(
            parse_key("ex-1", "ex-1/pyslug-001/oracle/r2").unwrap(),
            ("pyslug-001".into(), "oracle".into(), 2)
        );
        assert!(parse_key("ex-1", "ex-2/pyslug-001/oracle/r2").is_err());
        assert!(parse_key("ex-1", "ex-1/pyslug-001/oracle/2").is_err());
        assert!(parse_key("ex-1", "ex-1/pyslug-001/oracle/r2/x").is_err());
    }
}
