-- Decides the trials whose live attempt ended, as core::dispatch::settle does (its table
-- tests run against this statement in coordinator/tests/faults.rs): an attempt `cancelled`
-- while its run is not being cancelled was interrupted by its worker and counts as an
-- infrastructure error; an infrastructure error with budget left
-- (attempts_used - budget_from <= retry_budget) and a run not being cancelled goes back to
-- `ready` after its backoff; anything else is `done` with that outcome.
-- $1 trial ids; $2 terminal states; $3 jitter factors (core Backoff::jitter_factor), one per
-- trial; $4 nominal backoff in ms by retry number (core Backoff::nominal for 1, 2, ...); $5 now,
-- the scheduler's clock (a re-queued trial is ready again $backoff after it).
UPDATE work_items w
SET state = CASE WHEN s.retry THEN 'ready' ELSE 'done' END,
    outcome = CASE WHEN s.retry THEN NULL ELSE s.outcome END,
    -- The bucket of a trial made done, from its last attempt and that attempt's record: the
    -- expression of the bucket trigger (migration 0005), which then leaves the row alone
    -- (migration 0018).
    bucket = CASE WHEN s.retry THEN NULL ELSE (
        SELECT akbench_bucket(a.terminal_state, sb.ok)
        FROM attempts a
        LEFT JOIN submissions sb ON sb.attempt_id = a.attempt_id
        WHERE a.trial_id = w.trial_id AND a.number = w.attempts_used
          AND a.finished_at IS NOT NULL) END,
    ready_at = $5::timestamptz + CASE
        WHEN s.retry THEN ($4::int8[])[greatest(1, least(s.used, cardinality($4::int8[])))]
                          * s.factor * interval '1 millisecond'
        ELSE interval '0' END,
    updated_at = now()
FROM (
    SELECT f.trial_id, f.factor, x.outcome, wi.attempts_used - wi.budget_from AS used,
           x.outcome = 'infrastructure_error'
           AND wi.attempts_used - wi.budget_from <= wi.retry_budget
           AND r.state NOT IN ('cancelling', 'cancelled') AS retry
    FROM unnest($1::uuid[], $2::text[], $3::float8[]) AS f (trial_id, terminal, factor)
    JOIN work_items wi ON wi.trial_id = f.trial_id
    JOIN runs r ON r.run_id = wi.run_id
    CROSS JOIN LATERAL (
        SELECT CASE WHEN f.terminal = 'cancelled' AND r.state NOT IN ('cancelling', 'cancelled')
                    THEN 'infrastructure_error' ELSE f.terminal END AS outcome
    ) x
) s
-- `COLLATE "C"` (the same test: text equality is bytewise) keeps the planner off the partial
-- index `work_items_leased`, whose stale estimate of one row made generic plans scan every
-- leased item per settle instead of looking the settled ones up by key.
WHERE w.trial_id = s.trial_id AND w.state COLLATE "C" = 'leased'
RETURNING w.trial_id, w.state, w.run_id, w.outcome, w.provider_route
