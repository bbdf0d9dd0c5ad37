-- The header of a run's ready plan (its trials are in planned_trials), as JSON text.
-- $1 run id.
SELECT document::text AS document FROM plans WHERE run_id = $1 AND stage = 'ready'
