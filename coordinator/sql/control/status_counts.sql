-- The counters of run $1 (migration 0015, `run_counts`): its deltas summed per key, with
-- `deltas` the number of rows summed (status folds them when there are many), and, in the
-- same snapshot, its leased work items (the partial index work_items_leased, bounded by the
-- live slots) as the key ('items', 'leased'). Tokens and cost are NULL where no record
-- reported them.
SELECT agent, kind, state, bucket,
       sum(n)::bigint AS n,
       sum(n_cost)::bigint AS n_cost,
       sum(input_tokens)::bigint AS input_tokens,
       sum(cached_input_tokens)::bigint AS cached_input_tokens,
       sum(output_tokens)::bigint AS output_tokens,
       sum(cost_usd)::float8 AS cost_usd,
       count(*)::bigint AS deltas
FROM run_counts
WHERE run_id = $1
GROUP BY agent, kind, state, bucket
UNION ALL
SELECT agent, 'items', 'leased', NULL, count(*)::bigint, 0, NULL, NULL, NULL, NULL, 0
FROM work_items
WHERE run_id = $1 AND state = 'leased'
GROUP BY agent
