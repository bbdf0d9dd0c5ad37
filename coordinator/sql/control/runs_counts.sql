-- The counters of the runs $1 (uuid[]) for the runs list, as `status_counts.sql` reads them
-- for one run (migration 0015; leased work items from work_items_leased), with the run id
-- and its agents (run_catalog.by_agent as text): O(runs x agents) rows, no trial scanned.
SELECT run_id, agent, kind, state, bucket,
       sum(n)::bigint AS n,
       sum(n_cost)::bigint AS n_cost,
       sum(input_tokens)::bigint AS input_tokens,
       sum(cached_input_tokens)::bigint AS cached_input_tokens,
       sum(output_tokens)::bigint AS output_tokens,
       sum(cost_usd)::float8 AS cost_usd,
       count(*)::bigint AS deltas
FROM run_counts
WHERE run_id = ANY ($1)
GROUP BY run_id, agent, kind, state, bucket
UNION ALL
SELECT run_id, agent, 'items', 'leased', NULL, count(*)::bigint, 0, NULL, NULL, NULL, NULL, 0
FROM work_items
WHERE run_id = ANY ($1) AND state = 'leased'
GROUP BY run_id, agent
