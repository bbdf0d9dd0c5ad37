-- Marks a worker disconnected when its session ends, unless it already opened a newer one.
-- $1 worker_id; $2 the ended session's connected_at.
UPDATE workers SET disconnected_at = now()
WHERE worker_id = $1 AND connected_at = $2
