-- Leases past their expiry at $1, with their attempts locked (other reapers skip them).
SELECT a.attempt_id, a.trial_id, l.worker_id, a.state, a.last_seq
FROM leases l
JOIN attempts a ON a.attempt_id = l.attempt_id
WHERE l.expires_at <= $1
ORDER BY a.attempt_id
FOR UPDATE OF a SKIP LOCKED
