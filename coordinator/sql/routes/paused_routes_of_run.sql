-- The paused provider routes a run's work items use. $1 run id.
SELECT p.route, p.consecutive_failures, p.paused_until, coalesce(p.last_error, '') AS last_error
FROM route_pauses p
WHERE p.paused_until > now()
  AND p.route IN (SELECT DISTINCT provider_route FROM work_items
                  WHERE run_id = $1 AND provider_route IS NOT NULL)
ORDER BY p.route
