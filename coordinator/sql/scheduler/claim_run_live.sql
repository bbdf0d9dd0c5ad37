-- The live leases of each run among $1 (the partial index work_items_leased, bounded by the
-- live slots), for a claim whose division they decide (akbench_core::dispatch::share::
-- live_decides). A run holding none has no row.
SELECT run_id, count(*) AS live
FROM work_items
WHERE run_id = ANY ($1::uuid[]) AND state = 'leased'
GROUP BY run_id
