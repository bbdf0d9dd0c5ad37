-- Re-queues the trials of run $1 that core's item machine moves on a resume
-- (`dispatch::machine::MoveColumns::of(ItemEvent::Resume)`: trials without an accepted final
-- outcome, i.e. cancelled before they ran, or done `infrastructure_error` or `cancelled`, also
-- when their retry budget was spent: the budget starts again from here, `budget_from`), each
-- guarded by the class it was decided on. Returns them. $2 now, the scheduler's clock (ready
-- at once by the clock claims compare with); $3-$6 the moves: from states, from outcomes, to
-- states, to outcomes. They leave their done / cancelled counters and bucket (migration
-- 0020: no trigger does it).
WITH old AS (
    SELECT w.trial_id, w.state, w.bucket, m.to_state, m.to_outcome
    FROM work_items w
    JOIN unnest($3::text[]::item_state[], $4::text[], $5::text[]::item_state[], $6::text[])
         AS m (from_state, from_outcome, to_state, to_outcome)
      ON w.state = m.from_state AND w.outcome IS NOT DISTINCT FROM m.from_outcome
    WHERE w.run_id = $1
    FOR UPDATE OF w
), resumed AS (
    UPDATE work_items w
    SET state = o.to_state, outcome = o.to_outcome, bucket = NULL,
        ready_at = $2::timestamptz, budget_from = w.attempts_used, lost_by = NULL,
        updated_at = now()
    FROM old o
    WHERE w.trial_id = o.trial_id AND w.state = o.state
    RETURNING w.trial_id, w.run_id, w.agent, o.state AS state_old, o.bucket AS bucket_old
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', state_old, bucket_old, -count(*)
    FROM resumed
    GROUP BY run_id, agent, state_old, bucket_old
)
SELECT trial_id FROM resumed
