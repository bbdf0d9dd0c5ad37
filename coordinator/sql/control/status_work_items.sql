-- Work items of a run by state, with the attempts made beyond the first of each.
SELECT state, count(*)::bigint, coalesce(sum(greatest(attempts_used - 1, 0)), 0)::bigint
FROM work_items
WHERE run_id = $1
GROUP BY state
