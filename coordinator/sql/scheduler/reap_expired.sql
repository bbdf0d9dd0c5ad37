-- Leases past their stored expiry at $1, with their attempts locked (other reapers skip
-- them). The reaper still spares those whose worker it heard holding them and leaves those
-- whose worker's session is on another live replica (core::dispatch::replica::reap_across),
-- so each comes with its epoch, stored expiry, and the replica of its worker's last session
-- (with that replica's mark, and whether the session ended).
SELECT a.attempt_id, a.trial_id, a.number, l.worker_id, a.state, a.last_seq, l.epoch, l.expires_at,
       w.replica, r.seen_at AS replica_seen, (w.disconnected_at IS NOT NULL) AS disconnected
FROM leases l
JOIN attempts a ON a.attempt_id = l.attempt_id
LEFT JOIN workers w ON w.worker_id = l.worker_id
LEFT JOIN replicas r ON r.replica_id = w.replica
WHERE l.expires_at <= $1
ORDER BY a.attempt_id
FOR UPDATE OF a SKIP LOCKED
