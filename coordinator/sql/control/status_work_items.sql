-- Work items of a run by state (an index-only scan of work_items_run_state).
SELECT state AS name, count(*)::bigint AS n
FROM work_items
WHERE run_id = $1
GROUP BY state
