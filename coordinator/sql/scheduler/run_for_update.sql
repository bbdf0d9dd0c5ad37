-- Locks run $1 and reads what core's run machine (`dispatch::machine::run_on`) decides an
-- event on: its state and whether it has work (an item ready or leased). No row: no such run.
--
-- Each probe is bounded by the run: its first leased item off the leased index, its first
-- ready item in plan order off the ready index `work_items_ready` (run_id, ordinal). Asked
-- as `EXISTS (... state IN ('ready', 'leased'))`, the planner may take a sequential scan of
-- every work item (it expects a match in the first few rows; the run's items sit wherever
-- they were inserted): 1.27 s with 800,000 items held by other runs (issue 48, as
-- `status_share.sql` was). The `ORDER BY ... LIMIT 1` of a scalar subquery (EXISTS would
-- drop it) is what the index gives for free and a scan would sort for.
SELECT r.state,
       (SELECT w.ordinal FROM work_items w
         WHERE w.run_id = r.run_id AND w.state = 'leased'
         LIMIT 1) IS NOT NULL
       OR (SELECT w.ordinal FROM work_items w
            WHERE w.run_id = r.run_id AND w.state = 'ready'
            ORDER BY w.ordinal LIMIT 1) IS NOT NULL AS has_work
FROM runs r
WHERE r.run_id = $1
FOR UPDATE OF r
