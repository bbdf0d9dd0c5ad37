//! The typed rows of the status projection's queries (`sql/control/status_*.sql`), decoded
//! by column name ([`crate::rows`]): a negative count, an unknown bucket ([`bucket_named`])
//! or a NULL where none belongs is an error, never 0. The run's counters
//! (`status_counts.sql`, migration 0015) are folded into [`Counts`]. The rows that are
//! also the projection's public values (a paused route, a recent failure) decode in
//! [`crate::status`], beside their types.

use std::collections::BTreeMap;

use akbench_core::accounting::Bucket;
use akbench_core::spend::{Spend, SpendTotals};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;

use crate::rows::{col, count, parsed_opt, FromRow, RowError};

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

/// The projection's clock and moving parts.
#[derive(Debug)]
pub(crate) struct Clock {
    pub(crate) as_of: DateTime<Utc>,
    pub(crate) by_agent: String,
    pub(crate) recent: u64,
    /// When the oldest of the `recent` trials finished (`None`: none finished).
    pub(crate) recent_since: Option<DateTime<Utc>>,
    pub(crate) workers: u64,
}

impl FromRow for Clock {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        Ok(Clock {
            as_of: col(row, "as_of")?,
            by_agent: col(row, "by_agent")?,
            recent: count(row, "recent")?,
            recent_since: col(row, "recent_since")?,
            workers: count(row, "workers")?,
        })
    }
}

/// The bucket stored under `name` (`Bucket::as_str`) in `work_items.bucket`.
pub fn bucket_named(name: &str) -> Option<Bucket> {
    akbench_core::accounting::ALL_BUCKETS
        .iter()
        .copied()
        .find(|b| b.as_str() == name)
}

/// One summed key of a run's counters (`status_counts.sql`).
#[derive(Debug, Clone, PartialEq)]
pub struct CountRow {
    /// Agent label.
    pub agent: String,
    /// `items`, `retries` or `spend`.
    pub kind: String,
    /// For `items`: `total`, `leased`, `done` or `cancelled`.
    pub state: String,
    /// For done items: their bucket (`None` while not known).
    pub bucket: Option<Bucket>,
    /// The count.
    pub n: u64,
    /// For `spend`: trials of which a record reported a cost.
    pub n_cost: u64,
    /// For `spend`: the sums of the records' tokens and cost.
    pub spend: Spend,
    /// Delta rows summed into this one.
    pub deltas: u64,
}

impl FromRow for CountRow {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        Ok(CountRow {
            agent: col(row, "agent")?,
            kind: col(row, "kind")?,
            state: col(row, "state")?,
            bucket: parsed_opt(row, "bucket", bucket_named)?,
            n: count(row, "n")?,
            n_cost: count(row, "n_cost")?,
            spend: Spend {
                input_tokens: tokens(row, "input_tokens")?,
                cached_input_tokens: tokens(row, "cached_input_tokens")?,
                output_tokens: tokens(row, "output_tokens")?,
                cost_usd: col(row, "cost_usd")?,
            },
            deltas: count(row, "deltas")?,
        })
    }
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

/// What status reads from a run's counters.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts {
    /// Work items by state (`ready`, `leased`, `done`, `cancelled`; non-zero only).
    pub work_items: BTreeMap<String, u64>,
    /// Trials with an outcome by agent and bucket: the done ones whose bucket is known, and
    /// the cancelled work items (bucket `cancelled`), as reconcile counts them.
    pub outcomes: BTreeMap<(String, Bucket), u64>,
    /// Attempts beyond the first of their trial.
    pub retries: u64,
    /// Tokens and cost per agent with at least one accepted record (cost per solved unset).
    pub spend: BTreeMap<String, SpendTotals>,
    /// Delta rows summed.
    pub deltas: u64,
}

