-- 0016_dispatch_triggers: fewer trigger calls, statements and lookups per dispatch
-- transaction (a report batch settles about 8 trials and stores their 8 records, then claims
-- about 8 items), measured with `AKBENCH_BENCH_STATS=1 cargo bench -p akbench-coordinator
-- --bench dispatch` (docs/PERFORMANCE.md, "Coordinator dispatch"):
--
-- - Work item counts (migration 0015) move with one statement-level trigger per UPDATE
--   instead of a row-level one per item entering or leaving done / cancelled (8 PL/pgSQL
--   calls per batch, each inserting one delta). Rows that leave and enter the same key cancel
--   out (their sum is 0 and no delta is written), so the totals are those of 0015's trigger.
-- - A stored batch of records runs one trigger instead of two (0005's bucket, 0015's spend)
--   and the row-level foreign-key check of each record:
--   - the bucket of a done trial whose record arrives later is set by one UPDATE, run only
--     when such a trial exists (on the dispatch path the records come before the settle, so
--     it never runs), instead of one UPDATE per record (0006's loop). 0006 looped because a
--     plan made while `attempts` was small scanned every attempt; records are stored only in
--     scheduler transactions, whose plans are keyed lookups (`sql/scheduler/keyed_plans.sql`:
--     sequential scans priced out), so that plan cannot be chosen any more;
--   - the spend deltas in one statement instead of a loop running three queries per record.
--     Same deltas per (run, agent) of the statement: `n` trials of the statement that had no
--     accepted record outside it; `n_cost` trials with a record reporting a cost that had no
--     such record outside it; the sums of the statement's records (NULL where none reported
--     the value).
-- - A record's attempt is checked once per stored batch, by the trigger above, instead of
--   once per record by the row-level RI trigger, as 0008 did for transitions: the same
--   SQLSTATE 23503 naming the same constraint, and the same guarantee, because records are
--   only inserted (migration 0015 refuses UPDATE, DELETE and TRUNCATE) and attempts are never
--   deleted (migration 0008).
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

DROP TRIGGER submissions_bucket ON submissions;
DROP TRIGGER submissions_run_counts ON submissions;
DROP FUNCTION akbench_submissions_bucket();
DROP FUNCTION akbench_run_counts_spend();

CREATE FUNCTION akbench_submissions_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing uuid;
BEGIN
    SELECT n.attempt_id INTO missing
    FROM inserted n
    WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.attempt_id = n.attempt_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "submissions" violates foreign key constraint "submissions_attempt_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'submissions_attempt_id_fkey',
                  TABLE = 'submissions', SCHEMA = TG_TABLE_SCHEMA,
                  DETAIL = format('Key (attempt_id)=(%s) is not present in table "attempts".', missing);
    END IF;
    IF EXISTS (
        SELECT 1
        FROM inserted n
        JOIN attempts a ON a.attempt_id = n.attempt_id
        JOIN work_items w ON w.trial_id = a.trial_id
        WHERE w.state = 'done' AND w.attempts_used = a.number AND a.finished_at IS NOT NULL
          AND w.bucket IS DISTINCT FROM akbench_bucket(a.terminal_state, n.ok)
    ) THEN
        UPDATE work_items w
        SET bucket = akbench_bucket(a.terminal_state, n.ok)
        FROM inserted n
        JOIN attempts a ON a.attempt_id = n.attempt_id
        WHERE w.trial_id = a.trial_id AND w.state = 'done' AND w.attempts_used = a.number
          AND a.finished_at IS NOT NULL
          AND w.bucket IS DISTINCT FROM akbench_bucket(a.terminal_state, n.ok);
    END IF;
    INSERT INTO run_counts (run_id, agent, kind, n, n_cost, input_tokens, cached_input_tokens,
                            output_tokens, cost_usd)
    SELECT t.run_id, t.agent, 'spend', sum(t.first), sum(t.first_cost), sum(t.i), sum(t.ci),
           sum(t.o), sum(t.c)
    FROM (
        SELECT w.run_id, w.agent,
               CASE WHEN EXISTS (
                        SELECT 1 FROM attempts o
                        JOIN submissions os ON os.attempt_id = o.attempt_id
                        WHERE o.trial_id = a.trial_id
                          AND NOT EXISTS (SELECT 1 FROM inserted x
                                          WHERE x.attempt_id = o.attempt_id))
                    THEN 0::bigint ELSE 1::bigint END AS first,
               CASE WHEN bool_or(s.cost_usd IS NOT NULL) AND NOT EXISTS (
                        SELECT 1 FROM attempts o
                        JOIN submissions os ON os.attempt_id = o.attempt_id
                        WHERE o.trial_id = a.trial_id AND os.cost_usd IS NOT NULL
                          AND NOT EXISTS (SELECT 1 FROM inserted x
                                          WHERE x.attempt_id = o.attempt_id))
                    THEN 1::bigint ELSE 0::bigint END AS first_cost,
               sum(s.input_tokens) AS i, sum(s.cached_input_tokens) AS ci,
               sum(s.output_tokens) AS o, sum(s.cost_usd::numeric) AS c
        FROM inserted s
        JOIN attempts a ON a.attempt_id = s.attempt_id
        JOIN work_items w ON w.trial_id = a.trial_id
        GROUP BY w.run_id, w.agent, a.trial_id
    ) t
    GROUP BY t.run_id, t.agent;
    RETURN NULL;
END
$$;

CREATE TRIGGER submissions_inserted AFTER INSERT ON submissions
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_submissions_inserted();

ALTER TABLE leases
    DROP CONSTRAINT leases_attempt_id_fkey,
    DROP CONSTRAINT leases_worker_id_fkey;

ALTER TABLE submissions DROP CONSTRAINT submissions_attempt_id_fkey;
