-- Cancels the items of run $1 that core's item machine moves on a cancel
-- (`dispatch::machine::MoveColumns::of(ItemEvent::Cancel)`: the ready ones), each guarded by
-- the class it was decided on, counted as such (migration 0020). $2-$5 the moves: from
-- states, from outcomes, to states, to outcomes.
WITH items AS (
    UPDATE work_items w
    SET state = m.to_state, outcome = m.to_outcome, updated_at = now()
    FROM unnest($2::text[]::item_state[], $3::text[], $4::text[]::item_state[], $5::text[])
         AS m (from_state, from_outcome, to_state, to_outcome)
    WHERE w.run_id = $1 AND w.state = m.from_state
      AND w.outcome IS NOT DISTINCT FROM m.from_outcome
    RETURNING w.trial_id, w.run_id, w.agent, w.state
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', state, NULL, count(*)
    FROM items
    GROUP BY run_id, agent, state
)
SELECT count(*) AS items FROM items
