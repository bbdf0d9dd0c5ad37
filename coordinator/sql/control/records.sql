-- The accepted record of each trial of a run (that of its last attempt with one), in plan
-- order; $2 limits to some trials (empty for all).
SELECT DISTINCT ON (w.ordinal) w.trial_id, a.attempt_id, w.ordinal, s.record::text
FROM work_items w
JOIN attempts a ON a.trial_id = w.trial_id
JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND (cardinality($2::uuid[]) = 0 OR w.trial_id = ANY($2))
ORDER BY w.ordinal, a.number DESC
