-- Marks a run as being cancelled and its queued items cancelled. $1 run id.
WITH run AS (
    UPDATE runs SET state = 'cancelling', updated_at = now()
    WHERE run_id = $1 AND state <> 'cancelled'
    RETURNING run_id
), items AS (
    UPDATE work_items SET state = 'cancelled', outcome = 'cancelled', updated_at = now()
    WHERE run_id = $1 AND state = 'ready'
    RETURNING trial_id
)
SELECT (SELECT count(*) FROM run) AS runs, (SELECT count(*) FROM items) AS items
