-- Finished trials of a run by agent, terminal state of their last finished attempt and the
-- `ok` of that attempt's accepted record (NULL when it has none).
SELECT p.agent, f.terminal_state, f.ok, count(*)::bigint
FROM (
    SELECT DISTINCT ON (a.trial_id) a.trial_id, a.terminal_state, s.ok
    FROM work_items w
    JOIN attempts a ON a.trial_id = w.trial_id
    LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
    WHERE w.run_id = $1 AND w.state = 'done' AND a.finished_at IS NOT NULL
    ORDER BY a.trial_id, a.number DESC
) f
JOIN planned_trials p ON p.trial_id = f.trial_id
GROUP BY p.agent, f.terminal_state, f.ok
