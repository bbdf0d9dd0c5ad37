-- Decides the trials whose live attempt ended: an infrastructure error with budget left
-- (attempts_used <= retry_budget) and a run not being cancelled goes back to `ready` for a
-- new attempt; anything else is `done` with that outcome. $1 trial ids; $2 terminal states.
UPDATE work_items w
SET state = CASE WHEN s.retry THEN 'ready' ELSE 'done' END,
    outcome = CASE WHEN s.retry THEN NULL ELSE s.terminal END,
    ready_at = now(),
    updated_at = now()
FROM (
    SELECT f.trial_id, f.terminal,
           f.terminal = 'infrastructure_error'
           AND wi.attempts_used <= wi.retry_budget
           AND r.state NOT IN ('cancelling', 'cancelled') AS retry
    FROM unnest($1::uuid[], $2::text[]) AS f (trial_id, terminal)
    JOIN work_items wi ON wi.trial_id = f.trial_id
    JOIN runs r ON r.run_id = wi.run_id
) s
-- `COLLATE "C"` (the same test: text equality is bytewise) keeps the planner off the partial
-- index `work_items_leased`, whose stale estimate of one row made generic plans scan every
-- leased item per settle instead of looking the settled ones up by key.
WHERE w.trial_id = s.trial_id AND w.state COLLATE "C" = 'leased'
RETURNING w.trial_id, w.state, w.run_id
