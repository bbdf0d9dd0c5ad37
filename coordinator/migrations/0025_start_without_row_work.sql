-- 0025_start_without_row_work: StartRun's INSERT ... SELECT does no per-row work beyond the
-- insert itself.
--
-- StartRun creates every execute work item of a run in one INSERT ... SELECT from its
-- planned trials (`sql/scheduler/start_items.sql`). The foreign keys work_items.trial_id ->
-- planned_trials and work_items.run_id -> runs were checked once per inserted row by the
-- row-level RI triggers: per trial two lookups through SPI, each locking the referenced row
-- (FOR KEY SHARE). At 1,000,000
-- trials (EXPLAIN ANALYZE on a private cluster, load 12-13, docs/PERFORMANCE.md "A million
-- trials") the statement took 92 s with them and the document parsed (below), 41 s with the
-- statement-level check and the column. As 0005 did for planned_trials and 0008 for transitions, one
-- statement-level trigger now checks all inserted rows with one anti-join per key, raising
-- the same SQLSTATE 23503 naming the same constraint. It is the same guarantee: planned
-- trials are never updated, deleted or truncated (migration 0001), runs are never deleted or
-- truncated and their run_id never changes (refused below, SQLSTATE AKB01), and a work
-- item's trial_id and run_id never change (refused below).
--
-- planned_trials.retries is the trial's `attempt.infrastructure_retries` (capped at the int4
-- maximum), written by the submit beside the document, so that StartRun reads the retry
-- budget from a column instead of parsing every trial's ~850-byte json document (5.5 s at
-- 1,000,000 trials, same cluster and load). NULL on rows stored before this
-- migration: StartRun then parses the document as before.
ALTER TABLE planned_trials ADD COLUMN retries integer CHECK (retries >= 0);

ALTER TABLE work_items DROP CONSTRAINT work_items_trial_id_fkey;
ALTER TABLE work_items DROP CONSTRAINT work_items_run_id_fkey;

CREATE FUNCTION akbench_work_items_refs_exist() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing uuid;
BEGIN
    SELECT n.run_id INTO missing
    FROM (SELECT DISTINCT run_id FROM inserted) n
    WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = n.run_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "work_items" violates foreign key constraint "work_items_run_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'work_items_run_id_fkey',
                  TABLE = 'work_items', SCHEMA = TG_TABLE_SCHEMA,
                  DETAIL = format('Key (run_id)=(%s) is not present in table "runs".', missing);
    END IF;
    SELECT n.trial_id INTO missing
    FROM inserted n
    WHERE NOT EXISTS (SELECT 1 FROM planned_trials p WHERE p.trial_id = n.trial_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "work_items" violates foreign key constraint "work_items_trial_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'work_items_trial_id_fkey',
                  TABLE = 'work_items', SCHEMA = TG_TABLE_SCHEMA,
                  DETAIL = format('Key (trial_id)=(%s) is not present in table "planned_trials".', missing);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER work_items_refs_exist AFTER INSERT ON work_items
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_work_items_refs_exist();

CREATE FUNCTION akbench_refs_fixed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'UPDATE of % refused: it names its row for good (work items and attempts refer to it)',
        TG_ARGV[0]
        USING ERRCODE = 'AKB01', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
END
$$;

CREATE TRIGGER work_items_refs_fixed BEFORE UPDATE OF trial_id, run_id ON work_items
    FOR EACH ROW
    WHEN (NEW.trial_id IS DISTINCT FROM OLD.trial_id OR NEW.run_id IS DISTINCT FROM OLD.run_id)
    EXECUTE FUNCTION akbench_refs_fixed('work_items.trial_id or run_id');
CREATE TRIGGER runs_run_id_fixed BEFORE UPDATE OF run_id ON runs
    FOR EACH ROW WHEN (NEW.run_id IS DISTINCT FROM OLD.run_id)
    EXECUTE FUNCTION akbench_refs_fixed('runs.run_id');
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER runs_no_truncate BEFORE TRUNCATE ON runs
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();
