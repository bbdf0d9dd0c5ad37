-- Stores accepted records and counts their spend, in one statement (migration 0019).
-- $1 attempt ids; $2 digests; $3 records (JSON text).
--
-- Spend (migration 0015's `spend` rows of run_counts), per (run, agent) of the stored
-- records: `n` trials with no accepted record before this statement; `n_cost` trials with a
-- stored record reporting a cost and no such record before; the sums of the stored records'
-- tokens and costs (NULL where none reported the value). The statement's snapshot does not
-- see the rows `stored` inserts, so "before this statement" is what `submissions` shows.
--
-- Returns per stored record its attempt, its run (for the budget check), its `ok` (the bucket
-- of a trial the same batch settles) and `settled`: its trial is already done by this
-- attempt (the record came after the finish was settled); the caller loads those with
-- late_buckets.sql, decides their bucket in Rust and applies it with rebucket.sql.
WITH stored AS (
    INSERT INTO submissions (attempt_id, digest, record)
    SELECT a, d, r::jsonb FROM unnest($1::uuid[], $2::text[], $3::text[]) AS u (a, d, r)
    RETURNING attempt_id, ok, input_tokens, cached_input_tokens, output_tokens, cost_usd
), mine AS (
    SELECT s.attempt_id, s.ok, s.input_tokens, s.cached_input_tokens, s.output_tokens,
           s.cost_usd, a.trial_id, w.run_id, w.agent,
           w.state = 'done' AND w.attempts_used = a.number AND a.finished_at IS NOT NULL
           AS settled
    FROM stored s
    JOIN attempts a ON a.attempt_id = s.attempt_id
    JOIN work_items w ON w.trial_id = a.trial_id
), spend AS (
    INSERT INTO run_counts (run_id, agent, kind, n, n_cost, input_tokens, cached_input_tokens,
                            output_tokens, cost_usd)
    SELECT t.run_id, t.agent, 'spend', sum(t.first), sum(t.first_cost), sum(t.i), sum(t.ci),
           sum(t.o), sum(t.c)
    FROM (
        SELECT m.run_id, m.agent,
               CASE WHEN EXISTS (
                        SELECT 1 FROM attempts o
                        JOIN submissions os ON os.attempt_id = o.attempt_id
                        WHERE o.trial_id = m.trial_id)
                    THEN 0::bigint ELSE 1::bigint END AS first,
               CASE WHEN bool_or(m.cost_usd IS NOT NULL) AND NOT EXISTS (
                        SELECT 1 FROM attempts o
                        JOIN submissions os ON os.attempt_id = o.attempt_id
                        WHERE o.trial_id = m.trial_id AND os.cost_usd IS NOT NULL)
                    THEN 1::bigint ELSE 0::bigint END AS first_cost,
               sum(m.input_tokens) AS i, sum(m.cached_input_tokens) AS ci,
               sum(m.output_tokens) AS o, sum(m.cost_usd::numeric) AS c
        FROM mine m
        GROUP BY m.run_id, m.agent, m.trial_id
    ) t
    GROUP BY t.run_id, t.agent
)
SELECT m.attempt_id, m.run_id, m.settled, m.ok FROM mine m
