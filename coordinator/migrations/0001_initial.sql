-- 0001_initial: evidence tables (append-only) and operational tables.
--
-- Applied once, inside a transaction, by `Store::migrate`. Never edit an applied migration:
-- add a new numbered file instead (the store refuses a database whose checksum differs).

-- ---------------------------------------------------------------------------------------
-- Evidence: the resolved spec, then the draft plan, then the ready plan, and the planned
-- trials. These rows are immutable: the trigger below refuses UPDATE, DELETE and TRUNCATE
-- with SQLSTATE AKB01, which the store maps to `StoreError::Immutable`.
-- ---------------------------------------------------------------------------------------

CREATE FUNCTION akbench_refuse_mutation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% of % refused: evidence is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'AKB01', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
END
$$;

-- One row per run: the ResolvedRunSpec, canonical JSON.
CREATE TABLE run_specs (
    run_id      uuid        PRIMARY KEY,
    run_key     text        NOT NULL UNIQUE,
    digest      text        NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    document    jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- The draft and the ready RunPlan of a run.
CREATE TABLE plans (
    run_id      uuid        NOT NULL REFERENCES run_specs (run_id),
    stage       text        NOT NULL CHECK (stage IN ('draft', 'ready')),
    digest      text        NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    document    jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, stage)
);

-- The planned trials of a run's ready plan, in plan order (contiguous ordinals from 0).
CREATE TABLE planned_trials (
    trial_id    uuid        PRIMARY KEY,
    run_id      uuid        NOT NULL REFERENCES run_specs (run_id),
    ordinal     integer     NOT NULL CHECK (ordinal >= 0),
    key         text        NOT NULL UNIQUE,
    task_id     text        NOT NULL,
    agent       text        NOT NULL,
    repetition  integer     NOT NULL CHECK (repetition >= 0),
    document    jsonb       NOT NULL,
    UNIQUE (run_id, ordinal)
);

CREATE TRIGGER run_specs_append_only BEFORE UPDATE OR DELETE ON run_specs
    FOR EACH ROW EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER run_specs_no_truncate BEFORE TRUNCATE ON run_specs
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER plans_append_only BEFORE UPDATE OR DELETE ON plans
    FOR EACH ROW EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER plans_no_truncate BEFORE TRUNCATE ON plans
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER planned_trials_append_only BEFORE UPDATE OR DELETE ON planned_trials
    FOR EACH ROW EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER planned_trials_no_truncate BEFORE TRUNCATE ON planned_trials
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();

-- ---------------------------------------------------------------------------------------
-- Operational: runs' state, work items, attempts, leases, transitions, submissions,
-- quarantine and workers. The plan stays the authority on membership.
-- ---------------------------------------------------------------------------------------

-- The coarse state of each run (created when its plan is submitted).
CREATE TABLE runs (
    run_id      uuid        PRIMARY KEY REFERENCES run_specs (run_id),
    state       text        NOT NULL DEFAULT 'planned'
                CHECK (state IN ('planned', 'running', 'cancelling', 'cancelled', 'finished')),
    started_at  timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Workers that have opened a session.
CREATE TABLE workers (
    worker_id     text        PRIMARY KEY,
    labels        jsonb       NOT NULL DEFAULT '{}',
    slots         integer     NOT NULL CHECK (slots >= 0),
    version       text        NOT NULL DEFAULT '',
    draining      boolean     NOT NULL DEFAULT false,
    connected_at  timestamptz NOT NULL DEFAULT now(),
    last_seen     timestamptz NOT NULL DEFAULT now()
);

-- One work item per planned trial of a started run.
CREATE TABLE work_items (
    trial_id       uuid        PRIMARY KEY REFERENCES planned_trials (trial_id),
    run_id         uuid        NOT NULL REFERENCES runs (run_id),
    ordinal        integer     NOT NULL,
    kind           text        NOT NULL DEFAULT 'execute' CHECK (kind IN ('execute', 'grade')),
    state          text        NOT NULL DEFAULT 'ready'
                   CHECK (state IN ('ready', 'leased', 'done', 'cancelled')),
    attempts_used  integer     NOT NULL DEFAULT 0 CHECK (attempts_used >= 0),
    -- Infrastructure retries still allowed (the execution policy's `infrastructure_retries`).
    retry_budget   integer     NOT NULL DEFAULT 0 CHECK (retry_budget >= 0),
    -- Not claimable before this instant (retry backoff).
    ready_at       timestamptz NOT NULL DEFAULT now(),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Claiming: `WHERE state = 'ready' AND ready_at <= now() ORDER BY run_id, ordinal
-- FOR UPDATE SKIP LOCKED LIMIT n`.
CREATE INDEX work_items_ready ON work_items (run_id, ordinal) INCLUDE (ready_at)
    WHERE state = 'ready';
-- Status projections per run.
CREATE INDEX work_items_run_state ON work_items (run_id, state);

-- Fencing epochs: every lease (and every re-lease) takes a new value.
CREATE SEQUENCE lease_epochs AS bigint;

-- One row per attempt of a work item.
CREATE TABLE attempts (
    attempt_id      uuid        PRIMARY KEY,
    trial_id        uuid        NOT NULL REFERENCES work_items (trial_id),
    number          integer     NOT NULL CHECK (number >= 1),
    kind            text        NOT NULL CHECK (kind IN ('execute', 'grade')),
    -- The latest lifecycle state (core's snake_case names).
    state           text        NOT NULL DEFAULT 'pending',
    worker_id       text        REFERENCES workers (worker_id),
    epoch           bigint      NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    terminal_state  text        CHECK (terminal_state IN (
                        'completed', 'failed', 'timeout', 'cancelled', 'infrastructure_error',
                        'invalid_configuration', 'evaluation_error', 'not_graded')),
    cause           text,
    UNIQUE (trial_id, number),
    CHECK ((finished_at IS NULL) = (terminal_state IS NULL))
);

CREATE INDEX attempts_live_by_worker ON attempts (worker_id) WHERE finished_at IS NULL;

-- The live lease of an attempt; deleted when the attempt finishes or the lease expires.
CREATE TABLE leases (
    attempt_id  uuid        PRIMARY KEY REFERENCES attempts (attempt_id),
    worker_id   text        NOT NULL REFERENCES workers (worker_id),
    epoch       bigint      NOT NULL,
    expires_at  timestamptz NOT NULL
);

CREATE INDEX leases_expires_at ON leases (expires_at);
CREATE INDEX leases_worker ON leases (worker_id);

-- The lifecycle history of each attempt, as reported by its worker.
CREATE TABLE transitions (
    attempt_id  uuid        NOT NULL REFERENCES attempts (attempt_id),
    seq         integer     NOT NULL CHECK (seq >= 1),
    state       text        NOT NULL,
    at          timestamptz NOT NULL,
    note        text        NOT NULL DEFAULT '',
    PRIMARY KEY (attempt_id, seq)
);

-- The accepted run record of each attempt (at most one; the same record again is a no-op).
CREATE TABLE submissions (
    attempt_id   uuid        PRIMARY KEY REFERENCES attempts (attempt_id),
    digest       text        NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    record       jsonb       NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);

-- Records refused because they conflict with an accepted one (or fail validation).
CREATE TABLE quarantine (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    attempt_id   uuid        NOT NULL,
    digest       text        NOT NULL,
    record       jsonb       NOT NULL,
    reason       text        NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX quarantine_attempt ON quarantine (attempt_id);
