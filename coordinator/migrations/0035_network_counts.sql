-- What status counts of a run's networks and grading place (core::report::network), as
-- columns of each submission computed by PostgreSQL when the record is stored:
-- `grade_shared`, the grade was made in the agent's environment (`grade.environment =
-- "shared"`); `agent_undeclared`, the agent's phase reached for a host the task did not
-- declare (a contact marked `undeclared`, core::egress::declared); `fetch_failed`, the
-- attempt ended `infrastructure_error` because a vouched grading fetch failed (its cause
-- starts as core::egress::vouch::FETCH_FAILED_CAUSE). Adding stored columns rewrites
-- `submissions` once.
ALTER TABLE submissions
    ADD COLUMN grade_shared boolean NOT NULL
        GENERATED ALWAYS AS (COALESCE(record #>> '{grade,environment}' = 'shared', false)) STORED,
    ADD COLUMN agent_undeclared boolean NOT NULL
        GENERATED ALWAYS AS (
            COALESCE(record @> '{"agent_process": {"runtime": {"egress": [{"undeclared": true}]}}}'::jsonb,
                     false)
        ) STORED,
    ADD COLUMN fetch_failed boolean NOT NULL
        GENERATED ALWAYS AS (
            COALESCE(record ->> 'state' = 'infrastructure_error'
                     AND record ->> 'cause' LIKE 'the grader''s fetch of %', false)
        ) STORED;

-- Such records are the few; the per-run counts start from them.
CREATE INDEX submissions_network ON submissions (attempt_id)
    WHERE grade_shared OR agent_undeclared OR fetch_failed;
