-- The gauges `/metrics` reads from the database at each scrape (shared by every replica):
-- (metric, run key, provider route, value). Ready work items of running runs by run and
-- route; live leases; connected workers and their free slots (slots minus live leases).
SELECT 'queue_depth' AS metric, s.run_key, coalesce(w.provider_route, '') AS route,
       count(*)::bigint AS value
FROM work_items w
JOIN runs r ON r.run_id = w.run_id AND r.state = 'running'
JOIN run_specs s ON s.run_id = w.run_id
WHERE w.state = 'ready'
GROUP BY s.run_key, w.provider_route
UNION ALL
SELECT 'live_leases', '', '', count(*)::bigint FROM leases
UNION ALL
SELECT 'workers_connected', '', '', count(*)::bigint
FROM workers WHERE disconnected_at IS NULL
UNION ALL
SELECT 'free_slots', '', '',
       greatest(0, coalesce(sum(greatest(0, w.slots - coalesce(l.held, 0))), 0))::bigint
FROM workers w
LEFT JOIN (SELECT worker_id, count(*) AS held FROM leases GROUP BY worker_id) l
       ON l.worker_id = w.worker_id
WHERE w.disconnected_at IS NULL
