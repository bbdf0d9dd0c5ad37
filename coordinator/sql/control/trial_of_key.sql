-- The planned trial with that key (`run/task/agent/repetition`), for the viewer. $1 key.
SELECT trial_id FROM planned_trials WHERE key = $1
