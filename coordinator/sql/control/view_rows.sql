-- One compact row per done trial of a run, in plan order, a page at a time: what the viewer
-- aggregates or shows for a run page (never whole records). The trial's ordinal (the page's
-- cursor) and key, agent and accounting bucket; its last finished attempt's terminal state
-- and cause; its finished attempts; the score in that attempt's accepted record; tokens and
-- cost summed over the accepted records of its attempts (the submissions' spend columns of
-- migration 0013, NULL where no record reported them); wall time from its first attempt's
-- start to its last one's end; whether that record's grade was flagged tampered or withheld
-- paths (migration 0021's columns). Only the score is read out of a record (one per trial).
--
-- Keyset paging: the done trials with an ordinal above $2 (-1: from the first), at most $3
-- of them (NULL: all), read through the partial index work_items_done_ordinal (migration
-- 0027), so a page costs its own rows at any run size. $1 run id, $2 after (bigint),
-- $3 limit (bigint).
--
-- $4 (bigint, milliseconds since the epoch; NULL: any): only the trials whose work item was
-- made done at or after it (`updated_at`, stamped when the settling transaction began),
-- read through the partial index work_items_done_at (migration 0003): a poll for what ended
-- since costs those rows, not the run's. Each row says when it ended (`ended_unix_ms`,
-- rounded down), the bound of the next poll.
WITH t AS (
    SELECT w.trial_id, w.ordinal, p.key, w.agent, w.bucket, w.updated_at
    FROM work_items w
    JOIN planned_trials p ON p.trial_id = w.trial_id
    WHERE w.run_id = $1 AND w.state = 'done' AND w.bucket IS NOT NULL
      AND w.ordinal > $2::bigint
      AND ($4::bigint IS NULL OR w.updated_at >= 'epoch'::timestamptz + $4::bigint * interval '1 millisecond')
    ORDER BY w.ordinal
    LIMIT $3::bigint
), a AS (
    SELECT a.trial_id,
           min(a.started_at) AS started_at,
           max(a.finished_at) AS finished_at,
           count(*) AS attempts,
           (array_agg(a.attempt_id ORDER BY a.number DESC))[1] AS last_id,
           (array_agg(a.terminal_state ORDER BY a.number DESC))[1] AS terminal,
           (array_agg(a.cause ORDER BY a.number DESC))[1] AS cause,
           sum(s.input_tokens) AS input_tokens,
           sum(s.cached_input_tokens) AS cached_input_tokens,
           sum(s.output_tokens) AS output_tokens,
           sum(s.cost_usd) AS cost_usd
    FROM t
    JOIN attempts a ON a.trial_id = t.trial_id AND a.finished_at IS NOT NULL
    LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
    GROUP BY a.trial_id
)
SELECT t.ordinal::bigint AS ordinal, t.key, t.agent, t.bucket, a.terminal, a.cause,
       a.attempts::bigint AS attempts,
       (ls.record #>> '{grade,score}')::float8 AS score,
       a.input_tokens::bigint AS input_tokens,
       a.cached_input_tokens::bigint AS cached_input_tokens,
       a.output_tokens::bigint AS output_tokens,
       a.cost_usd,
       (extract(epoch FROM a.finished_at - a.started_at) * 1000)::bigint AS duration_ms,
       COALESCE(ls.grade_tampered, false) AS tampered,
       COALESCE(ls.grade_withheld, false) AS withheld,
       COALESCE(ls.grade_unguarded, false) AS unguarded,
       floor(extract(epoch FROM t.updated_at) * 1000)::bigint AS ended_unix_ms
FROM t
JOIN a ON a.trial_id = t.trial_id
LEFT JOIN submissions ls ON ls.attempt_id = a.last_id
ORDER BY t.ordinal
