-- Leases whose attempt has not started (no transition stored: a worker's prefetched
-- assignment waiting for a slot, or one just assigned) of the runs $1 (budget spent) or on the
-- provider routes $2 (paused), locked with their attempts; an attempt another transaction
-- holds (its first transitions being stored) is starting and left alone. The caller closes
-- them (core::dispatch::Hold).
SELECT a.attempt_id, a.trial_id, l.worker_id, w.run_id, w.provider_route
FROM leases l
JOIN attempts a ON a.attempt_id = l.attempt_id
JOIN work_items w ON w.trial_id = a.trial_id
WHERE a.last_seq = 0 AND a.state = 'pending' AND a.terminal_state IS NULL
  AND w.state = 'leased'
  AND (w.run_id = ANY ($1::uuid[]) OR w.provider_route = ANY ($2::text[]))
ORDER BY a.attempt_id
FOR UPDATE OF a, l SKIP LOCKED
