//! The scheduler's statements plan as keyed lookups whatever the statistics say. They run
//! under `keyed_plans.sql` (generic plans kept per connection, sequential scans and hash
//! joins priced out), so a plan made while the tables were young is the plan that runs when
//! they hold a million rows. A statement that finds its rows by key but also tests a state a
//! partial index is built on (`state = 'ready'`) can be planned as a walk of that whole
//! index, filtered by the key: on a young table the index holds "one row". That is what
//! `claim_create.sql` did: each claim walked every ready item (214 ms per claim of 8 items
//! with 20,000 ready, docs/PERFORMANCE.md). This test prepares every statement of
//! `sql/scheduler` and `sql/grading` on young, analyzed tables under the scheduler's
//! settings and refuses any scan of a partial index without an index condition (a partial
//! index holds the rows of one state: few when a plan is made, any number a moment later),
//! except the few whose walk is bounded (listed below with why). Seen failing on
//! `claim_create.sql`, `late_buckets.sql`, `rebucket.sql` and `requeue_revoked.sql`.

mod common;

use akbench_coordinator::scheduler::Caps;
use common::enqueued;
use serde_json::Value;

/// (file, index) pairs whose index walk without a condition is bounded, and why.
const BOUNDED: &[(&str, &str, &str)] = &[
    (
        "claim_contenders.sql",
        "runs_running",
        "the running runs (migration 0034): one entry per run, whatever their items",
    ),
    (
        "revoke_unstarted.sql",
        "work_items_leased",
        "it wants the leased items of whole runs or routes: at most the live leases",
    ),
];

/// Every index scan node of `plan` without an index condition: (index name, node type).
fn unkeyed_scans(plan: &Value, out: &mut Vec<(String, String)>) {
    if let Some(index) = plan.get("Index Name").and_then(Value::as_str) {
        if plan.get("Index Cond").is_none() {
            let kind = plan["Node Type"].as_str().unwrap_or("?").to_string();
            out.push((index.to_string(), kind));
        }
    }
    if let Some(children) = plan.get("Plans").and_then(Value::as_array) {
        for child in children {
            unkeyed_scans(child, out);
        }
    }
}

#[tokio::test]
async fn keyed_statements_never_walk_a_whole_index() {
    let s = common::scheduler().await;
    // Young tables: a few rows in every state the partial indexes are built on, analyzed.
    let run = enqueued(&s, 4, 1, &Caps::default()).await;
    s.register_worker("w1", 8, &std::collections::BTreeMap::new(), "test")
        .await
        .expect("registers");
    let _ = s
        .claim("w1", 2, std::time::Duration::from_secs(30))
        .await
        .expect("claims");
    let client = s.store().client().await.expect("client");
    client.batch_execute("ANALYZE").await.expect("analyze");
    // Partial indexes: whatever the table's size, one holds the rows in one state, few at
    // the moment a plan is made (and counted so by the statistics), many a moment later.
    let partial: Vec<String> = client
        .query(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = 'public' \
             AND indexdef LIKE '% WHERE %'",
            &[],
        )
        .await
        .expect("partial indexes")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        partial.iter().any(|i| i == "work_items_ready"),
        "{partial:?}"
    );
    let settings = include_str!("../sql/scheduler/keyed_plans.sql");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut files = Vec::new();
    for sub in ["scheduler", "grading"] {
        for entry in std::fs::read_dir(dir.join(sub)).expect("sql dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "sql") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() > 30, "found only {} statements", files.len());
    let mut walks = Vec::new();
    let mut planned = 0;
    let mut skipped: Vec<String> = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let sql = std::fs::read_to_string(path).expect("reads");
        if name == "keyed_plans.sql" {
            continue;
        }
        client.batch_execute("BEGIN").await.unwrap();
        client.query_one(settings, &[]).await.expect("settings");
        if let Err(e) = client
            .batch_execute(&format!("PREPARE keyed AS {sql}"))
            .await
        {
            // Several statements in one file (not a scheduler statement): not planned here.
            client.batch_execute("ROLLBACK").await.unwrap();
            let why = e
                .as_db_error()
                .map_or(e.to_string(), |d| d.message().to_string());
            skipped.push(format!("{name}: {why}"));
            continue;
        }
        let n: i32 = client
            .query_one(
                "SELECT coalesce(cardinality(parameter_types), 0) FROM pg_prepared_statements \
                 WHERE name = 'keyed'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let args = vec!["NULL"; n as usize].join(", ");
        let execute = if n == 0 {
            "EXECUTE keyed".to_string()
        } else {
            format!("EXECUTE keyed({args})")
        };
        let row = client
            .query_one(&format!("EXPLAIN (FORMAT JSON) {execute}"), &[])
            .await
            .unwrap_or_else(|e| panic!("{name}: failed to explain: {e}"));
        let plan: Value = row.get(0);
        let mut found = Vec::new();
        unkeyed_scans(&plan[0]["Plan"], &mut found);
        for (index, kind) in found {
            if !partial.contains(&index) {
                continue;
            }
            if !BOUNDED.iter().any(|(f, i, _)| *f == name && *i == index) {
                walks.push(format!(
                    "{name}: {kind} of {index} without an index condition"
                ));
            }
        }
        planned += 1;
        client
            .batch_execute("DEALLOCATE keyed; ROLLBACK")
            .await
            .unwrap();
    }
    drop(run);
    assert!(
        skipped.is_empty(),
        "statements not planned:\n{}",
        skipped.join("\n")
    );
    assert!(planned > 30, "planned only {planned} statements");
    assert!(
        walks.is_empty(),
        "statements that walk a whole index (fix: look the rows up by key and keep the state \
         test off the partial index: bind the state, e.g. `w.state = $6::text::item_state`, \
         never a constant the index predicate matches):\n{}",
        walks.join("\n")
    );
}
