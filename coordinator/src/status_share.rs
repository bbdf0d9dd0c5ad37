//! A run's share of the workers in its status: its priority and weight, its live leases, the
//! fraction of all live leases they are, and the fraction its weight entitles it to among
//! the runs that want workers (`akbench_core::dispatch::share::standing`, over
//! `sql/control/status_share.sql`).

use deadpool_postgres::GenericClient;
use serde::Serialize;
use uuid::Uuid;

use akbench_core::dispatch::share::{standing, Active};

use crate::rows::{self, col, json, RowError};
use crate::scheduler::Caps;
use crate::store::StoreError;

const SHARE_SQL: &str = include_str!("../sql/control/status_share.sql");

/// What a run holds of the workers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunShare {
    /// `execution.priority` (higher first).
    pub priority: i32,
    /// `execution.weight` (share among runs of the same priority).
    pub weight: u32,
    /// Its live leases.
    pub live: u64,
    /// Its live leases over every run's live leases (0 when nothing is live).
    pub of_live: f64,
    /// Its weight over the weights of the runs wanting workers at its priority, when that is
    /// the highest wanting them (else 0); `None` when it wants no workers.
    pub entitled: Option<f64>,
}

/// The share of run `run` on `client`'s snapshot.
pub async fn run_share(
    client: &impl GenericClient,
    run: Uuid,
) -> Result<Option<RunShare>, StoreError> {
    let rows = client
        .query(&client.prepare_cached(SHARE_SQL).await?, &[&run])
        .await?;
    let runs = rows::all("status_share.sql", &rows, |row| {
        let id: Uuid = col(row, "run_id")?;
        let caps: Caps = json(row, "caps")?;
        let live: i64 = col(row, "live")?;
        let wants: bool = col(row, "wants")?;
        Ok::<_, RowError>((id, caps.share, live, wants))
    })?;
    let active: Vec<Active> = runs
        .iter()
        .map(|(_, share, live, wants)| Active {
            share: *share,
            live: u64::try_from(*live).unwrap_or(0),
            wants: *wants,
        })
        .collect();
    let Some(i) = runs.iter().position(|(id, ..)| *id == run) else {
        return Ok(None);
    };
    let s = standing(&active, i);
    Ok(Some(RunShare {
        priority: active[i].share.priority,
        weight: active[i].share.weight,
        live: s.live,
        of_live: s.of_live,
        entitled: s.entitled,
    }))
}
