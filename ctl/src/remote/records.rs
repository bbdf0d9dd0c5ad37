//! `akbench run records <run> --out DIR`: each trial's run record (assembled by the
//! coordinator from every attempt, docs/remote.md), streamed by `FetchRecords` in plan order,
//! written as `DIR/<trial key>/run_record.json` (trial keys are `<run>/<task>/<agent>/r<n>`;
//! the layout `akbench sweep` leaves, so `akbench run aggregate DIR` reads them).
//!
//! Each file holds exactly the record's canonical JSON as sent (its `sha256:` digest is
//! checked before writing), written to a temporary file in the same folder and renamed into
//! place, so a reader never sees half a record. Trial keys (`<run key>/<task>/<agent>/r<n>`)
//! come with each record (`trial_key`: the client never downloads the plan); a key with an
//! empty, `.` or `..` component, a leading `/`, or a folder on its way that is a symlink is
//! refused, so nothing is written outside DIR.
//!
//! With `--artifacts DIR` (the workers' artifact folder), each attempt's `trajectory.json`
//! is copied beside its record, so the export carries what the agent did.

use super::Client;
use crate::cli::RecordsArgs;
use crate::exit;
use akbench_core::accounting::{Bucket, BucketCounts, Coverage, Observation};
use akbench_core::digest::digest_bytes;
use akbench_core::plan::RunPlan;
use akbench_proto::v1 as pb;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file name of each record.
pub const RECORD_FILE: &str = "run_record.json";

/// Downloads the records.
pub async fn run(c: Client, args: RecordsArgs) -> anyhow::Result<i32> {
    if let Some(a) = args.artifacts.as_ref().filter(|a| !a.is_dir()) {
        return Err(crate::exit::InputError(format!(
            "failed to export records: --artifacts {} is not a folder; fix: give the workers' artifact folder (`akbench up --out`), or leave it out",
            a.display()
        ))
        .into());
    }
    // Per record as it is written: its bucket, its trajectories, its line of --json's
    // `trials` (in a temporary file until the totals that precede it are known).
    let mut counts = BucketCounts::default();
    let mut trajectories = args.artifacts.as_ref().map(|_| Trajectories::default());
    let mut listed = match args.run.json {
        true => Some(std::io::BufWriter::new(tempfile::tempfile()?)),
        false => None,
    };
    let mut on = |r: &pb::RunRecord, key: &str, path: &Path| -> anyhow::Result<()> {
        let rec: akbench_core::record::RunRecord = serde_json::from_str(&r.record_json)
            .map_err(|e| anyhow::anyhow!("failed to read the record of trial {key}: {e}"))?;
        counts.add(bucket_of(&rec));
        if let (Some(a), Some(t)) = (&args.artifacts, trajectories.as_mut()) {
            copy_trajectories(a, &args.out, &rec, key, path, t)?;
        }
        if let Some(f) = listed.as_mut() {
            let line = serde_json::json!({
                "ordinal": r.ordinal,
                "key": key,
                "trial_id": r.trial_id,
                "attempt_id": r.attempt_id,
                "digest": r.digest,
                "path": path,
            });
            serde_json::to_writer(&mut *f, &line)?;
            f.write_all(b"\n")?;
        }
        Ok(())
    };
    let Exported {
        summary,
        planned,
        records,
        unexported,
    } = export_with(&c, &args.run.run, &args.out, &args.trials, &mut on).await?;
    counts.add_n(
        Bucket::Missing,
        (planned as u64).saturating_sub(counts.planned()),
    );
    let coverage = Coverage::of(&counts);
    if let Some(listed) = listed {
        let head = serde_json::json!({
            "run_key": summary.run_key,
            "run_id": summary.run_id,
            "out": args.out,
            "planned": planned,
            "records": records,
            "coverage": coverage.ratio(),
            "covered": coverage.covered,
            "trajectories": trajectories.as_ref().map(|t| serde_json::json!({
                "copied": t.copied,
                "missing": t.missing,
            })),
            "not_exported": unexported.iter().map(|(key, why)| serde_json::json!({
                "key": key,
                "why": why,
            })).collect::<Vec<_>>(),
        });
        print_with_trials(&head, listed)?;
    } else {
        outln!(
            "wrote {} records of run {} ({} planned trials, coverage {}) to {}",
            records,
            summary.run_key,
            planned,
            akbench_core::rates::Pct(coverage.ratio()),
            args.out.display()
        );
        if let Some(t) = &trajectories {
            outln!(
                "copied {} trajectories{}",
                t.copied,
                if t.missing.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} attempts whose agent ran have none in the artifact folder",
                        t.missing.len()
                    )
                }
            );
        }
    }
    // A trial the coordinator counts as ended (status and reconcile do) but could not
    // export is named, and the command fails: the export is not the run.
    for (key, why) in &unexported {
        eprintln!("error: failed to export the record of trial {key}: {why}");
    }
    if unexported.is_empty() {
        Ok(exit::OK)
    } else {
        eprintln!(
            "{} ended trials of run {} have no record in {}; the coordinator logged why",
            unexported.len(),
            summary.run_key,
            args.out.display()
        );
        Ok(exit::NEGATIVE)
    }
}

