-- 0029_attempt_refs_by_statement: the claim and the records' insert check their references
-- once per statement, not once per row.
--
-- The claim (`sql/scheduler/claim_create.sql`) inserts one attempt per leased item and the
-- records' insert (`sql/scheduler/insert_submissions.sql`) one submission per record. The
-- foreign keys attempts.trial_id -> work_items, attempts.worker_id -> workers and
-- submissions.attempt_id -> attempts were checked by the row-level RI triggers: per row one
-- lookup through SPI each, locking the referenced row FOR KEY SHARE (a worker's row, locked
-- by several report transactions at once, became a MultiXact). On the dispatch benchmark
-- (EXPLAIN ANALYZE, 32 attempts a statement) they took 0.55 + 0.42 ms of a 1.7 ms claim and
-- 0.6-0.9 ms of the records' insert: about a fifth of PostgreSQL's time per attempt. As 0025
-- did for work_items, one statement-level trigger per table now checks all inserted rows with
-- one anti-join per key, raising the same SQLSTATE 23503 naming the same constraint.
--
-- It is the same guarantee, because the referenced rows can neither go nor change key:
-- work items are never deleted or truncated (refused below, SQLSTATE AKB01) and their
-- trial_id never changes (0025); workers are never deleted or truncated and their worker_id
-- never changes (refused below); attempts are never deleted or truncated (0001) and their
-- attempt_id, trial_id and worker_id never change (refused below); submissions are
-- append-only (0001).
ALTER TABLE attempts DROP CONSTRAINT attempts_trial_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT attempts_worker_id_fkey;
ALTER TABLE submissions DROP CONSTRAINT submissions_attempt_id_fkey;

CREATE FUNCTION akbench_attempts_refs_exist() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing text;
BEGIN
    SELECT n.trial_id::text INTO missing
    FROM inserted n
    WHERE NOT EXISTS (SELECT 1 FROM work_items w WHERE w.trial_id = n.trial_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "attempts" violates foreign key constraint "attempts_trial_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'attempts_trial_id_fkey',
                  TABLE = 'attempts', SCHEMA = TG_TABLE_SCHEMA,
                  DETAIL = format('Key (trial_id)=(%s) is not present in table "work_items".', missing);
    END IF;
    SELECT n.worker_id INTO missing
    FROM (SELECT DISTINCT worker_id FROM inserted WHERE worker_id IS NOT NULL) n
    WHERE NOT EXISTS (SELECT 1 FROM workers w WHERE w.worker_id = n.worker_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "attempts" violates foreign key constraint "attempts_worker_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'attempts_worker_id_fkey',
                  TABLE = 'attempts', SCHEMA = TG_TABLE_SCHEMA,
                  DETAIL = format('Key (worker_id)=(%s) is not present in table "workers".', missing);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER attempts_refs_exist AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_attempts_refs_exist();

CREATE FUNCTION akbench_submissions_attempt_exists() RETURNS trigger
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
    RETURN NULL;
END
$$;

CREATE TRIGGER submissions_attempt_exists AFTER INSERT ON submissions
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_submissions_attempt_exists();

-- The referenced rows stay: no DELETE or TRUNCATE of work items or workers, no new key.
CREATE FUNCTION akbench_refuse_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% of % refused: attempts refer to its rows for good', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'AKB01', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
END
$$;

CREATE TRIGGER work_items_no_delete BEFORE DELETE ON work_items
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_delete();
CREATE TRIGGER work_items_no_truncate BEFORE TRUNCATE ON work_items
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_delete();
CREATE TRIGGER workers_no_delete BEFORE DELETE ON workers
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_delete();
CREATE TRIGGER workers_no_truncate BEFORE TRUNCATE ON workers
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_delete();
CREATE TRIGGER workers_worker_id_fixed BEFORE UPDATE OF worker_id ON workers
    FOR EACH ROW WHEN (NEW.worker_id IS DISTINCT FROM OLD.worker_id)
    EXECUTE FUNCTION akbench_refs_fixed('workers.worker_id');
CREATE TRIGGER attempts_refs_fixed BEFORE UPDATE OF attempt_id, trial_id, worker_id ON attempts
    FOR EACH ROW
    WHEN (NEW.attempt_id IS DISTINCT FROM OLD.attempt_id
          OR NEW.trial_id IS DISTINCT FROM OLD.trial_id
          OR NEW.worker_id IS DISTINCT FROM OLD.worker_id)
    EXECUTE FUNCTION akbench_refs_fixed('attempts.attempt_id, trial_id or worker_id');
