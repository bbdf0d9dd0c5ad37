-- Moves a planned run to `running` with its caps; returns it when this call moved it. The
-- same transaction creates its work items (`enqueue.sql`), so no one ever sees a running
-- run without all of them. $1 run_id; $2 caps (jsonb).
UPDATE runs
SET state = 'running', started_at = now(), updated_at = now(), caps = $2
WHERE run_id = $1 AND state = 'planned'
RETURNING run_id
