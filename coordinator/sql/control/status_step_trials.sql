-- The done trials of run $1 per task among the tasks $2 (its multi-step tasks, found by
-- status_steps.sql): what core::report::steps counts as each task's trials, those whose
-- deciding attempt ran no step (an infrastructure error before the first) included. Status
-- runs it only for a run with multi-step trials.
SELECT p.task_id AS task, count(*)::bigint AS trials
FROM work_items w
JOIN planned_trials p ON p.trial_id = w.trial_id
WHERE w.run_id = $1
  AND w.state = 'done'
  AND p.task_id = ANY ($2::text[])
GROUP BY p.task_id
