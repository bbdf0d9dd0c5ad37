-- Marks a run as being cancelled and its queued items cancelled, counted as such (migration
-- 0020). $1 run id.
WITH run AS (
    UPDATE runs SET state = 'cancelling', updated_at = now()
    WHERE run_id = $1 AND state <> 'cancelled'
    RETURNING run_id
), items AS (
    UPDATE work_items SET state = 'cancelled', outcome = 'cancelled', updated_at = now()
    WHERE run_id = $1 AND state = 'ready'
    RETURNING trial_id, run_id, agent
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', 'cancelled', NULL, count(*)
    FROM items
    GROUP BY run_id, agent
)
SELECT (SELECT count(*) FROM run) AS runs, (SELECT count(*) FROM items) AS items
