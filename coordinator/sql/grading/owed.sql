-- The trials of a run owed a grade, locked: done, and their deciding attempt (number =
-- attempts_used) ran the agent and ended `not_graded` with an accepted record. Trials that
-- have a verdict, ended any other way (failed, timeout, cancelled, infrastructure or
-- configuration errors: the agent never finished or never ran) or are not done are never
-- selected. $1 run id.
SELECT w.trial_id, w.document::text, s.record::text
FROM work_items w
JOIN attempts a ON a.trial_id = w.trial_id AND a.number = w.attempts_used
JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND w.state = 'done' AND a.terminal_state = 'not_graded'
ORDER BY w.ordinal
FOR UPDATE OF w
