-- Re-queues every trial of run $1 without an accepted final outcome: items cancelled before
-- they ran, and trials that ended `infrastructure_error` or `cancelled` (also when their retry
-- budget was spent: the budget starts again from here, `budget_from`). Returns them. $2 now, the scheduler's clock
-- (ready at once by the clock claims compare with).
UPDATE work_items
SET state = 'ready', outcome = NULL, ready_at = $2::timestamptz, budget_from = attempts_used,
    lost_by = NULL, updated_at = now()
WHERE run_id = $1
  AND (state = 'cancelled'
       OR (state = 'done' AND outcome IN ('infrastructure_error', 'cancelled')))
RETURNING trial_id
