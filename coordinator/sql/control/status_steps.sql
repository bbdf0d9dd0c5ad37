-- The multi-step trials of run $1 as status counts them (core::report::steps, issue 46): per
-- done trial whose deciding attempt (its last finished one) has an accepted record with
-- steps, the trial's task and that record's steps (JSON text), in plan order. It starts from
-- the records with steps (partial index submissions_steps, migration 0037), so a run without
-- multi-step tasks reads no record. Trials of those tasks whose deciding attempt ran no step
-- are counted by status_step_trials.sql.
SELECT p.task_id AS task, (s.record -> 'steps')::text AS steps
FROM submissions s
JOIN deciding_attempts a ON a.attempt_id = s.attempt_id
JOIN work_items w ON w.trial_id = a.trial_id
JOIN planned_trials p ON p.trial_id = w.trial_id
WHERE s.record ? 'steps'
  AND w.run_id = $1
  AND w.state = 'done'
ORDER BY w.ordinal
