-- Work items of a run by state (an index-only scan of work_items_run_state).
SELECT state, count(*)::bigint
FROM work_items
WHERE run_id = $1
GROUP BY state
