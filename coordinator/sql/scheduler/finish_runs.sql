-- Each run among $1 (locked first by lock_runs.sql, so this statement's snapshot sees the
-- work of every transaction that settled its items before): its state and whether it is
-- idle (no work item ready or leased). Rust decides the move (core's run machine, the idle
-- event) and end_runs.sql applies it. $1 run ids. Each probe is bounded by its run, off the
-- leased and ready indexes (see `run_for_update.sql` for why not `EXISTS (... IN ...)`).
SELECT r.run_id, r.state,
       (SELECT w.ordinal FROM work_items w
         WHERE w.run_id = r.run_id AND w.state = 'leased'
         LIMIT 1) IS NULL
       AND (SELECT w.ordinal FROM work_items w
             WHERE w.run_id = r.run_id AND w.state = 'ready'
             ORDER BY w.ordinal LIMIT 1) IS NULL AS idle
FROM runs r
WHERE r.run_id = ANY ($1::uuid[])
