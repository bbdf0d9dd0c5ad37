-- Extends the worker's leases whose epoch matches; returns the extended ones.
-- $1 worker_id; $2 attempt ids; $3 epochs; $4 ttl in milliseconds; $5 now, the scheduler's
-- clock (the one the reaper compares expiries with). `last_seen` is the database's time: only
-- status shows it, next to the database's now().
WITH seen AS (
    UPDATE workers SET last_seen = now() WHERE worker_id = $1
)
UPDATE leases l
SET expires_at = $5::timestamptz + $4::bigint * interval '1 millisecond'
FROM unnest($2::uuid[], $3::int8[]) AS h (attempt_id, epoch)
WHERE l.attempt_id = h.attempt_id AND l.epoch = h.epoch AND l.worker_id = $1
RETURNING l.attempt_id
