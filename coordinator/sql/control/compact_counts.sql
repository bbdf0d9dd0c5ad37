-- Folds the counter deltas of run $1 into one row per key (migration 0015); false when
-- another session is folding the same run.
SELECT akbench_compact_run_counts($1) AS folded
