-- 0005_status_buckets: status reads one narrow, indexed source; planned trials store cheaper.
--
-- - work_items.bucket: core's accounting bucket of a `done` trial (`Bucket::as_str`), from
--   the terminal state of its last attempt (number = attempts_used) and the `ok` of that
--   attempt's accepted record. NULL while the trial is not done and for a `completed` attempt
--   whose record (or its `ok`) has not arrived: such a trial is not counted yet. Kept by two
--   triggers, whoever writes: when an item becomes done (the scheduler's settle, after the
--   attempt is finished) and when records are stored (records may arrive before or after the
--   finish). Status groups `work_items_outcomes` instead of joining attempts, submissions and
--   planned trials per finished trial.
-- - work_items.agent is the planned trial's agent label; an insert that leaves it empty
--   takes it from planned_trials (the scheduler always names it).
-- - planned_trials.document becomes `json`: nothing queries inside it (it is read back whole,
--   as text or as a worker's fallback document), and `json` stores the canonical text after a
--   syntax check instead of building jsonb, the larger part of the cost of storing a plan.
-- - Indexes of planned_trials that no query needs are dropped: planned_trials_run_agent
--   (only the old outcome aggregate read it) and the unique index on `key` (trial keys start
--   with the run key, itself unique in run_catalog, and `RunPlan::check` refuses duplicate
--   keys within a plan; lookups by key are within a run, through (run_id, ordinal)).
-- - The foreign key planned_trials.run_id -> run_specs is checked once per statement (one
--   anti-join over the inserted rows) instead of once per row by the row-level RI trigger, a
--   quarter of the cost of storing a plan. It is the same guarantee: run_specs rows can be
--   neither deleted nor changed (append-only), nor can planned trials, so only inserts need
--   the check; a violation raises SQLSTATE 23503 naming the same constraint.

-- Core's `Bucket::of` for a terminal state and a record's `ok` (NULL: not counted yet).
CREATE FUNCTION akbench_bucket(terminal text, ok boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE terminal
        WHEN 'completed' THEN CASE ok WHEN true THEN 'succeeded' WHEN false THEN 'failed' END
        WHEN 'failed' THEN 'agent_failed'
        WHEN 'cancelled' THEN 'cancelled'
        WHEN 'timeout' THEN 'timed_out'
        WHEN 'invalid_configuration' THEN 'invalid'
        WHEN 'not_graded' THEN 'not_graded'
        WHEN 'infrastructure_error' THEN 'infrastructure_error'
        WHEN 'evaluation_error' THEN 'evaluation_error'
    END
$$;

ALTER TABLE work_items ADD COLUMN bucket text CHECK (bucket IN (
    'succeeded', 'failed', 'agent_failed', 'cancelled', 'timed_out', 'invalid', 'not_graded',
    'infrastructure_error', 'evaluation_error'));

UPDATE work_items w
SET bucket = akbench_bucket(a.terminal_state, s.ok)
FROM attempts a
LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.state = 'done' AND a.trial_id = w.trial_id AND a.number = w.attempts_used
  AND a.finished_at IS NOT NULL;

-- The bucket of a work item that becomes done (or is re-decided), from its last attempt.
CREATE FUNCTION akbench_work_item_bucket() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'done' THEN
        NEW.bucket := (
            SELECT akbench_bucket(a.terminal_state, s.ok)
            FROM attempts a
            LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
            WHERE a.trial_id = NEW.trial_id AND a.number = NEW.attempts_used
              AND a.finished_at IS NOT NULL);
    ELSE
        NEW.bucket := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER work_items_bucket BEFORE UPDATE ON work_items
    FOR EACH ROW
    WHEN ((NEW.state = 'done' AND (OLD.state <> 'done' OR NEW.attempts_used <> OLD.attempts_used))
          OR (NEW.state <> 'done' AND NEW.bucket IS NOT NULL))
    EXECUTE FUNCTION akbench_work_item_bucket();

-- Records just stored: a done trial whose last attempt is theirs takes its bucket (a
-- `completed` attempt finished before its record arrived is counted from then on).
CREATE FUNCTION akbench_submissions_bucket() RETURNS trigger
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

CREATE TRIGGER submissions_bucket AFTER INSERT ON submissions
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_submissions_bucket();

-- Work items inserted without their agent label take the planned trial's.
CREATE FUNCTION akbench_work_item_agent() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.agent := (SELECT p.agent FROM planned_trials p WHERE p.trial_id = NEW.trial_id);
    RETURN NEW;
END
$$;

CREATE TRIGGER work_items_agent BEFORE INSERT ON work_items
    FOR EACH ROW WHEN (NEW.agent = '') EXECUTE FUNCTION akbench_work_item_agent();

UPDATE work_items w SET agent = p.agent
FROM planned_trials p
WHERE w.agent = '' AND p.trial_id = w.trial_id;

-- Status: finished trials by agent and bucket (an index-only scan).
CREATE INDEX work_items_outcomes ON work_items (run_id, agent, bucket) WHERE state = 'done';

DROP INDEX planned_trials_run_agent;
ALTER TABLE planned_trials DROP CONSTRAINT planned_trials_key_key;
ALTER TABLE planned_trials ALTER COLUMN document TYPE json USING document::json;

ALTER TABLE planned_trials DROP CONSTRAINT planned_trials_run_id_fkey;

CREATE FUNCTION akbench_planned_trials_run_exists() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing uuid;
BEGIN
    SELECT n.run_id INTO missing
    FROM (SELECT DISTINCT run_id FROM inserted) n
    WHERE NOT EXISTS (SELECT 1 FROM run_specs s WHERE s.run_id = n.run_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "planned_trials" violates foreign key constraint "planned_trials_run_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'planned_trials_run_id_fkey',
                  TABLE = 'planned_trials', SCHEMA = TG_TABLE_SCHEMA,
                  DETAIL = format('Key (run_id)=(%s) is not present in table "run_specs".', missing);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER planned_trials_run_exists AFTER INSERT ON planned_trials
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_planned_trials_run_exists();
