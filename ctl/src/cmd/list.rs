//! `akbench run list`: the runs of the local store, or of a coordinator (`--coordinator`,
//! through `ListRuns` and one `GetStatus` per listed run for its progress), newest first,
//! filtered by experiment, state and creation time. Exit 0 (an empty list too).

use crate::cli::{ListArgs, RemoteArgs};
use crate::cmd::shared::common::print_json;
use crate::exit::{self, InputError};
use akbench_core::clock::{Clock, SystemClock};
use akbench_core::evidence::EvidenceStore;
use akbench_core::run_list::{parse_since, Filter, RunRow};
use akbench_proto::v1 as pb;

/// Lists runs.
pub fn run(args: ListArgs, remote: &RemoteArgs) -> anyhow::Result<i32> {
    let since = args
        .since
        .as_deref()
        .map(|s| parse_since(s, SystemClock.now()))
        .transpose()
        .map_err(|e| InputError(format!("failed to read --since: {e}")))?;
    let filter = Filter {
        experiment: args.experiment.clone(),
        state: args.state.clone(),
        since,
    };
    let mut rows = match remote
        .coordinator
        .as_deref()
        .filter(|u| !u.trim().is_empty())
    {
        Some(url) => remote_rows(url, remote, &filter)?,
        None => local_rows(&EvidenceStore::new(&args.store.store_root), &filter)?,
    };
    rows.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.key.cmp(&b.key)));
    if args.store.json {
        print_json(&serde_json::json!({ "runs": rows }))?;
    } else if rows.is_empty() {
        outln!("no runs");
    } else {
        outln!(
            "{:<32} {:<16} {:<12} {:>7} {:>9}  created",
            "key",
            "experiment",
            "state",
            "trials",
            "progress"
        );
        for r in &rows {
            let progress = match r.finished {
                Some(f) => format!("{f}/{}", r.trials),
                None => "-".into(),
            };
            outln!(
                "{:<32} {:<16} {:<12} {:>7} {:>9}  {}",
                r.key,
                r.experiment,
                r.state,
                r.trials,
                progress,
                r.created_at.format("%Y-%m-%d %H:%M:%SZ")
            );
        }
    }
    Ok(exit::OK)
}

/// The local store's runs; progress comes from the outcome a sweep wrote (unknown without).
fn local_rows(store: &EvidenceStore, filter: &Filter) -> anyhow::Result<Vec<RunRow>> {
    let mut rows = Vec::new();
    for key in store.keys() {
        let r = store.find(&key)?;
        let row = RunRow {
            key: r.spec.run_key().to_string(),
            run_id: r.spec.run_id(),
            experiment: r.spec.condition.experiment.clone(),
            state: r.state().to_string(),
            trials: r
                .plan()
                .map_or(r.spec.trial_count(), |p| p.trials.len() as u64),
            finished: r
                .outcome
                .as_ref()
                .map(|o| o.counts.planned() - o.counts.missing),
            created_at: r.spec.identity.created_at,
        };
        if filter.keep(&row) {
            rows.push(row);
        }
    }
    Ok(rows)
}

fn remote_rows(url: &str, args: &RemoteArgs, filter: &Filter) -> anyhow::Result<Vec<RunRow>> {
    let remote = crate::remote::Remote::new(url, args)?;
    crate::remote::block_on(async {
        let c = remote.connect().await?;
        let mut rows = Vec::new();
        let mut token = String::new();
        loop {
            let page = c
                .inner
                .clone()
                .list_runs(c.request(pb::ListRunsRequest {
                    page_size: 0,
                    page_token: token.clone(),
                    key_prefix: String::new(),
                }))
                .await
                .map_err(|s| c.error(s))?
                .into_inner();
            let mut older = false;
            for s in page.runs {
                let row = row_of(&s)?;
                // Newest first: once a run is older than --since, every later one is too.
                older |= filter.since.is_some_and(|t| row.created_at < t);
                if filter.keep(&row) {
                    rows.push(row);
                }
            }
            if page.next_page_token.is_empty() || older {
                break;
            }
            token = page.next_page_token;
        }
        for row in &mut rows {
            let status = c
                .inner
                .clone()
                .get_status(c.request(pb::GetStatusRequest {
                    run: row.run_id.to_string(),
                }))
                .await
                .map_err(|s| c.error(s))?
                .into_inner();
            // Settled: with an outcome, or cancelled without running (a spent budget, a
            // cancelled run), as the local store's progress counts them (README, `run list`).
            let cancelled = status
                .work_items
                .iter()
                .find(|c| c.state == "cancelled")
                .map_or(0, |c| c.count);
            row.finished = Some(status.finished + cancelled);
        }
        anyhow::Ok(rows)
    })?
}

fn row_of(s: &pb::RunSummary) -> anyhow::Result<RunRow> {
    Ok(RunRow {
        key: s.run_key.clone(),
        run_id: s.run_id.parse().map_err(|e| {
            anyhow::anyhow!(
                "the coordinator sent run {} with a bad UUID: {e}",
                s.run_key
            )
        })?,
        experiment: s.experiment.clone(),
        state: crate::remote::state_name(s.state),
        trials: s.trial_count,
        finished: None,
        created_at: chrono::DateTime::from_timestamp_millis(s.created_at_unix_ms)
            .unwrap_or_default(),
    })
}
