-- The paused provider routes a run's work items use. $1 run id. Starts from the paused
-- routes (few, usually none) and asks, per route, whether a work item of the run uses it:
-- never a scan of the run's work items when nothing is paused.
SELECT p.route, p.consecutive_failures, p.paused_until, coalesce(p.last_error, '') AS last_error
FROM route_pauses p
WHERE p.paused_until > now()
  AND EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = $1 AND w.provider_route = p.route)
ORDER BY p.route
