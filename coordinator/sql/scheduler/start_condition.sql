-- What StartRun needs of a run's stored spec, without reading the rest (its task list
-- grows with the plan): the agent conditions and the execution policy, as text. $1 run_id.
SELECT document #>> '{condition,agents}' AS agents,
       document #>> '{condition,execution}' AS execution
FROM run_specs
WHERE run_id = $1