/// What [`copy_trajectories`] copied.
#[derive(Debug, Default)]
pub struct Trajectories {
    /// Files copied.
    pub copied: usize,
    /// `<trial key>/<attempt dir>` of each attempt whose agent ran but whose trajectory is
    /// not in the artifact folder (a run recorded before trajectories were written, or a
    /// worker whose artifacts are elsewhere).
    pub missing: Vec<String>,
}

/// `head` (an object) with a last field `trials`: the JSON values of `listed`'s lines, in
/// order, printed as `print_json` prints (`trials` sorts last among the fields).
fn print_with_trials(
    head: &serde_json::Value,
    listed: std::io::BufWriter<std::fs::File>,
) -> anyhow::Result<()> {
    use std::io::{BufRead, Seek};
    let mut file = listed.into_inner().map_err(|e| e.into_error())?;
    file.rewind()?;
    let text = serde_json::to_string_pretty(head)?;
    let fields = text
        .strip_suffix("\n}")
        .ok_or_else(|| anyhow::anyhow!("a JSON object ends with a brace"))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    write!(out, "{fields},\n  \"trials\": [")?;
    let mut n = 0usize;
    for line in std::io::BufReader::new(file).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        out.write_all(if n == 0 { b"\n" } else { b",\n" })?;
        n += 1;
        for (i, l) in serde_json::to_string_pretty(&v)?.lines().enumerate() {
            if i > 0 {
                out.write_all(b"\n")?;
            }
            write!(out, "    {l}")?;
        }
    }
    out.write_all(if n == 0 { b"]\n}\n" } else { b"\n  ]\n}\n" })?;
    out.flush()?;
    Ok(())
}

/// Copies each attempt's `trajectory.json` of one exported record from the workers'
/// artifact folder (`<artifacts>/<trial key>/<attempt dir>/`, the layout of `akbench up
/// --out`) to the same place under `out`, beside the record (`path`), so `akbench run
/// trajectory` and `akbench view` find it. A path that leaves its trial folder (an attempt
/// dir with `..`, a symlink out) is refused.
fn copy_trajectories(
    artifacts: &Path,
    out: &Path,
    rec: &akbench_core::record::RunRecord,
    key: &str,
    path: &Path,
    t: &mut Trajectories,
) -> anyhow::Result<()> {
    use akbench_core::trajectory::FILE_NAME;
    let dest_dir = path.parent().unwrap_or(out);
    for a in &rec.attempts {
        if a.agent_process.is_none() {
            continue;
        }
        let rel = format!("{}/{FILE_NAME}", a.artifacts_dir);
        if !is_safe_key(&rel) {
            anyhow::bail!(
                "failed to copy the trajectory of trial {key}: its attempt folder `{}` is not a plain relative path; refused",
                a.artifacts_dir
            );
        }
        let src = artifacts.join(key);
        let from = match akbench_core::record::resolve_inside(&src, &rel) {
            Ok(p) => p,
            Err(_) if !src.join(&rel).exists() => {
                t.missing.push(format!("{key}/{}", a.artifacts_dir));
                continue;
            }
            Err(e) => anyhow::bail!("failed to copy the trajectory of trial {key}: {e}"),
        };
        let to = dest_dir.join(&rel);
        let dir = to.parent().unwrap_or(dest_dir);
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", dir.display()))?;
        let bytes = akbench_core::bounded_read::ReadKind::Trajectory
            .load(&from, akbench_core::bounded_read::Links::Refuse)?;
        akbench_core::output::write(&to, &bytes)?;
        t.copied += 1;
    }
    Ok(())
}

