-- Leases past their stored expiry at $1, with their attempts locked (other reapers skip
-- them). The reaper still spares those whose worker it heard holding them
-- (core::dispatch::reap), so each comes with its epoch and stored expiry.
SELECT a.attempt_id, a.trial_id, a.number, l.worker_id, a.state, a.last_seq, l.epoch, l.expires_at
FROM leases l
JOIN attempts a ON a.attempt_id = l.attempt_id
WHERE l.expires_at <= $1
ORDER BY a.attempt_id
FOR UPDATE OF a SKIP LOCKED
