//! The queue depth `/metrics` reports (`akbench_queue_depth`): the ready work items of every
//! running run, by run and provider route, read off the run counters with status's own rule
//! (`ready = total - leased - done - cancelled` per agent, [`Counts::from_rows`]) instead of
//! counting the items: a scrape reads O(runs x agents) rows whatever the queue's length (it
//! counted a million index entries, 0.37-0.40 s, at a million ready items:
//! docs/performance-notebook.md, "Where a status call's time goes at a million, session 18").

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::rows::{col, FromRow};
use crate::status::RUNS_COUNTS_SQL;
use crate::status_rows::{CountRow, Counts};
use crate::store::StoreError;

const QUEUE_RUNS_SQL: &str = include_str!("../sql/metrics/queue_runs.sql");

/// The ready work items of each running run by (run key, provider route), non-zero only.
pub async fn ready_by_route(
    client: &tokio_postgres::Client,
) -> Result<BTreeMap<(String, String), u64>, StoreError> {
    let runs = client.query(QUEUE_RUNS_SQL, &[]).await?;
    let mut keys: BTreeMap<Uuid, String> = BTreeMap::new();
    let mut routes: BTreeMap<(Uuid, String), String> = BTreeMap::new();
    for row in &runs {
        let id: Uuid = col(row, "run_id")?;
        keys.insert(id, col(row, "run_key")?);
        if let Some(agent) = col::<Option<String>>(row, "agent")? {
            routes.insert((id, agent), col(row, "route")?);
        }
    }
    if keys.is_empty() {
        return Ok(BTreeMap::new());
    }
    let ids: Vec<Uuid> = keys.keys().copied().collect();
    let mut by_agent: BTreeMap<(Uuid, String), Vec<CountRow>> = BTreeMap::new();
    for row in &client.query(RUNS_COUNTS_SQL, &[&ids]).await? {
        let id: Uuid = col(row, "run_id")?;
        let c = CountRow::from_row(row)?;
        by_agent.entry((id, c.agent.clone())).or_default().push(c);
    }
    let mut depth: BTreeMap<(String, String), u64> = BTreeMap::new();
    for ((id, agent), rows) in by_agent {
        let counts = Counts::from_rows(&rows).map_err(|problem| {
            StoreError::Invalid(format!(
                "the counters of run {id}, agent `{agent}`, disagree: {problem}"
            ))
        })?;
        let ready = counts.work_items.get("ready").copied().unwrap_or(0);
        if ready == 0 {
            continue;
        }
        let route = routes.get(&(id, agent)).cloned().unwrap_or_default();
        *depth.entry((keys[&id].clone(), route)).or_default() += ready;
    }
    Ok(depth)
}
