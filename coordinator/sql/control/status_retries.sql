-- Attempts of a run beyond the first of their trial (uses the partial index attempts_retries).
SELECT count(*)::bigint AS n
FROM attempts a
JOIN work_items w ON w.trial_id = a.trial_id
WHERE a.number > 1 AND w.run_id = $1
