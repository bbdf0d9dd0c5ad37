-- What the counters of run $1 (migration 0015, `sql/control/status_counts.sql`) must say,
-- recomputed from the raw tables by full scans: work items per agent (total) and by state and
-- bucket, attempts beyond the first, and the spend of accepted records per trial summed per
-- agent (n: trials with a record, n_cost: of which a record reported a cost). The counters'
-- `state` is text (a count label: `total`, an item state, ''), so the item state is cast.
SELECT agent, 'items' AS kind, 'total' AS state, NULL::text AS bucket, count(*)::bigint AS n,
       0::bigint AS n_cost, NULL::bigint AS input_tokens, NULL::bigint AS cached_input_tokens,
       NULL::bigint AS output_tokens, NULL::float8 AS cost_usd
FROM work_items WHERE run_id = $1 GROUP BY agent
UNION ALL
SELECT agent, 'items', state::text, bucket, count(*)::bigint, 0, NULL, NULL, NULL, NULL
FROM work_items WHERE run_id = $1 AND state IN ('leased', 'done', 'cancelled')
GROUP BY agent, state, bucket
UNION ALL
SELECT w.agent, 'retries', '', NULL, count(*)::bigint, 0, NULL, NULL, NULL, NULL
FROM attempts a JOIN work_items w ON w.trial_id = a.trial_id
WHERE w.run_id = $1 AND a.number > 1
GROUP BY w.agent
UNION ALL
SELECT agent, 'spend', '', NULL, count(*)::bigint, count(cost_usd)::bigint,
       sum(input_tokens)::bigint, sum(cached_input_tokens)::bigint, sum(output_tokens)::bigint,
       sum(cost_usd)::float8
FROM (
    SELECT w.agent, w.trial_id,
           sum(s.input_tokens) AS input_tokens,
           sum(s.cached_input_tokens) AS cached_input_tokens,
           sum(s.output_tokens) AS output_tokens,
           sum(s.cost_usd::numeric) AS cost_usd
    FROM work_items w
    JOIN attempts a ON a.trial_id = w.trial_id
    JOIN submissions s ON s.attempt_id = a.attempt_id
    WHERE w.run_id = $1
    GROUP BY w.agent, w.trial_id
) per_trial
GROUP BY agent
