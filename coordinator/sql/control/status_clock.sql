-- The projection's clock and moving parts: now, the planned trials by agent, trials finished
-- within the last $2 seconds, and workers connected (session open) and seen within the last
-- $3 seconds.
SELECT now() AS as_of,
       c.by_agent::text AS by_agent,
       (SELECT count(*)::bigint FROM work_items w
         WHERE w.run_id = $1 AND w.state = 'done'
           AND w.updated_at > now() - make_interval(secs => $2)) AS recent,
       (SELECT count(*)::bigint FROM workers
         WHERE disconnected_at IS NULL AND last_seen > now() - make_interval(secs => $3)) AS workers
FROM run_catalog c
WHERE c.run_id = $1
