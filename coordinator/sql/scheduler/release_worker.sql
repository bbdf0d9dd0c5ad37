-- Expires at once the leases of worker $1 except the attempts in $2: its session broke and
-- it did not come back within the grace ($3: only if no session of it is open on any
-- replica, by `workers.disconnected_at`), or it came back without them. The next reap takes
-- them back; fencing makes that safe even if the worker still runs them.
UPDATE leases
SET expires_at = '-infinity'
WHERE worker_id = $1 AND NOT (attempt_id = ANY ($2::uuid[]))
  AND (NOT $3::bool OR EXISTS (
      SELECT 1 FROM workers w WHERE w.worker_id = $1 AND w.disconnected_at IS NOT NULL))
