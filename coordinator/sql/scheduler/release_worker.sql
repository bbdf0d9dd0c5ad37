-- The leases of worker $1 except the attempts in $2, to be taken back at once: its session
-- broke and it did not come back within the grace ($3: only if no session of it is open on
-- any replica, by `workers.disconnected_at`), or it came back without them. Locked with their
-- attempts (a lease a concurrent finish deleted is left out; an attempt that finished is
-- left out); the caller closes them with the cause (core::dispatch::Loss). Fencing makes
-- that safe even if the worker still runs them.
SELECT a.attempt_id, a.trial_id, a.number, l.worker_id, a.state, a.last_seq
FROM leases l
JOIN attempts a ON a.attempt_id = l.attempt_id
WHERE l.worker_id = $1 AND NOT (l.attempt_id = ANY ($2::uuid[]))
  AND a.terminal_state IS NULL
  AND (NOT $3::bool OR EXISTS (
      SELECT 1 FROM workers w WHERE w.worker_id = $1 AND w.disconnected_at IS NOT NULL))
ORDER BY a.attempt_id
FOR UPDATE OF a, l
