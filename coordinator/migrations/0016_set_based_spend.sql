-- 0016_set_based_spend: the spend counters of accepted records (migration 0015) in one
-- statement per insert, instead of a PL/pgSQL loop running three queries per record.
--
-- Same deltas as before, per (run, agent) of the statement:
-- - n: trials of the statement that had no accepted record outside it;
-- - n_cost: trials of the statement with a record reporting a cost, that had no such record
--   outside it;
-- - input_tokens .. cost_usd: the sums over the statement's records (NULL where none
--   reported the value; sum() skips NULLs as the loop's unnest did).
-- On the dispatch path each report batch stores about 8 records: the loop cost ~1.2 ms of
-- PostgreSQL time per batch (the most expensive statement of the dispatch benchmark).
CREATE OR REPLACE FUNCTION akbench_run_counts_spend() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_counts (run_id, agent, kind, n, n_cost, input_tokens, cached_input_tokens,
                            output_tokens, cost_usd)
    SELECT t.run_id, t.agent, 'spend', sum(t.first), sum(t.first_cost), sum(t.i), sum(t.ci),
           sum(t.o), sum(t.c)
    FROM (
        SELECT w.run_id, w.agent,
               CASE WHEN EXISTS (
                        SELECT 1 FROM attempts o
                        JOIN submissions os ON os.attempt_id = o.attempt_id
                        WHERE o.trial_id = a.trial_id
                          AND NOT EXISTS (SELECT 1 FROM inserted x
                                          WHERE x.attempt_id = o.attempt_id))
                    THEN 0::bigint ELSE 1::bigint END AS first,
               CASE WHEN bool_or(s.cost_usd IS NOT NULL) AND NOT EXISTS (
                        SELECT 1 FROM attempts o
                        JOIN submissions os ON os.attempt_id = o.attempt_id
                        WHERE o.trial_id = a.trial_id AND os.cost_usd IS NOT NULL
                          AND NOT EXISTS (SELECT 1 FROM inserted x
                                          WHERE x.attempt_id = o.attempt_id))
                    THEN 1::bigint ELSE 0::bigint END AS first_cost,
               sum(s.input_tokens) AS i, sum(s.cached_input_tokens) AS ci,
               sum(s.output_tokens) AS o, sum(s.cost_usd::numeric) AS c
        FROM inserted s
        JOIN attempts a ON a.attempt_id = s.attempt_id
        JOIN work_items w ON w.trial_id = a.trial_id
        GROUP BY w.run_id, w.agent, a.trial_id
    ) t
    GROUP BY t.run_id, t.agent;
    RETURN NULL;
END
$$;
