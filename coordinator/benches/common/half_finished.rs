//! A run half finished straight in the database, for the benches that time status on a big
//! run (`control`, `status`): work items for every planned trial of the run (the catalog's
//! `run_key`), half of them done with one attempt and record each (a quarter solved, their
//! counters as the scheduler writes them), 100 live attempts on leased items.

use akbench_coordinator::scheduler::{store_records, NewRecord};
use akbench_coordinator::store::Store;

/// Half the trials done (one attempt and record each; a quarter solved), 100 live attempts.
pub async fn half_finished(url: &str, run: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "BEGIN;
             WITH created AS (
               INSERT INTO work_items (trial_id, run_id, ordinal, agent)
               SELECT p.trial_id, p.run_id, p.ordinal, p.agent FROM planned_trials p
               JOIN run_catalog c ON c.run_id = p.run_id WHERE c.run_key = '{run}'
               RETURNING run_id, agent)
             INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
               SELECT run_id, agent, 'items', 'total', NULL, count(*) FROM created
               GROUP BY run_id, agent;
             UPDATE runs SET state = 'running', started_at = now() - interval '10 minutes'
               WHERE run_id = (SELECT run_id FROM run_catalog WHERE run_key = '{run}');
             CREATE TEMP TABLE this_run AS SELECT run_id FROM run_catalog WHERE run_key = '{run}';
             CREATE TEMP TABLE picked AS
               SELECT trial_id, ordinal, gen_random_uuid() AS attempt_id FROM work_items
               WHERE ordinal % 2 = 0 AND run_id = (SELECT run_id FROM this_run);
             ANALYZE picked;
             INSERT INTO attempts (attempt_id, trial_id, number, kind, state, epoch, finished_at, terminal_state)
               SELECT attempt_id, trial_id, 1, 'execute', 'completed', 1, now(), 'completed' FROM picked;
             COMMIT;"
        ))
        .await
        .unwrap();
    // The records through the product's statement (spend counted as for a real report).
    let records: Vec<NewRecord> = client
        .query(
            "SELECT attempt_id, 'sha256:' || repeat('0', 64) AS digest,
                    jsonb_build_object('outcome', jsonb_build_object(
                        'state', 'completed', 'ok', ordinal % 4 = 0))::text AS record
             FROM picked",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get("attempt_id"), r.get("digest"), r.get("record")))
        .collect();
    let store = Store::connect(url).await.unwrap();
    store_records(&store.client().await.unwrap(), &records)
        .await
        .unwrap();
    client
        .batch_execute(
            "BEGIN;
             WITH done AS (
               -- One join, not a subquery per item over the unindexed `picked` (that was
               -- quadratic: over 10 minutes at 1,000,000 trials).
               UPDATE work_items w SET state = 'done', attempts_used = 1,
                      -- The picked attempts are `completed`: core's Bucket::settled.
                      bucket = CASE s.ok WHEN true THEN 'succeeded'
                                         WHEN false THEN 'failed' END,
                      updated_at = now() - (w.ordinal % 600) * interval '1 second'
                 FROM picked p
                 LEFT JOIN submissions s ON s.attempt_id = p.attempt_id
                 WHERE w.trial_id = p.trial_id
                 RETURNING w.run_id, w.agent, w.bucket)
             INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
               SELECT run_id, agent, 'items', 'done', bucket, count(*) FROM done
               GROUP BY run_id, agent, bucket;
             INSERT INTO attempts (attempt_id, trial_id, number, kind, state, epoch)
               SELECT gen_random_uuid(), trial_id, 1, 'execute', 'executing', 2 FROM work_items
               WHERE ordinal % 2 = 1 AND ordinal < 200 AND run_id = (SELECT run_id FROM this_run);
             UPDATE work_items SET state = 'leased'
               WHERE ordinal % 2 = 1 AND ordinal < 200 AND run_id = (SELECT run_id FROM this_run);
             COMMIT;",
        )
        .await
        .unwrap();
    client.batch_execute("VACUUM ANALYZE").await.unwrap();
}
