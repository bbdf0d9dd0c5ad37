//! The store on a real private cluster: migrations, the transaction helper and the mapping
//! of SQLSTATE codes to domain errors.

use std::sync::atomic::{AtomicU32, Ordering};

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::store::{Migration, Store, StoreError, MAX_TX_ATTEMPTS, MIGRATIONS};

const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

async fn migrated() -> Store {
    let store = Store::connect(&test_support::fresh_database().await)
        .await
        .expect("connects");
    store.migrate().await.expect("migrates");
    store
}

async fn insert_spec(store: &Store, key: &str) -> Result<(), StoreError> {
    let client = store.client().await?;
    client
        .execute(
            "INSERT INTO run_specs (run_id, run_key, digest, document)
             VALUES (gen_random_uuid(), $1, $2, '{}'::jsonb)",
            &[&key, &DIGEST],
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn migrating_twice_is_a_no_op() {
    let store = Store::connect(&test_support::fresh_database().await)
        .await
        .unwrap();
    let all: Vec<i32> = MIGRATIONS.iter().map(|m| m.version).collect();
    assert_eq!(store.migrate().await.unwrap(), all);
    assert_eq!(store.migrate().await.unwrap(), Vec::<i32>::new());
    let client = store.client().await.unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, MIGRATIONS.len() as i64);
}

#[tokio::test]
async fn concurrent_migrators_apply_each_migration_once() {
    let url = test_support::fresh_database().await;
    let a = Store::connect(&url).await.unwrap();
    let b = Store::connect(&url).await.unwrap();
    let c = Store::connect(&url).await.unwrap();
    let (ra, rb, rc) = tokio::join!(a.migrate(), b.migrate(), c.migrate());
    let mut applied: Vec<i32> = [ra.unwrap(), rb.unwrap(), rc.unwrap()]
        .into_iter()
        .flatten()
        .collect();
    applied.sort();
    let all: Vec<i32> = MIGRATIONS.iter().map(|m| m.version).collect();
    assert_eq!(applied, all);
}

#[tokio::test]
async fn a_database_with_an_unknown_migration_is_refused() {
    let store = migrated().await;
    let client = store.client().await.unwrap();
    client
        .execute(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, 'future', '')",
            &[],
        )
        .await
        .unwrap();
    let err = store.migrate().await.unwrap_err();
    assert!(
        matches!(err, StoreError::UnknownMigration { version: 9999, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade the coordinator"), "{err}");

    client
        .execute("DELETE FROM schema_migrations WHERE version = 9999", &[])
        .await
        .unwrap();
    client
        .execute("UPDATE schema_migrations SET checksum = 'edited'", &[])
        .await
        .unwrap();
    let err = store.migrate().await.unwrap_err();
    assert!(
        matches!(err, StoreError::MigrationMismatch { version: 1, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn evidence_is_append_only() {
    let store = migrated().await;
    insert_spec(&store, "exp-20250101-abcd").await.unwrap();
    let client = store.client().await.unwrap();
    for sql in [
        "UPDATE run_specs SET document = '{\"x\":1}'",
        "DELETE FROM run_specs",
        "TRUNCATE run_specs CASCADE",
    ] {
        let err = StoreError::from(client.execute(sql, &[]).await.unwrap_err());
        match &err {
            StoreError::Immutable { table, .. } => assert_eq!(table, "run_specs"),
            other => panic!("{sql}: expected Immutable, got {other:?}"),
        }
        assert!(
            err.to_string().starts_with("failed to change run_specs"),
            "{err}"
        );
    }
    let count: i64 = client
        .query_one("SELECT count(*) FROM run_specs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 1);
}

#[tokio::test]
async fn constraint_violations_map_to_domain_errors() {
    let store = migrated().await;
    insert_spec(&store, "exp-20250101-abcd").await.unwrap();
    match insert_spec(&store, "exp-20250101-abcd").await.unwrap_err() {
        StoreError::Conflict { constraint, .. } => assert_eq!(constraint, "run_specs_run_key_key"),
        other => panic!("expected Conflict, got {other:?}"),
    }

    let client = store.client().await.unwrap();
    let err: StoreError = client
        .execute(
            "INSERT INTO plans (run_id, stage, digest, document)
             VALUES (gen_random_uuid(), 'draft', $1, '{}')",
            &[&DIGEST],
        )
        .await
        .unwrap_err()
        .into();
    assert!(
        matches!(err, StoreError::ForeignKey { ref constraint, .. } if constraint == "plans_run_id_fkey"),
        "{err:?}"
    );

    let err: StoreError = client
        .execute(
            "INSERT INTO run_specs (run_id, run_key, digest, document)
             VALUES (gen_random_uuid(), 'k', 'not-a-digest', '{}')",
            &[],
        )
        .await
        .unwrap_err()
        .into();
    assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
}

#[tokio::test]
async fn tx_commits_rolls_back_and_retries_serialization_failures() {
    let store = migrated().await;

    // Commit.
    let slots: i32 = store
        .tx(|tx| {
            Box::pin(async move {
                tx.execute(
                    "INSERT INTO workers (worker_id, slots) VALUES ('w1', 4)",
                    &[],
                )
                .await?;
                Ok(tx.query_one("SELECT slots FROM workers", &[]).await?.get(0))
            })
        })
        .await
        .unwrap();
    assert_eq!(slots, 4);

    // Roll back on error: the insert before the failure is not kept.
    let err = store
        .tx(|tx| {
            Box::pin(async move {
                tx.execute(
                    "INSERT INTO workers (worker_id, slots) VALUES ('w2', 1)",
                    &[],
                )
                .await?;
                tx.execute(
                    "INSERT INTO workers (worker_id, slots) VALUES ('w1', 1)",
                    &[],
                )
                .await?;
                Ok(())
            })
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
    let client = store.client().await.unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM workers", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 1);

    // A serialization failure reruns the closure.
    let raise = "DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '40001'; END $$";
    let calls = AtomicU32::new(0);
    let value = store
        .tx(|tx| {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if call == 0 {
                    tx.batch_execute(raise).await?;
                }
                Ok(call)
            })
        })
        .await
        .unwrap();
    assert_eq!((value, calls.load(Ordering::SeqCst)), (1, 2));

    // ... a bounded number of times.
    let calls = AtomicU32::new(0);
    let err = store
        .tx(|tx| {
            calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                tx.batch_execute(
                    "DO $$ BEGIN RAISE EXCEPTION 'dl' USING ERRCODE = '40P01'; END $$",
                )
                .await?;
                Ok(())
            })
        })
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), MAX_TX_ATTEMPTS);
}

#[tokio::test]
async fn an_unreachable_database_is_unavailable() {
    // A port that nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = Store::connect(&format!("postgres://postgres@127.0.0.1:{port}/x"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    let err = Store::connect("not a url").await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidUrl(_)), "{err:?}");
}

/// planned_trials.run_id is the submit's to get right (migration 0026): it inserts the run's
/// spec, then copies its trials in the same transaction. The database no longer captures
/// the inserted rows for a check (0005's statement-level trigger wrote ~930 MB of temporary
/// files at 1,000,000 trials): no trigger on planned_trials keeps a transition table, and
/// only the append-only guards are left.
#[tokio::test]
async fn planned_trials_are_stored_without_capturing_the_rows() {
    let store = migrated().await;
    let client = store.client().await.unwrap();
    let triggers: Vec<String> = client
        .query(
            "SELECT tgname::text FROM pg_trigger
             WHERE tgrelid = 'planned_trials'::regclass AND NOT tgisinternal ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        triggers,
        ["planned_trials_append_only", "planned_trials_no_truncate"]
    );
    let capturing: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_trigger
             WHERE tgrelid = 'planned_trials'::regclass AND tgnewtable IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(capturing, 0);
    insert_spec(&store, "known").await.unwrap();
    client
        .execute(
            "INSERT INTO planned_trials (trial_id, run_id, ordinal, key, task_id, agent,
                                         repetition, document)
             SELECT gen_random_uuid(), run_id, 0, 'k', 't', 'a', 0, '{}' FROM run_specs",
            &[],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn transitions_live_in_their_attempt_and_attempts_are_never_deleted() {
    let store = migrated().await;
    let client = store.client().await.unwrap();
    // Since 0028 a transition is part of its attempt's row: `transitions` is a read-only
    // view, so no transition can be stored without (or apart from) its attempt.
    let kind: String = client
        .query_one(
            "SELECT c.relkind::text FROM pg_class c WHERE c.oid = 'transitions'::regclass",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kind, "v", "transitions is a view");
    client
        .execute(
            "INSERT INTO transitions (attempt_id, seq, state, at) \
             VALUES (gen_random_uuid(), 1, 'pending', now())",
            &[],
        )
        .await
        .unwrap_err();
    for sql in ["DELETE FROM attempts", "TRUNCATE attempts CASCADE"] {
        let err = StoreError::from(client.execute(sql, &[]).await.unwrap_err());
        assert!(
            matches!(err, StoreError::Immutable { .. }),
            "{sql}: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_record_needs_its_attempt() {
    let store = migrated().await;
    let client = store.client().await.unwrap();
    // The foreign key (0016 checked it per batch in a trigger with the same error; 0019 put
    // the key back): the batch stores nothing.
    let err = StoreError::from(
        client
            .execute(
                "INSERT INTO submissions (attempt_id, digest, record) \
                 VALUES (gen_random_uuid(), 'sha256:' || repeat('0', 64), '{}'), \
                        (gen_random_uuid(), 'sha256:' || repeat('1', 64), '{}')",
                &[],
            )
            .await
            .unwrap_err(),
    );
    match &err {
        StoreError::ForeignKey { constraint, .. } => {
            assert_eq!(constraint, "submissions_attempt_id_fkey")
        }
        other => panic!("expected ForeignKey, got {other:?}"),
    }
    let n: i64 = client
        .query_one("SELECT count(*) FROM submissions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

/// The references of an attempt (its work item, its worker) and of a record (its attempt) are
/// checked once per statement (migration 0029) with the foreign keys' own error, and the
/// referenced rows can neither go nor change key.
#[tokio::test]
async fn an_attempt_needs_its_work_item_and_worker_and_they_stay() {
    use akbench_coordinator::scheduler::test_support::{insert_items_by_hand, seed_run};
    use akbench_coordinator::scheduler::Caps;

    let store = migrated().await;
    let run = seed_run(&store, 1, "a", &Caps::default())
        .await
        .expect("seeds");
    let trial = run.trial_ids[0];
    let client = store.client().await.unwrap();
    insert_items_by_hand(&client, run.run_id).await.unwrap();
    client
        .execute(
            "INSERT INTO workers (worker_id, slots, labels, version) VALUES ('w', 1, '{}', 't')",
            &[],
        )
        .await
        .unwrap();
    let insert = "INSERT INTO attempts (attempt_id, trial_id, number, kind, worker_id, epoch) \
                  VALUES (gen_random_uuid(), $1, $2, 'execute', $3, 1)";
    let refused = |trial: uuid::Uuid, number: i32, worker: &'static str| {
        let client = &client;
        async move {
            match StoreError::from(
                client
                    .execute(insert, &[&trial, &number, &worker])
                    .await
                    .unwrap_err(),
            ) {
                StoreError::ForeignKey { constraint, .. } => constraint,
                other => panic!("expected ForeignKey, got {other:?}"),
            }
        }
    };
    assert_eq!(
        refused(uuid::Uuid::now_v7(), 1, "w").await,
        "attempts_trial_id_fkey"
    );
    assert_eq!(refused(trial, 1, "nobody").await, "attempts_worker_id_fkey");
    let stored: i64 = client
        .query_one("SELECT count(*) FROM attempts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "a refused statement stores nothing");
    client
        .execute(insert, &[&trial, &1i32, &"w"])
        .await
        .unwrap();

    for (sql, what) in [
        ("DELETE FROM work_items", "a work item"),
        ("DELETE FROM workers", "a worker"),
        ("UPDATE workers SET worker_id = 'w2'", "a worker's id"),
        (
            "UPDATE attempts SET worker_id = NULL",
            "an attempt's worker",
        ),
        (
            "UPDATE attempts SET attempt_id = gen_random_uuid()",
            "an attempt's id",
        ),
    ] {
        let err = StoreError::from(client.execute(sql, &[]).await.unwrap_err());
        assert!(
            matches!(err, StoreError::Immutable { .. }),
            "{what} must not go or change key: {err:?}"
        );
        // The message says why, not that operational rows are "evidence".
        let text = err.to_string();
        assert!(
            text.contains("kept for good") && !text.contains("evidence"),
            "{what}: {text}"
        );
    }
}

/// A planned trial stored before migration 0031, when `document` was `json`, reads back the
/// same text after it, and the readers' casts look inside it as before: the migration changes
/// the column's type, never a document.
#[tokio::test]
async fn planned_trials_stored_before_their_documents_became_text_keep_them() {
    let store = Store::connect(&test_support::fresh_database().await)
        .await
        .unwrap();
    let client = store.client().await.unwrap();
    let (before, after): (Vec<&Migration>, Vec<&Migration>) =
        MIGRATIONS.iter().partition(|m| m.version < 31);
    for m in &before {
        client.batch_execute(m.sql).await.unwrap();
    }
    insert_spec(&store, "before-0031").await.unwrap();
    // As a `json` column keeps it: the text as given, spaces and key order included.
    let doc = r#"{"key": "k", "attempt": {"infrastructure_retries": 2}}"#;
    client
        .execute(
            "INSERT INTO planned_trials (trial_id, run_id, ordinal, key, task_id, agent,
                                         repetition, document)
             SELECT gen_random_uuid(), run_id, 0, 'k', 't', 'a', 0, $1::text::json
             FROM run_specs",
            &[&doc],
        )
        .await
        .unwrap();
    let type_of = "SELECT format_type(atttypid, atttypmod) FROM pg_attribute
                   WHERE attrelid = 'planned_trials'::regclass AND attname = 'document'";
    let ty: String = client.query_one(type_of, &[]).await.unwrap().get(0);
    assert_eq!(ty, "json");
    for m in &after {
        client.batch_execute(m.sql).await.unwrap();
    }
    let ty: String = client.query_one(type_of, &[]).await.unwrap().get(0);
    assert_eq!(ty, "text");
    let row = client
        .query_one(
            "SELECT document, (document::json -> 'attempt' ->> 'infrastructure_retries')::int
             FROM planned_trials",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), doc);
    assert_eq!(row.get::<_, i32>(1), 2);
}
