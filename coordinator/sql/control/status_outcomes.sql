-- Finished trials of a run by agent, terminal state of their last attempt (number =
-- attempts_used, found through the unique index on (trial_id, number), no sort) and the `ok`
-- of that attempt's accepted record (NULL when it has none).
SELECT p.agent, a.terminal_state, s.ok, count(*)::bigint
FROM work_items w
JOIN attempts a ON a.trial_id = w.trial_id AND a.number = w.attempts_used
JOIN planned_trials p ON p.trial_id = w.trial_id
LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND w.state = 'done' AND a.finished_at IS NOT NULL
GROUP BY p.agent, a.terminal_state, s.ok
