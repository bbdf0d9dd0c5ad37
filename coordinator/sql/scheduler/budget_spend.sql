-- The spend of the runs with an `execution.budget` among the runs $1: per run, over the
-- accepted records of its execute attempts, what core::budget::Spent counts (a cost or
-- token count a record did not report is counted as missing, never as 0), from the spend
-- columns of submissions (migration 0013). The runs with a budget are found first
-- (a materialized CTE, the outer side of the joins): a run without one costs a key lookup,
-- never a scan of its attempts (the generic plan used to join every attempt of the run
-- before filtering on the budget: ~10 ms per report at 8,000 attempts).
WITH budgeted AS MATERIALIZED (
    SELECT s.run_id, (s.document #> '{condition,execution,budget}')::text AS budget
    FROM run_specs s
    WHERE s.run_id = ANY ($1::uuid[])
      AND s.document #> '{condition,execution,budget}' IS NOT NULL
)
SELECT b.run_id,
       b.budget,
       count(s.attempt_id)::bigint AS attempts,
       coalesce(sum(s.cost_usd), 0)::float8 AS cost_usd,
       count(s.attempt_id) FILTER (WHERE s.cost_usd IS NULL)::bigint AS without_cost,
       coalesce(sum(coalesce(s.input_tokens, 0) + coalesce(s.output_tokens, 0)), 0)::bigint AS tokens,
       count(s.attempt_id) FILTER (
           WHERE s.input_tokens IS NULL AND s.output_tokens IS NULL)::bigint AS without_tokens
FROM budgeted b
JOIN work_items w ON w.run_id = b.run_id
LEFT JOIN attempts a ON a.trial_id = w.trial_id AND a.kind = 'execute'
LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
GROUP BY b.run_id, b.budget
