-- Re-queues every trial of run $1 without an accepted final outcome: items cancelled before
-- they ran, and trials that ended `infrastructure_error` or `cancelled` (also when their retry
-- budget was spent: the budget starts again from here, `budget_from`). Returns them. $2 now, the scheduler's clock
-- (ready at once by the clock claims compare with). They leave their done / cancelled
-- counters and bucket (migration 0020: no trigger does it).
WITH old AS (
    SELECT trial_id, state, bucket
    FROM work_items
    WHERE run_id = $1
      AND (state = 'cancelled'
           OR (state = 'done' AND outcome IN ('infrastructure_error', 'cancelled')))
    FOR UPDATE
), resumed AS (
    UPDATE work_items w
    SET state = 'ready', outcome = NULL, bucket = NULL, ready_at = $2::timestamptz,
        budget_from = w.attempts_used, lost_by = NULL, updated_at = now()
    FROM old o
    WHERE w.trial_id = o.trial_id
    RETURNING w.trial_id, w.run_id, w.agent, o.state AS state_old, o.bucket AS bucket_old
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', state_old, bucket_old, -count(*)
    FROM resumed
    GROUP BY run_id, agent, state_old, bucket_old
)
SELECT trial_id FROM resumed
