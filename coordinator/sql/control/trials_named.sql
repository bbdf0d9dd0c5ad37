-- The trials of a run named by UUID (as text) or by key. $1 run id; $2 UUIDs or keys.
SELECT trial_id, key
FROM planned_trials
WHERE run_id = $1 AND (trial_id::text = ANY ($2) OR key = ANY ($2))
