-- The coordinator's own outcome of each trial of a run: its last finished attempt, with the
-- outcome of that attempt's accepted record when there is one; a trial cancelled while still
-- queued (no attempt ever ran) is `cancelled`.
SELECT DISTINCT ON (w.ordinal)
       w.trial_id, a.attempt_id, COALESCE(a.terminal_state, w.outcome),
       COALESCE(s.record -> 'outcome' ->> 'state', s.record ->> 'state'), s.ok,
       COALESCE(s.record -> 'outcome' ->> 'score', s.record -> 'grade' ->> 'score')::float8
FROM work_items w
LEFT JOIN attempts a ON a.trial_id = w.trial_id AND a.finished_at IS NOT NULL
LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND (a.attempt_id IS NOT NULL OR w.state = 'cancelled')
ORDER BY w.ordinal, a.number DESC NULLS LAST
