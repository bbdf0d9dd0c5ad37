-- The coordinator's own outcome of each trial of a run: its last finished attempt, with the
-- outcome of that attempt's accepted record when there is one.
SELECT DISTINCT ON (w.ordinal)
       w.trial_id, a.attempt_id, a.terminal_state,
       COALESCE(s.record -> 'outcome' ->> 'state', s.record ->> 'state'), s.ok,
       COALESCE(s.record -> 'outcome' ->> 'score', s.record -> 'grade' ->> 'score')::float8
FROM work_items w
JOIN attempts a ON a.trial_id = w.trial_id
LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND a.finished_at IS NOT NULL
ORDER BY w.ordinal, a.number DESC
