-- Each run among $1 (locked first by lock_runs.sql, so this statement's snapshot sees the
-- work of every transaction that settled its items before): its state and whether it is
-- idle (no work item ready or leased). Rust decides the move (core's `RunState::when_idle`)
-- and end_runs.sql applies it. $1 run ids.
SELECT r.run_id, r.state,
       NOT EXISTS (
           SELECT 1 FROM work_items w
           WHERE w.run_id = r.run_id AND w.state IN ('ready', 'leased')
       ) AS idle
FROM runs r
WHERE r.run_id = ANY ($1::uuid[])
