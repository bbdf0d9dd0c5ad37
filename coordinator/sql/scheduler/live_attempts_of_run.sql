SELECT l.attempt_id, l.worker_id
FROM work_items w
JOIN attempts a ON a.trial_id = w.trial_id
JOIN leases l ON l.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND w.state = 'leased'
ORDER BY w.ordinal
