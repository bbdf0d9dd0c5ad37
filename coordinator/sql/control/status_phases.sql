-- Live attempts of a run by lifecycle state (uses the partial index attempts_live).
SELECT a.state AS name, count(*)::bigint AS n
FROM attempts a
JOIN work_items w ON w.trial_id = a.trial_id
WHERE a.finished_at IS NULL AND w.run_id = $1
GROUP BY a.state
