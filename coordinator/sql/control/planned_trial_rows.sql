-- The planned trials of a run in plan order: what the accounting needs of each (its
-- ordinal, UUID and key) and its JSON text as stored (what the plan's digest seals).
-- $1 run id.
SELECT ordinal, trial_id, key, document::text AS document
FROM planned_trials WHERE run_id = $1 ORDER BY ordinal
