-- What run $1 holds of the workers among the runs sharing them: every run that is running or
-- cancelling (and run $1 whatever its state), with its stored caps (priority and weight), its
-- live leases (the partial index work_items_leased, bounded by the live slots) and whether it
-- wants workers (ready or leased work items), for akbench_core::dispatch::share::standing.
--
-- Each probe is bounded by its run: a run wants workers when it holds a live lease or its
-- first ready item in plan order exists, read off the ready index `work_items_ready`
-- (run_id, ordinal). Asked as `EXISTS (... state IN ('ready', 'leased'))`, the planner took
-- a sequential scan of every work item (it expects a match within the first few rows; the
-- run's items sit wherever they were inserted), once per running run: 22-44 ms per run with
-- 800,000 items held by other runs (issue 48). The `ORDER BY ... LIMIT 1` of a scalar
-- subquery (EXISTS would drop it) is what the index gives for free and a scan would sort for.
SELECT r.run_id, r.caps, l.live,
       l.live > 0
       OR (SELECT w.ordinal FROM work_items w
            WHERE w.run_id = r.run_id AND w.state = 'ready'
            ORDER BY w.ordinal LIMIT 1) IS NOT NULL AS wants
FROM runs r
CROSS JOIN LATERAL (
    SELECT count(*) AS live FROM work_items l WHERE l.run_id = r.run_id AND l.state = 'leased'
) l
WHERE r.state IN ('running', 'cancelling') OR r.run_id = $1
ORDER BY r.run_id
