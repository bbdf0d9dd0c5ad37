-- Locks the routes' rows in route order (no deadlock between two settling transactions).
-- $1 routes, sorted; their rows exist (create_routes.sql).
SELECT route, consecutive_failures, paused_until, last_error
FROM route_pauses
WHERE route = ANY ($1::text[])
ORDER BY route
FOR UPDATE
