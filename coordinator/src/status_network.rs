//! A run's grading place and networks in its status (core::report::network): per agent and
//! in total, verdicts graded in the agent's environment and in a clean room, done trials
//! whose agent reached for hosts the task did not declare (and how many distinct hosts),
//! attempts a vouched grading fetch ended `infrastructure_error`
//! (`sql/control/network_by_agent.sql` over migration 0035's columns).

use akbench_core::accounting::BucketCounts;
use akbench_core::report::network::NetworkCounts;
use std::collections::BTreeMap;

use crate::rows::{col, count, RowError};

/// The query.
pub const NETWORK_SQL: &str = include_str!("../sql/control/network_by_agent.sql");

/// The rows of `network_by_agent.sql`: per agent, and the total (the row without an agent).
/// `graded_clean_room` is left 0: [`with_clean_room`] fills it from the buckets.
pub fn network_of_rows(
    rows: &[tokio_postgres::Row],
) -> Result<(BTreeMap<String, NetworkCounts>, NetworkCounts), RowError> {
    let mut by_agent = BTreeMap::new();
    let mut total = NetworkCounts::default();
    for row in rows {
        let n = NetworkCounts {
            graded_shared: count(row, "graded_shared")?,
            graded_clean_room: 0,
            undeclared_trials: count(row, "undeclared_trials")?,
            undeclared_hosts: count(row, "undeclared_hosts")?,
            fetch_failed_attempts: count(row, "fetch_failed_attempts")?,
        };
        match col::<Option<String>>(row, "agent")? {
            Some(agent) => {
                by_agent.insert(agent, n);
            }
            None => total = n,
        }
    }
    Ok((by_agent, total))
}

/// `n` with its clean-room verdicts: the graded ones (succeeded and failed) not graded in
/// the agent's environment.
pub fn with_clean_room(mut n: NetworkCounts, c: &BucketCounts) -> NetworkCounts {
    n.graded_clean_room = (c.succeeded + c.failed).saturating_sub(n.graded_shared);
    n
}
