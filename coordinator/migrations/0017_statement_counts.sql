-- 0017_statement_counts: fewer trigger calls and lookups per dispatch transaction.
--
-- - Work item counts (migration 0015) move with one statement-level trigger per UPDATE
--   instead of a row-level one per item entering or leaving done / cancelled: a report batch
--   settling 8 trials ran 8 PL/pgSQL calls, each inserting one delta; now one call inserts
--   one delta per (run, agent, state, bucket). Rows that leave and enter the same key cancel
--   out (the sum is 0 and no delta is written), so the totals are those of 0015's trigger.
-- - The bucket of a done trial whose record arrives later (migration 0005) is set in one
--   UPDATE per stored batch, not one per record (0006's loop): 8 UPDATE statements per batch
--   became one, and with the statement-level count trigger above each of them would fire
--   it. 0006 looped because a plan made while `attempts` was small scanned every attempt;
--   records are stored only in scheduler transactions, whose plans are keyed lookups
--   (`sql/scheduler/keyed_plans.sql`, sequential scans priced out), so that plan cannot be
--   chosen any more.
-- - Leases lose their two foreign keys (16 referential checks per claim of 8): a lease is
--   created only with its attempt, in the same statement, for the attempt's own worker
--   (`sql/scheduler/claim_create.sql`), attempts are never deleted (migration 0008), and
--   `attempts.worker_id` keeps its foreign key to `workers`.

DROP TRIGGER work_items_run_counts_update ON work_items;
DROP FUNCTION akbench_run_counts_item_moved();

CREATE FUNCTION akbench_run_counts_items_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT d.run_id, d.agent, 'items', d.state, d.bucket, sum(d.n)
    FROM (
        SELECT o.run_id, o.agent, o.state, o.bucket, -1::bigint AS n
        FROM old_rows o WHERE o.state IN ('done', 'cancelled')
        UNION ALL
        SELECT w.run_id, w.agent, w.state, w.bucket, 1::bigint
        FROM new_rows w WHERE w.state IN ('done', 'cancelled')
    ) d
    GROUP BY d.run_id, d.agent, d.state, d.bucket
    HAVING sum(d.n) <> 0;
    RETURN NULL;
END
$$;

CREATE TRIGGER work_items_run_counts_update AFTER UPDATE ON work_items
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_run_counts_items_updated();

CREATE OR REPLACE FUNCTION akbench_submissions_bucket() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE work_items w
    SET bucket = akbench_bucket(a.terminal_state, n.ok)
    FROM inserted n
    JOIN attempts a ON a.attempt_id = n.attempt_id
    WHERE w.trial_id = a.trial_id AND w.state = 'done' AND w.attempts_used = a.number
      AND a.finished_at IS NOT NULL
      AND w.bucket IS DISTINCT FROM akbench_bucket(a.terminal_state, n.ok);
    RETURN NULL;
END
$$;

ALTER TABLE leases
    DROP CONSTRAINT leases_attempt_id_fkey,
    DROP CONSTRAINT leases_worker_id_fkey;
