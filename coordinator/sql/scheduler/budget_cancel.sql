-- The budget of the runs $1 is spent: their ready items (never started, or waiting for a
-- retry) become `cancelled` with the reason 'budget', counted as such (migration 0020);
-- leased ones finish.
WITH cancelled AS (
    UPDATE work_items
    SET state = 'cancelled', outcome = 'cancelled', cancel_reason = 'budget', updated_at = now()
    WHERE run_id = ANY($1::uuid[]) AND state = 'ready'
    RETURNING run_id, agent
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', 'cancelled', NULL, count(*)
    FROM cancelled
    GROUP BY run_id, agent
)
SELECT run_id FROM cancelled
