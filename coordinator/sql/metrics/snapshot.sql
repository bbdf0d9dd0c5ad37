-- The gauges `/metrics` reads from the database at each scrape (shared by every replica):
-- (metric, run key, provider route, value): live leases, connected workers and their free
-- slots (slots minus live leases). The queue depth is read off the run counters
-- (`queue_depth.rs`).
SELECT 'live_leases' AS metric, '' AS run_key, '' AS route, count(*)::bigint AS value
FROM leases
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
