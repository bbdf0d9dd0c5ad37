-- Tokens and cost per agent: per trial, the sum over the accepted records (submissions) of
-- its attempts; per agent, the sum over its trials. A value no record reported stays NULL
-- (never 0); `without_cost` counts the trials that reported no cost. The spend columns of
-- submissions are computed from the record when it is stored (migration 0013). $1 run id.
WITH per_trial AS (
    SELECT w.agent,
           sum(s.input_tokens) AS input_tokens,
           sum(s.cached_input_tokens) AS cached_input_tokens,
           sum(s.output_tokens) AS output_tokens,
           sum(s.cost_usd) AS cost_usd
    FROM work_items w
    JOIN attempts a ON a.trial_id = w.trial_id
    JOIN submissions s ON s.attempt_id = a.attempt_id
    WHERE w.run_id = $1
    GROUP BY w.agent, w.trial_id
)
SELECT agent,
       sum(input_tokens)::bigint AS input_tokens,
       sum(cached_input_tokens)::bigint AS cached_input_tokens,
       sum(output_tokens)::bigint AS output_tokens,
       sum(cost_usd) AS cost_usd,
       count(*) FILTER (WHERE cost_usd IS NULL)::bigint AS without_cost
FROM per_trial
GROUP BY agent
