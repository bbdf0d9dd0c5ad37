-- The live attempts of every run being cancelled, with their workers: each replica's reaper
-- sends `Cancel` to those whose worker has a session with it, so a cancel reaches the
-- workers of every replica, not only those of the replica that took it (docs/remote.md,
-- "Replicas").
SELECT l.attempt_id, l.worker_id
FROM runs r
JOIN work_items w ON w.run_id = r.run_id AND w.state = 'leased'
JOIN attempts a ON a.trial_id = w.trial_id
JOIN leases l ON l.attempt_id = a.attempt_id
WHERE r.state = 'cancelling'
