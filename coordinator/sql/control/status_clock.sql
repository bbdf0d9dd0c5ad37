-- The projection's clock and moving parts: now, the planned trials by agent, the trials
-- finished within the last $2 seconds (the newest $4 of them at most, with when the oldest
-- of those finished: throughput is read off the latest finishes, so this costs the same at
-- 1,000 trials a minute as at 10; the partial index work_items_done_at, walked backwards),
-- and workers connected (session open) and seen within the last $3 seconds.
SELECT now() AS as_of,
       c.by_agent::text AS by_agent,
       r.recent,
       r.recent_since,
       (SELECT count(*)::bigint FROM workers
         WHERE disconnected_at IS NULL AND last_seen > now() - make_interval(secs => $3)) AS workers
FROM run_catalog c
CROSS JOIN LATERAL (
    SELECT count(*)::bigint AS recent, min(t.updated_at) AS recent_since
    FROM (SELECT w.updated_at FROM work_items w
           WHERE w.run_id = $1 AND w.state = 'done'
             AND w.updated_at > now() - make_interval(secs => $2)
           ORDER BY w.updated_at DESC
           LIMIT $4) t
) r
WHERE c.run_id = $1
