//! The typed rows of the status projection's queries (`sql/control/status_*.sql`,
//! `sql/routes/paused_routes_of_run.sql`), decoded by column name ([`crate::rows`]): a
//! negative count, an unknown bucket or a NULL where none belongs is an error, never 0.

use akbench_core::accounting::Bucket;
use akbench_core::spend::Spend;
use chrono::{DateTime, Utc};
use tokio_postgres::Row;

use crate::rows::{col, count, parsed, FromRow, RowError};
use crate::status::{bucket_named, PausedRoute, RecentFailure};

/// `name, n`: work items by state, live attempts by lifecycle state.
#[derive(Debug)]
pub(crate) struct Named {
    pub(crate) name: String,
    pub(crate) n: u64,
}

impl FromRow for Named {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        Ok(Named {
            name: col(row, "name")?,
            n: count(row, "n")?,
        })
    }
}

/// `agent, bucket, n`: trials with an outcome.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) agent: String,
    pub(crate) bucket: Bucket,
    pub(crate) n: u64,
}

impl FromRow for Outcome {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        Ok(Outcome {
            agent: col(row, "agent")?,
            bucket: parsed(row, "bucket", bucket_named)?,
            n: count(row, "n")?,
        })
    }
}

/// The projection's clock and moving parts.
#[derive(Debug)]
pub(crate) struct Clock {
    pub(crate) as_of: DateTime<Utc>,
    pub(crate) by_agent: String,
    pub(crate) recent: u64,
    pub(crate) workers: u64,
}

impl FromRow for Clock {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        Ok(Clock {
            as_of: col(row, "as_of")?,
            by_agent: col(row, "by_agent")?,
            recent: count(row, "recent")?,
            workers: count(row, "workers")?,
        })
    }
}

/// One agent's tokens and cost.
#[derive(Debug)]
pub(crate) struct AgentSpend {
    pub(crate) agent: String,
    pub(crate) spend: Spend,
    pub(crate) without_cost: u64,
}

fn tokens(row: &Row, column: &'static str) -> Result<Option<u64>, RowError> {
    let n: Option<i64> = col(row, column)?;
    n.map(|n| {
        u64::try_from(n).map_err(|_| RowError::Value {
            column,
            problem: format!("{n} is not a token count"),
        })
    })
    .transpose()
}

impl FromRow for AgentSpend {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        Ok(AgentSpend {
            agent: col(row, "agent")?,
            spend: Spend {
                input_tokens: tokens(row, "input_tokens")?,
                cached_input_tokens: tokens(row, "cached_input_tokens")?,
                output_tokens: tokens(row, "output_tokens")?,
                cost_usd: col(row, "cost_usd")?,
            },
            without_cost: count(row, "without_cost")?,
        })
    }
}

impl FromRow for PausedRoute {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        let failures: i32 = col(row, "consecutive_failures")?;
        Ok(PausedRoute {
            route: col(row, "route")?,
            consecutive_failures: u32::try_from(failures).map_err(|_| RowError::Value {
                column: "consecutive_failures",
                problem: format!("{failures} is not a count"),
            })?,
            paused_until: col(row, "paused_until")?,
            last_error: col(row, "last_error")?,
        })
    }
}

/// `trial, bucket, cause, at`: a recent failure (`status_failures.sql`).
impl FromRow for RecentFailure {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        Ok(RecentFailure {
            trial: col(row, "trial")?,
            bucket: parsed(row, "bucket", bucket_named)?.as_str().to_string(),
            cause: col(row, "cause")?,
            at: col(row, "at")?,
        })
    }
}
