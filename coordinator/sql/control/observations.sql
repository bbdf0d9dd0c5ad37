-- The coordinator's own outcome of each trial of a run: its last finished attempt, with the
-- outcome of that attempt's accepted record when there is one; a trial cancelled before an
-- attempt ran to an end (never started, or waiting for a retry) is `cancelled`, whatever an
-- earlier attempt ended in (as status and the records export count it). In plan order.
SELECT DISTINCT ON (w.ordinal)
       w.ordinal, w.trial_id, a.attempt_id,
       CASE WHEN w.state = 'cancelled' THEN 'cancelled' ELSE a.terminal_state END AS terminal,
       CASE WHEN w.state <> 'cancelled'
            THEN COALESCE(s.record -> 'outcome' ->> 'state', s.record ->> 'state') END
         AS record_state,
       CASE WHEN w.state <> 'cancelled' THEN s.ok END AS ok,
       CASE WHEN w.state <> 'cancelled'
            THEN COALESCE(s.record -> 'outcome' ->> 'score', s.record -> 'grade' ->> 'score')::float8
       END AS score
FROM work_items w
LEFT JOIN attempts a ON a.trial_id = w.trial_id AND a.finished_at IS NOT NULL
LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND (a.attempt_id IS NOT NULL OR w.state = 'cancelled')
ORDER BY w.ordinal, a.number DESC NULLS LAST
