-- 0003_control: what the control plane (evidence submission, status projection, run listing)
-- needs beyond 0001. Numbered 3 because 0002 belongs to the scheduler.

-- One row per run whose plan is stored: the small facts every response names, so that
-- listing runs and answering status never detoast a spec or plan document. Written in the
-- same transaction as the evidence and, like it, never changed.
CREATE TABLE run_catalog (
    run_id       uuid        PRIMARY KEY REFERENCES run_specs (run_id),
    -- Submission order: ListRuns pages newest first by it.
    seq          bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    run_key      text        NOT NULL UNIQUE,
    experiment   text        NOT NULL,
    trial_count  bigint      NOT NULL CHECK (trial_count >= 0),
    -- Planned trials by agent label (the plan summary's `by_agent`).
    by_agent     jsonb       NOT NULL,
    spec_digest  text        NOT NULL,
    plan_digest  text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER run_catalog_append_only BEFORE UPDATE OR DELETE ON run_catalog
    FOR EACH ROW EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER run_catalog_no_truncate BEFORE TRUNCATE ON run_catalog
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();

-- Whether an accepted record says the task was solved, computed once when the record is
-- stored so that status never parses records. Workers upload attempt records (`grade.ok`);
-- a trial record (`outcome.ok`) is read too.
ALTER TABLE submissions
    ADD COLUMN ok boolean GENERATED ALWAYS AS (
        COALESCE((record -> 'outcome' ->> 'ok')::boolean, (record -> 'grade' ->> 'ok')::boolean)
    ) STORED;

-- Status: live attempts by phase (a handful of rows per worker slot).
CREATE INDEX attempts_live ON attempts (trial_id) INCLUDE (state) WHERE finished_at IS NULL;

-- Status: throughput (trials finished in the last minutes).
CREATE INDEX work_items_done_at ON work_items (run_id, updated_at) WHERE state = 'done';

-- Status: the agent of each planned trial without reading its document.
CREATE INDEX planned_trials_run_agent ON planned_trials (run_id) INCLUDE (trial_id, agent);

-- Status: retries (attempts beyond the first of their trial; few).
CREATE INDEX attempts_retries ON attempts (trial_id) WHERE number > 1;
