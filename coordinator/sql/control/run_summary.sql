-- The summary of runs (joined facts of run_catalog and runs); callers append a WHERE clause.
SELECT c.run_id, c.run_key, c.experiment, r.state, c.spec_digest, c.plan_digest,
       c.trial_count, c.created_at, r.started_at, c.seq
FROM run_catalog c
JOIN runs r ON r.run_id = c.run_id
