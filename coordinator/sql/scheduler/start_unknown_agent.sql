-- A planned trial of the run whose agent is not among the given labels (a damaged plan:
-- StartRun refuses it before it changes anything). $1 run_id; $2 agent labels.
SELECT key, agent
FROM planned_trials
WHERE run_id = $1 AND agent <> ALL ($2::text[])
LIMIT 1
