-- The budget of the runs $1 is spent: their items that core's item machine moves on a
-- budget stop (`dispatch::machine::MoveColumns::of(ItemEvent::BudgetStop)`: ready ones, never
-- started or waiting for a retry) become cancelled with the reason 'budget', each guarded by
-- the class it was decided on, counted as such (migration 0020); leased ones finish.
-- $2-$5 the moves: from states, from outcomes, to states, to outcomes.
WITH cancelled AS (
    UPDATE work_items w
    SET state = m.to_state, outcome = m.to_outcome, cancel_reason = 'budget',
        updated_at = now()
    FROM unnest($2::text[]::item_state[], $3::text[], $4::text[]::item_state[], $5::text[])
         AS m (from_state, from_outcome, to_state, to_outcome)
    WHERE w.run_id = ANY($1::uuid[]) AND w.state = m.from_state
      AND w.outcome IS NOT DISTINCT FROM m.from_outcome
    RETURNING w.run_id, w.agent, w.state
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', state, NULL, count(*)
    FROM cancelled
    GROUP BY run_id, agent, state
)
SELECT run_id FROM cancelled