/// The bucket of an exported record (core's one rule), for the coverage of the export.
fn bucket_of(rec: &akbench_core::record::RunRecord) -> Bucket {
    Bucket::of(&Observation {
        trial_id: rec.trial.id,
        state: rec.outcome.state,
        ok: rec.outcome.ok,
        score: rec.outcome.score,
        attempt_id: None,
        source: None,
    })
}

/// What [`export`] wrote.
#[derive(Debug)]
pub struct Exported {
    /// The run.
    pub summary: pb::RunSummary,
    /// Planned trials.
    pub planned: usize,
    /// Records written.
    pub records: usize,
    /// Each trial the coordinator counts as ended but could not export: its key and why.
    pub unexported: Vec<(String, String)>,
}

/// Writes every accepted record of `run` (or only `trials`) under `out`, in plan order, and
/// lists the trials the coordinator said it could not export.
pub async fn export(
    c: &Client,
    run: &str,
    out: &Path,
    trials: &[String],
) -> anyhow::Result<Exported> {
    export_with(c, run, out, trials, &mut |_, _, _| Ok(())).await
}

/// [`export`], handing each record written, its trial key and path to `on` as it is
/// written (nothing is kept of it).
pub async fn export_with(
    c: &Client,
    run: &str,
    out: &Path,
    trials: &[String],
    on: &mut OnWritten<'_>,
) -> anyhow::Result<Exported> {
    // The summary only: each record names its trial key, so the plan (hundreds of MiB at a
    // million trials) is never downloaded.
    let got = c.get_run(run, false).await?;
    let summary = got.run.unwrap_or_default();
    let planned = usize::try_from(summary.trial_count).unwrap_or(usize::MAX);
    let (records, unexported) = fetch_and_write(c, &summary, None, out, trials, on).await?;
    Ok(Exported {
        summary,
        planned,
        records,
        unexported,
    })
}

