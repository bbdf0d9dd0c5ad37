-- Stores one route's new state. $1 route; $2 failures; $3 paused until; $4 last error.
UPDATE route_pauses
SET consecutive_failures = $2, paused_until = $3, last_error = $4, updated_at = now()
WHERE route = $1