impl Counts {
    /// Folds the summed keys; a key status does not know, or counters that disagree (more
    /// items leased, done or cancelled than inserted, more trials with a cost than with a
    /// record), is an error saying which.
    pub fn from_rows(rows: &[CountRow]) -> Result<Counts, String> {
        let mut c = Counts::default();
        let mut total = 0u64;
        let mut placed = 0u64;
        for r in rows {
            c.deltas += r.deltas;
            match (r.kind.as_str(), r.state.as_str()) {
                ("items", "total") => total += r.n,
                ("items", state @ ("leased" | "done" | "cancelled")) => {
                    placed += r.n;
                    if r.n > 0 {
                        *c.work_items.entry(state.to_string()).or_default() += r.n;
                    }
                    let bucket = match state {
                        "cancelled" => Some(Bucket::Cancelled),
                        "done" => r.bucket,
                        _ => None,
                    };
                    if let Some(b) = bucket.filter(|_| r.n > 0) {
                        *c.outcomes.entry((r.agent.clone(), b)).or_default() += r.n;
                    }
                }
                ("retries", "") => c.retries += r.n,
                ("spend", "") => {
                    if r.n_cost > r.n {
                        return Err(format!(
                            "the counters of agent `{}` say {} trials reported a cost but only {} have a record",
                            r.agent, r.n_cost, r.n
                        ));
                    }
                    if r.n > 0 {
                        let s = c.spend.entry(r.agent.clone()).or_default();
                        s.spend = s.spend.plus(&r.spend);
                        s.trials_without_cost += r.n - r.n_cost;
                    }
                }
                (kind, state) => {
                    return Err(format!("unknown run counter `{kind}`/`{state}`"));
                }
            }
        }
        let ready = total.checked_sub(placed).ok_or_else(|| {
            format!("the counters count {placed} work items leased, done or cancelled of {total}")
        })?;
        if ready > 0 {
            c.work_items.insert("ready".into(), ready);
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(agent: &str, kind: &str, state: &str, bucket: Option<Bucket>, n: u64) -> CountRow {
        CountRow {
            agent: agent.into(),
            kind: kind.into(),
            state: state.into(),
            bucket,
            n,
            n_cost: 0,
            spend: Spend::default(),
            deltas: 1,
        }
    }

    #[test]
    fn counters_fold_into_states_outcomes_retries_and_spend() {
        let mut spend = row("a", "spend", "", None, 3);
        spend.n_cost = 1;
        spend.spend.cost_usd = Some(0.5);
        let rows = vec![
            row("a", "items", "total", None, 10),
            row("b", "items", "total", None, 5),
            row("a", "items", "leased", None, 2),
            row("a", "items", "done", Some(Bucket::Succeeded), 3),
            row("a", "items", "done", None, 1),
            row("b", "items", "done", Some(Bucket::Failed), 0),
            row("b", "items", "cancelled", None, 4),
            row("a", "retries", "", None, 2),
            row("b", "retries", "", None, 1),
            spend,
            row("b", "spend", "", None, 0),
        ];
        let c = Counts::from_rows(&rows).unwrap();
        let states: Vec<(&str, u64)> = c.work_items.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            states,
            [("cancelled", 4), ("done", 4), ("leased", 2), ("ready", 5)]
        );
        assert_eq!(c.outcomes.len(), 2);
        assert_eq!(c.outcomes[&("a".into(), Bucket::Succeeded)], 3);
        assert_eq!(c.outcomes[&("b".into(), Bucket::Cancelled)], 4);
        assert_eq!(c.retries, 3);
        assert_eq!(c.spend.len(), 1, "an agent without records has no spend");
        assert_eq!(c.spend["a"].trials_without_cost, 2);
        assert_eq!(c.spend["a"].spend.cost_usd, Some(0.5));
        assert_eq!(c.deltas, 11);
    }

    #[test]
    fn counters_that_disagree_are_errors() {
        let over = [
            row("a", "items", "total", None, 1),
            row("a", "items", "done", None, 2),
        ];
        assert!(Counts::from_rows(&over)
            .unwrap_err()
            .contains("2 work items"));
        let mut cost = row("a", "spend", "", None, 1);
        cost.n_cost = 2;
        assert!(Counts::from_rows(&[cost]).is_err());
        let odd = [row("a", "items", "ready", None, 1)];
        assert!(Counts::from_rows(&odd)
            .unwrap_err()
            .contains("items`/`ready"));
    }
}
