//! Run and work-item states are PostgreSQL enum types (migration 0036): their labels are
//! core's state names in core's order, so they cannot drift apart; and a database that
//! already holds runs and items in every state upgrades to them with every row kept.

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::rows::parsed;
use akbench_coordinator::store::{Store, StoreError, MIGRATIONS};
use akbench_core::dispatch::machine::ItemState;
use akbench_core::dispatch::RunState;
use uuid::Uuid;

/// The version that turns the state columns into enums.
const ENUMS: i32 = 36;

const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The labels of enum type `ty`, in their order.
async fn labels(client: &tokio_postgres::Client, ty: &str) -> Vec<String> {
    client
        .query(
            "SELECT e.enumlabel::text FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid \
             WHERE t.typname = $1 ORDER BY e.enumsortorder",
            &[&ty],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The type of column `column` of `table`, as PostgreSQL names it.
async fn column_type(client: &tokio_postgres::Client, table: &str, column: &str) -> String {
    client
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = $1::text::regclass AND attname = $2",
            &[&table, &column],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn the_enum_labels_are_cores_state_names_in_cores_order() {
    let store = Store::connect(&test_support::fresh_database().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let client = store.client().await.unwrap();
    let runs: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    let items: Vec<&str> = ItemState::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(labels(&client, "run_state").await, runs);
    assert_eq!(labels(&client, "item_state").await, items);
    assert_eq!(column_type(&client, "runs", "state").await, "run_state");
    assert_eq!(
        column_type(&client, "work_items", "state").await,
        "item_state"
    );
}

/// Applies `migrations` as `Store::migrate` does (their SQL, then their record), so that a
/// later `Store::migrate` sees them applied and applies only the rest.
async fn apply_recorded(
    client: &tokio_postgres::Client,
    before: &[akbench_coordinator::store::Migration],
) {
    client
        .batch_execute(include_str!("../sql/schema_migrations.sql"))
        .await
        .unwrap();
    for m in before {
        client.batch_execute(m.sql).await.unwrap();
        client
            .execute(
                include_str!("../sql/migrations_book/record.sql"),
                &[&m.version, &m.name, &m.checksum()],
            )
            .await
            .unwrap();
    }
}

/// A database migrated up to 0035 holding a run in every run state and a work item in every
/// item state (with its outcome) upgrades through `Store::migrate`: every row keeps its
/// state, now of the enum types, reads back as core's states, the partial indexes are there
/// again with their predicates, the defaults hold, and a name outside the type is refused.
#[tokio::test]
async fn a_database_with_runs_in_every_state_upgrades_to_the_enum_types() {
    let store = Store::connect(&test_support::fresh_database().await)
        .await
        .unwrap();
    let client = store.client().await.unwrap();
    let before: Vec<_> = MIGRATIONS
        .iter()
        .filter(|m| m.version < ENUMS)
        .copied()
        .collect();
    assert!(before.iter().any(|m| m.version == 35), "{before:?}");
    apply_recorded(&client, &before).await;
    assert_eq!(column_type(&client, "runs", "state").await, "text");

    // One run per run state; the first run holds one item per item state.
    let mut runs = Vec::new();
    for state in RunState::ALL {
        let run_id = Uuid::now_v7();
        client
            .execute(
                "INSERT INTO run_specs (run_id, run_key, digest, document) \
                 VALUES ($1, $2, $3, '{}'::jsonb)",
                &[&run_id, &format!("run-{state}"), &DIGEST],
            )
            .await
            .unwrap();
        client
            .execute(
                "INSERT INTO runs (run_id, state) VALUES ($1, $2)",
                &[&run_id, &state.as_str()],
            )
            .await
            .unwrap();
        runs.push((run_id, state));
    }
    let run = runs[0].0;
    let mut items = Vec::new();
    for (ordinal, state) in ItemState::ALL.into_iter().enumerate() {
        let trial_id = Uuid::now_v7();
        let ordinal = ordinal as i32;
        let outcome = match state {
            ItemState::Ready | ItemState::Leased => None,
            ItemState::Done => Some("completed"),
            ItemState::Cancelled => Some("cancelled"),
        };
        client
            .execute(
                "INSERT INTO planned_trials (trial_id, run_id, ordinal, key, task_id, agent, \
                                             repetition, document) \
                 VALUES ($1, $2, $3, $4, 't', 'a', 0, '{}')",
                &[&trial_id, &run, &ordinal, &format!("k{ordinal}")],
            )
            .await
            .unwrap();
        client
            .execute(
                "INSERT INTO work_items (trial_id, run_id, ordinal, agent, state, outcome) \
                 VALUES ($1, $2, $3, 'a', $4, $5)",
                &[&trial_id, &run, &ordinal, &state.as_str(), &outcome],
            )
            .await
            .unwrap();
        items.push((trial_id, state, outcome));
    }

    // 0036 and the migrations after it.
    let after: Vec<i32> = MIGRATIONS
        .iter()
        .filter(|m| m.version >= ENUMS)
        .map(|m| m.version)
        .collect();
    assert_eq!(after[0], ENUMS);
    assert_eq!(store.migrate().await.unwrap(), after);
    assert_eq!(column_type(&client, "runs", "state").await, "run_state");
    assert_eq!(
        column_type(&client, "work_items", "state").await,
        "item_state"
    );

    // Every row kept its state, read back through the product's row decoding.
    for (run_id, state) in &runs {
        let row = client
            .query_one("SELECT state FROM runs WHERE run_id = $1", &[run_id])
            .await
            .unwrap();
        assert_eq!(parsed(&row, "state", RunState::parse).unwrap(), *state);
    }
    for (trial_id, state, outcome) in &items {
        let row = client
            .query_one(
                "SELECT state, outcome FROM work_items WHERE trial_id = $1",
                &[trial_id],
            )
            .await
            .unwrap();
        assert_eq!(parsed(&row, "state", ItemState::parse).unwrap(), *state);
        assert_eq!(row.get::<_, Option<String>>("outcome").as_deref(), *outcome);
    }

    // The partial indexes are back, each with its state predicate, and serve their state.
    let indexes: Vec<(String, String)> = client
        .query(
            "SELECT indexname::text, indexdef FROM pg_indexes \
             WHERE tablename IN ('runs', 'work_items') AND indexdef LIKE '% WHERE %' \
             ORDER BY indexname",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let predicates: Vec<(&str, &str)> = indexes
        .iter()
        .map(|(name, def)| (name.as_str(), def.split(" WHERE ").nth(1).unwrap_or("")))
        .collect();
    assert_eq!(
        predicates,
        [
            ("runs_running", "(state = 'running'::run_state)"),
            ("work_items_done_at", "(state = 'done'::item_state)"),
            ("work_items_done_ordinal", "(state = 'done'::item_state)"),
            ("work_items_leased", "(state = 'leased'::item_state)"),
            ("work_items_outcomes", "(state = 'done'::item_state)"),
            ("work_items_ready", "(state = 'ready'::item_state)"),
        ]
    );
    let ready: i64 = client
        .query_one(
            "SELECT count(*) FROM work_items WHERE run_id = $1 AND state = 'ready'",
            &[&run],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(ready, 1);

    // The defaults are the first states; a name outside the type is refused.
    let run_id = Uuid::now_v7();
    client
        .execute(
            "INSERT INTO run_specs (run_id, run_key, digest, document) \
             VALUES ($1, 'default', $2, '{}'::jsonb)",
            &[&run_id, &DIGEST],
        )
        .await
        .unwrap();
    client
        .execute("INSERT INTO runs (run_id) VALUES ($1)", &[&run_id])
        .await
        .unwrap();
    let row = client
        .query_one("SELECT state FROM runs WHERE run_id = $1", &[&run_id])
        .await
        .unwrap();
    assert_eq!(
        parsed(&row, "state", RunState::parse).unwrap(),
        RunState::Planned
    );
    let refused: StoreError = client
        .execute(
            "UPDATE runs SET state = $2::text::run_state WHERE run_id = $1",
            &[&run_id, &"paused"],
        )
        .await
        .unwrap_err()
        .into();
    assert!(matches!(refused, StoreError::Invalid(_)), "{refused:?}");
    let refused: StoreError = client
        .execute(
            "UPDATE work_items SET state = $2::text::item_state WHERE run_id = $1",
            &[&run, &"retrying"],
        )
        .await
        .unwrap_err()
        .into();
    assert!(matches!(refused, StoreError::Invalid(_)), "{refused:?}");
}
