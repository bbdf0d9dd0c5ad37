-- Live attempts of a run by lifecycle state (uses the partial index attempts_live); an
-- attempt with no transition stored yet (a worker's prefetched assignment waiting for a
-- slot) is `prefetched`, not started.
SELECT CASE WHEN a.last_seq = 0 AND a.state = 'pending' THEN 'prefetched' ELSE a.state END
       AS name,
       count(*)::bigint AS n
FROM attempts a
JOIN work_items w ON w.trial_id = a.trial_id
WHERE a.finished_at IS NULL AND w.run_id = $1
GROUP BY 1
