-- Locks run $1 and reads what core's run machine (`dispatch::machine::run_on`) decides an
-- event on: its state and whether it has work (an item ready or leased). No row: no such run.
SELECT r.state,
       EXISTS (SELECT 1 FROM work_items w
                WHERE w.run_id = r.run_id AND w.state IN ('ready', 'leased')) AS has_work
FROM runs r
WHERE r.run_id = $1
FOR UPDATE OF r
