-- Moves a planned run to `running` with its caps, as core's run machine decides a start
-- (`dispatch::machine::run_on`: $3 the state it was decided on, $4 the new one); returns it
-- when this call moved it. The same transaction creates its work items (`enqueue.sql`), so no
-- one ever sees a running run without all of them. $1 run_id; $2 caps (jsonb).
UPDATE runs
SET state = $4::text::run_state, started_at = now(), updated_at = now(), caps = $2
WHERE run_id = $1 AND state = $3::text::run_state
RETURNING run_id
