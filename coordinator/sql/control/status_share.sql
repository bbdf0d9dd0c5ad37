-- What run $1 holds of the workers among the runs sharing them: every run that is running or
-- cancelling (and run $1 whatever its state), with its stored caps (priority and weight), its
-- live leases (the partial index work_items_leased, bounded by the live slots) and whether it
-- wants workers (ready or leased work items), for akbench_core::dispatch::share::standing.
SELECT r.run_id, r.caps,
       (SELECT count(*) FROM work_items l
         WHERE l.run_id = r.run_id AND l.state = 'leased') AS live,
       EXISTS (SELECT 1 FROM work_items w
                WHERE w.run_id = r.run_id AND w.state IN ('ready', 'leased')) AS wants
FROM runs r
WHERE r.state IN ('running', 'cancelling') OR r.run_id = $1
ORDER BY r.run_id
