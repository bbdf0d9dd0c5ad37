-- The stored resolved spec of a run, as JSON text. $1 run id.
SELECT document::text AS document FROM run_specs WHERE run_id = $1
