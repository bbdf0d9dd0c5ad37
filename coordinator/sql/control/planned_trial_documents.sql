-- The planned trials of a run in plan order, as JSON text. $1 run id.
SELECT document::text AS document FROM planned_trials WHERE run_id = $1 ORDER BY ordinal
