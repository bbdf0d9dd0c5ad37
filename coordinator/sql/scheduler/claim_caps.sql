-- The caps of the runs that have any. $1 run ids.
SELECT run_id, caps FROM runs WHERE run_id = ANY ($1::uuid[]) AND caps <> '{}'::jsonb
