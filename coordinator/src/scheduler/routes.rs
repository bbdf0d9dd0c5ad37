//! Provider route pauses in PostgreSQL (`route_pauses`, migration 0010): when attempts end,
//! [`note_finished`] feeds each one on a route to core's [`route_pause::next`] in the same
//! transaction that settles them; `claim_candidates.sql` skips the work items of a paused
//! route, and the unstarted leases of a paused route are taken back ([`super::revoke`]).
//!
//! [`route_pause::next`]: akbench_core::route_pause::next

use crate::rows::{col, RowError};
use crate::store::{StoreError, Tx};
use akbench_core::lifecycle::State;
use akbench_core::route_pause::{self, RoutePolicy, RouteState};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

use super::apply::Settled;
use uuid::Uuid;

const ROUTES_OF_TRIALS_SQL: &str = include_str!("../../sql/routes/routes_of_trials.sql");
const CREATE_ROUTES_SQL: &str = include_str!("../../sql/routes/create_routes.sql");
const LOCK_ROUTES_SQL: &str = include_str!("../../sql/routes/lock_routes.sql");
const UPDATE_ROUTE_SQL: &str = include_str!("../../sql/routes/update_route.sql");

/// Lifts the pause of `route` by hand (core's [`route_pause::lifted`]), under its row lock.
/// Returns its state before, or `None` when no attempt ever ran on it.
pub(super) async fn lift(tx: &Tx<'_>, route: &str) -> Result<Option<RouteState>, StoreError> {
    let routes = vec![route.to_string()];
    let locked = tx
        .query(&tx.prepare_cached(LOCK_ROUTES_SQL).await?, &[&routes])
        .await?;
    let Some(r) = locked.first() else {
        return Ok(None);
    };
    let before = RouteState {
        consecutive_failures: crate::rows::count32(r, "consecutive_failures")?,
        paused_until: col(r, "paused_until")?,
        last_error: col(r, "last_error")?,
    };
    let after = route_pause::lifted(&before);
    let failures = i32::try_from(after.consecutive_failures).unwrap_or(i32::MAX);
    tx.execute(
        &tx.prepare_cached(UPDATE_ROUTE_SQL).await?,
        &[&route, &failures, &after.paused_until, &after.last_error],
    )
    .await?;
    Ok(Some(before))
}

/// Updates the routes of the trials whose attempts just ended (`terminal` and `cause` per
/// trial, in order). The routes of the trials `settle` decided come with them; only the
/// others (an item no longer leased) are looked up. Pauses are decided at `now`, the
/// scheduler's clock, which claims compare `paused_until` with.
pub(super) async fn note_finished(
    tx: &Tx<'_>,
    trials: &[Uuid],
    terminal: &[State],
    causes: &[&str],
    settled: &HashMap<Uuid, Settled>,
    now: DateTime<Utc>,
) -> Result<Vec<super::revoke::Revoked>, StoreError> {
    let mut route_of: BTreeMap<Uuid, String> = BTreeMap::new();
    let mut unsettled: Vec<Uuid> = Vec::new();
    for trial in trials {
        match settled.get(trial) {
            Some(s) => {
                if let Some(route) = &s.route {
                    route_of.insert(*trial, route.clone());
                }
            }
            None => unsettled.push(*trial),
        }
    }
    if !unsettled.is_empty() {
        let rows = tx
            .query(
                &tx.prepare_cached(ROUTES_OF_TRIALS_SQL).await?,
                &[&unsettled],
            )
            .await?;
        route_of.extend(crate::rows::all("routes_of_trials.sql", &rows, |r| {
            Ok::<_, RowError>((col(r, "trial_id")?, col(r, "provider_route")?))
        })?);
    }
    if route_of.is_empty() {
        return Ok(Vec::new());
    }
    let mut routes: Vec<String> = route_of.values().cloned().collect();
    routes.sort();
    routes.dedup();
    tx.execute(&tx.prepare_cached(CREATE_ROUTES_SQL).await?, &[&routes])
        .await?;
    let locked = tx
        .query(&tx.prepare_cached(LOCK_ROUTES_SQL).await?, &[&routes])
        .await?;
    let mut states: BTreeMap<String, RouteState> = BTreeMap::new();
    let locked = crate::rows::all("lock_routes.sql", &locked, |r| {
        let state = RouteState {
            consecutive_failures: crate::rows::count32(r, "consecutive_failures")?,
            paused_until: col(r, "paused_until")?,
            last_error: col(r, "last_error")?,
        };
        Ok((col::<String>(r, "route")?, state))
    })?;
    states.extend(locked);
    let policy = RoutePolicy::default();
    for ((trial, state), cause) in trials.iter().zip(terminal).zip(causes) {
        let Some(route) = route_of.get(trial) else {
            continue;
        };
        let outcome = route_pause::outcome_of(*state, cause);
        if let Some(s) = states.get_mut(route) {
            *s = route_pause::next(s, &outcome, now, &policy);
        }
    }
    let update = tx.prepare_cached(UPDATE_ROUTE_SQL).await?;
    for (route, s) in &states {
        let failures = i32::try_from(s.consecutive_failures).unwrap_or(i32::MAX);
        tx.execute(&update, &[route, &failures, &s.paused_until, &s.last_error])
            .await?;
    }
    // A paused route holds for prefetched work too: its unstarted leases are taken back.
    let paused: Vec<String> = states
        .iter()
        .filter(|(_, s)| s.paused_until.is_some_and(|until| until > now))
        .map(|(route, _)| route.clone())
        .collect();
    super::revoke::revoke_unstarted(tx, &[], &paused, now).await
}
