-- 0006_perf_bucket_lookups: the trigger run when records are stored looks their attempts and
-- work items up by key.
--
-- 0005's `akbench_submissions_bucket` joined the inserted records to `attempts` and
-- `work_items` in one statement. PL/pgSQL plans such a statement once per connection (it
-- has no parameters), with the statistics of that moment: planned while `attempts` was
-- small, it scanned every attempt for each batch of stored records for the life of the
-- connection (the dispatch benchmark showed 30 ms per batch of 8 records after 8,000
-- attempts, the largest cost of storing reports). One statement per inserted record,
-- keyed by the attempt id, is planned as primary-key lookups whatever the statistics say.
-- Same effect as before: a done trial whose last attempt is the record's takes its bucket.
CREATE OR REPLACE FUNCTION akbench_submissions_bucket() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    n record;
BEGIN
    FOR n IN SELECT attempt_id, ok FROM inserted LOOP
        UPDATE work_items w
        SET bucket = akbench_bucket(a.terminal_state, n.ok)
        FROM attempts a
        WHERE a.attempt_id = n.attempt_id
          AND w.trial_id = a.trial_id AND w.state = 'done' AND w.attempts_used = a.number
          AND a.finished_at IS NOT NULL
          AND w.bucket IS DISTINCT FROM akbench_bucket(a.terminal_state, n.ok);
    END LOOP;
    RETURN NULL;
END
$$;
