-- The runs of the attempts $1.
SELECT DISTINCT w.run_id
FROM attempts a
JOIN work_items w ON w.trial_id = a.trial_id
WHERE a.attempt_id = ANY($1::uuid[])
