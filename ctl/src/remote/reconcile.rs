//! `run reconcile --coordinator`: the accounting through `ReconcileStream`, in memory flat
//! in the plan's size. Text asks for the missing and quarantined trials it lists (20, or
//! every trial with --all, kept in a temporary file until the accounting that precedes them
//! in the output arrives); `--json` asks for every trial and writes each as it arrives, the
//! accounting's other fields after them (the same JSON object, `trials` first).

use super::Client;
use crate::cmd::shared::accounting::{exit_code, show_head, show_more, trial_line, LISTED};
use akbench_core::accounting::{observed_spend, AccountedTrial, ObservedLine, RunAccounting};
use akbench_core::digest::digest_bytes;
use akbench_proto::v1 as pb;
use std::collections::HashSet;
use std::io::{Seek, Write};
use tokio_stream::StreamExt;

/// What the caller does with each entry, in plan order.
pub(crate) trait OnTrial {
    /// One more entry.
    fn trial(&mut self, t: AccountedTrial) -> anyhow::Result<()>;
}

impl OnTrial for () {
    fn trial(&mut self, _: AccountedTrial) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Reconciles `run` on the coordinator (with `observations`, a JSON array, or its own
/// records), handing the entries of `list` (at most `limit`, 0 for all) to `on`; returns
/// the accounting without them, its digest checked.
pub(crate) async fn call(
    c: &Client,
    run: &str,
    observations: Option<String>,
    list: pb::TrialList,
    limit: u64,
    on: &mut impl OnTrial,
) -> anyhow::Result<RunAccounting> {
    let mut parts = c
        .inner
        .clone()
        .reconcile_stream(c.request(pb::ReconcileStreamRequest {
            run: run.to_string(),
            observations_json: observations.unwrap_or_default(),
            trials: list as i32,
            trials_limit: limit,
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    while let Some(part) = parts.next().await {
        let part = part.map_err(|s| c.error(s))?;
        for t in &part.trials_json {
            let t: AccountedTrial = serde_json::from_str(t).map_err(|e| {
                anyhow::anyhow!("failed to read an accounted trial from {}: {e}", c.url())
            })?;
            on.trial(t)?;
        }
        if let Some(r) = part.summary {
            let digest = digest_bytes(r.report_json.as_bytes());
            if digest != r.report_digest {
                anyhow::bail!(
                    "the coordinator at {} sent a reconciliation report whose digest does not \
                     match ({} vs {digest})",
                    c.url(),
                    r.report_digest
                );
            }
            return serde_json::from_str(&r.report_json).map_err(|e| {
                anyhow::anyhow!(
                    "failed to read the reconciliation report from {}: {e}",
                    c.url()
                )
            });
        }
    }
    anyhow::bail!(
        "the coordinator at {} ended the reconciliation of run `{run}` before its accounting",
        c.url()
    )
}

/// The trials text output lists, in a temporary file until the accounting is printed.
struct Listed {
    file: std::io::BufWriter<std::fs::File>,
}

impl OnTrial for Listed {
    fn trial(&mut self, t: AccountedTrial) -> anyhow::Result<()> {
        writeln!(self.file, "{}", trial_line(&t))?;
        Ok(())
    }
}

/// `--json`: `{"trials": [` and each entry as it arrives.
struct JsonTrials<W: Write> {
    out: W,
    n: u64,
}

impl<W: Write> OnTrial for JsonTrials<W> {
    fn trial(&mut self, t: AccountedTrial) -> anyhow::Result<()> {
        let sep = if self.n == 0 {
            "{\n  \"trials\": [\n"
        } else {
            ",\n"
        };
        self.n += 1;
        self.out.write_all(sep.as_bytes())?;
        let text = serde_json::to_string_pretty(&t)?;
        for (i, line) in text.lines().enumerate() {
            if i > 0 {
                self.out.write_all(b"\n")?;
            }
            write!(self.out, "    {line}")?;
        }
        Ok(())
    }
}

impl<W: Write> JsonTrials<W> {
    /// Closes the list and writes the accounting's other fields (and `spend`).
    fn finish(mut self, a: &RunAccounting, spent: Option<serde_json::Value>) -> anyhow::Result<()> {
        let mut v = serde_json::to_value(a)?;
        let fields = v
            .as_object_mut()
            .ok_or_else(|| anyhow::anyhow!("an accounting is a JSON object"))?;
        fields.remove("trials");
        if let Some(s) = spent {
            fields.insert("spend".into(), s);
        }
        let rest = serde_json::to_string_pretty(&v)?;
        // `{\n  "field": ...\n}`: its fields follow the list.
        let rest = rest.strip_prefix("{\n").unwrap_or(&rest);
        if self.n == 0 {
            writeln!(self.out, "{{\n  \"trials\": [],")?;
        } else {
            writeln!(self.out, "\n  ],")?;
        }
        writeln!(self.out, "{rest}")?;
        self.out.flush()?;
        Ok(())
    }
}

/// `run reconcile --coordinator`: prints as the local command does and returns its exit
/// code. With a file of observations, also what its lines say the planned trials spent
/// (the planned ones: those observed that are not unexpected).
pub(crate) async fn reconcile(
    c: &Client,
    run: &str,
    lines: Option<Vec<ObservedLine>>,
    all: bool,
    json: bool,
) -> anyhow::Result<i32> {
    let observations = match &lines {
        Some(l) => Some(serde_json::to_string(
            &l.iter().map(|l| &l.observation).collect::<Vec<_>>(),
        )?),
        None => None,
    };
    let spent_of = |a: &RunAccounting| {
        lines.as_ref().map(|l| {
            let unexpected: HashSet<_> = a.unexpected.iter().collect();
            let planned = l
                .iter()
                .map(|l| l.observation.trial_id)
                .filter(|id| !unexpected.contains(id))
                .collect();
            observed_spend(&planned, l)
        })
    };
    if json {
        let stdout = std::io::stdout();
        let mut out = JsonTrials {
            out: std::io::BufWriter::new(stdout.lock()),
            n: 0,
        };
        let a = call(c, run, observations, pb::TrialList::All, 0, &mut out).await?;
        let spent = spent_of(&a).map(serde_json::to_value).transpose()?;
        out.finish(&a, spent)?;
        return Ok(exit_code(&a));
    }
    let (list, limit) = if all {
        (pb::TrialList::All, 0)
    } else {
        (pb::TrialList::Unaccounted, LISTED as u64)
    };
    let mut listed = Listed {
        file: std::io::BufWriter::new(tempfile::tempfile()?),
    };
    let a = call(c, run, observations, list, limit, &mut listed).await?;
    show_head(&a, spent_of(&a).as_ref());
    let mut file = listed.file.into_inner().map_err(|e| e.into_error())?;
    file.rewind()?;
    std::io::copy(&mut file, &mut std::io::stdout().lock())?;
    show_more(&a, all);
    Ok(exit_code(&a))
}