/// Fetches the records of `trials` (all when empty) of the run `summary` and writes each under
/// `out`; `keys`, when given, maps the plan's trial ids to their keys (a record of a trial
/// outside it is refused), else each record's own `trial_key` names it. Each record written
/// goes to `on`. Returns how many were written and the trials the coordinator could not
/// export.
async fn fetch_and_write(
    c: &Client,
    summary: &pb::RunSummary,
    keys: Option<&HashMap<String, &str>>,
    out: &Path,
    trials: &[String],
    on: &mut OnWritten<'_>,
) -> anyhow::Result<(usize, Vec<(String, String)>)> {
    std::fs::create_dir_all(out)
        .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", out.display()))?;
    let mut stream = c
        .inner
        .clone()
        .fetch_records(c.request(pb::FetchRecordsRequest {
            run: summary.run_id.clone(),
            trials: trials.to_vec(),
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    let mut written = 0usize;
    let mut unexported = Vec::new();
    while let Some(r) = stream.message().await.map_err(|s| c.error(s))? {
        let key = match keys {
            Some(keys) => match keys.get(&r.trial_id) {
                Some(key) => key.to_string(),
                None => anyhow::bail!(
                    "the coordinator at {} sent a record of trial {} that is not in the plan of run {}",
                    c.url(),
                    r.trial_id,
                    summary.run_key
                ),
            },
            None if r.trial_key.is_empty() => anyhow::bail!(
                "failed to export the records of run {}: the coordinator at {} sent trial {} without its key; fix: upgrade the coordinator to this akbench version",
                summary.run_key,
                c.url(),
                r.trial_id
            ),
            None => r.trial_key.clone(),
        };
        if !r.not_exported.is_empty() {
            unexported.push((key, r.not_exported));
            continue;
        }
        let digest = digest_bytes(r.record_json.as_bytes());
        if digest != r.digest {
            anyhow::bail!(
                "the record of trial {key} from {} does not match its digest ({} vs {digest})",
                c.url(),
                r.digest
            );
        }
        let path = write_record(out, &key, r.record_json.as_bytes())?;
        on(&r, &key, &path)?;
        written += 1;
    }
    Ok((written, unexported))
}

/// What is done with each record written: the record, its trial key, its path.
pub type OnWritten<'a> = dyn FnMut(&pb::RunRecord, &str, &Path) -> anyhow::Result<()> + 'a;

/// How far before the latest end it saw [`export_ended`] asks from. A trial's end is
/// stamped when the transaction that settled it began, so a trial can become visible stamped
/// up to that transaction's length before a row already read (or in the same millisecond):
/// the rows of the margin are read again and dropped as already written. A settling
/// transaction longer than this could hide its trials from the polls (not from the export
/// at the end of a sweep, which reads every record).
pub const ENDED_OVERLAP_MS: i64 = 30_000;

/// What [`export_ended`] keeps between its polls of one run.
#[derive(Debug, Default)]
pub struct EndedSoFar {
    /// The keys of the trials whose records were written.
    pub written: std::collections::HashSet<String>,
    /// The latest end of a row listed (milliseconds since the epoch, the coordinator's
    /// clock); `None` until a row carries one (a coordinator that predates `ended_unix_ms`:
    /// every poll reads every done trial, as before).
    pub latest_ms: Option<i64>,
    /// The earliest end of a listed trial whose record is not written yet (it is asked for
    /// again, so the next poll reaches back to it).
    pub waiting_ms: Option<i64>,
}

impl EndedSoFar {
    /// The `ended_after_unix_ms` of the next poll: [`ENDED_OVERLAP_MS`] before the latest end
    /// seen, and not after the earliest trial still waiting for its record; `None` (every
    /// done trial) before any end was seen.
    pub fn bound(&self) -> Option<i64> {
        let from = self.latest_ms?.saturating_sub(ENDED_OVERLAP_MS);
        Some(self.waiting_ms.map_or(from, |w| w.min(from)))
    }
}

/// Writes the records of the trials of `plan` (the run `run`) that ended since the last call,
/// as [`export`] writes them, so that `out` fills while the run goes (`akbench view` shows
/// each trial as it ends): the ended trials' keys from `ListTrialRows` (only those that ended
/// from [`EndedSoFar::bound`] on: a poll reads what is new, not every done row), the records
/// of those not written yet from `FetchRecords`; each key written joins `so_far.written`.
/// `so_far` moves on only when the call succeeds (a failed one is asked again from the same
/// bound). Returns how many ended trials still have no record (their record has not
/// arrived: ask again later).
pub async fn export_ended(
    c: &Client,
    run: &str,
    plan: &RunPlan,
    out: &Path,
    so_far: &mut EndedSoFar,
) -> anyhow::Result<usize> {
    let mut stream = c
        .inner
        .clone()
        .list_trial_rows(c.request(pb::ListTrialRowsRequest {
            run: run.to_string(),
            ended_after_unix_ms: so_far.bound(),
            ..Default::default()
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    let mut latest = so_far.latest_ms;
    let mut ended: Vec<(String, Option<i64>)> = Vec::new();
    while let Some(batch) = stream.message().await.map_err(|s| c.error(s))? {
        for r in batch.rows {
            latest = latest.max(r.ended_unix_ms);
            if !so_far.written.contains(&r.key) {
                ended.push((r.key, r.ended_unix_ms));
            }
        }
    }
    let mut new = 0usize;
    if !ended.is_empty() {
        let keys: HashMap<String, &str> = plan
            .trials
            .iter()
            .map(|t| (t.trial_id.to_string(), t.key.as_str()))
            .collect();
        let summary = pb::RunSummary {
            run_key: run.to_string(),
            run_id: plan.run_id.to_string(),
            ..Default::default()
        };
        let asked: Vec<String> = ended.iter().map(|(k, _)| k.clone()).collect();
        let written = &mut so_far.written;
        let mut on = |_: &pb::RunRecord, key: &str, _: &Path| {
            new += 1;
            written.insert(key.to_string());
            Ok(())
        };
        fetch_and_write(c, &summary, Some(&keys), out, &asked, &mut on).await?;
    }
    so_far.latest_ms = latest;
    so_far.waiting_ms = ended
        .iter()
        .filter(|(k, _)| !so_far.written.contains(k))
        .filter_map(|(_, e)| *e)
        .min();
    Ok(ended.len() - new)
}

/// True when `key` is a relative path of plain components (`run/task/agent/r0`): no empty,
/// `.` or `..` component, no leading `/`, no backslash or NUL.
pub fn is_safe_key(key: &str) -> bool {
    !key.is_empty()
        && !key.contains(['\\', '\0'])
        && key
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Writes `DIR/<key>/run_record.json` atomically ([`akbench_core::output`]).
pub fn write_record(out: &Path, key: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    if !is_safe_key(key) {
        anyhow::bail!(
            "failed to write the record of trial `{key}`: its key would escape {}; refused",
            out.display()
        );
    }
    // Every folder on the way must be a real folder (or not exist yet): a symlink could
    // lead outside DIR.
    let mut dir = out.to_path_buf();
    for part in key.split('/') {
        dir.push(part);
        if let Ok(m) = std::fs::symlink_metadata(&dir) {
            if !m.is_dir() || m.file_type().is_symlink() {
                anyhow::bail!(
                    "failed to write the record of trial `{key}`: {} exists and is not a \
                     folder (symlinks are refused)",
                    dir.display()
                );
            }
        }
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", dir.display()))?;
    let path = dir.join(RECORD_FILE);
    akbench_core::output::write(&path, bytes)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_asks_from_a_margin_before_the_latest_end_and_reaches_back_to_a_waiting_trial() {
        let m = ENDED_OVERLAP_MS;
        for (latest, waiting, want) in [
            // No end seen yet (or a coordinator that sends none): every done trial.
            (None, None, None),
            (None, Some(5), None),
            (Some(10 * m), None, Some(9 * m)),
            // A trial still waiting for its record ended before the margin: from it.
            (Some(10 * m), Some(2 * m), Some(2 * m)),
            // One within the margin: the margin.
            (Some(10 * m), Some(10 * m - 1), Some(9 * m)),
            (Some(i64::MIN + 1), None, Some(i64::MIN)),
        ] {
            let so_far = EndedSoFar {
                written: Default::default(),
                latest_ms: latest,
                waiting_ms: waiting,
            };
            assert_eq!(
                so_far.bound(),
                want,
                "latest {latest:?} waiting {waiting:?}"
            );
        }
    }

    #[test]
    fn keys_that_would_escape_are_refused() {
        for bad in [
            "", ".", "..", "../x", "a/../b", "a//b", "a/./b", "a/", "/abs", "a\\b", "x\0",
        ] {
            assert!(!is_safe_key(bad), "{bad:?}");
        }
        assert!(is_safe_key(
            "examples-20260101-abcd/wordcount-001/oracle/r0"
        ));
        let dir = tempfile::tempdir().unwrap();
        assert!(write_record(dir.path(), "../evil", b"{}").is_err());
        let p = write_record(dir.path(), "k", b"{}").unwrap();
        assert_eq!(std::fs::read(p).unwrap(), b"{}");
        let p = write_record(dir.path(), "run/task/agent/r0", b"{}").unwrap();
        assert!(p.ends_with("run/task/agent/r0/run_record.json"));
        std::os::unix::fs::symlink(dir.path(), dir.path().join("link")).unwrap();
        assert!(write_record(dir.path(), "link", b"{}").is_err());
        assert!(write_record(dir.path(), "link/x/r0", b"{}").is_err());
    }
}
