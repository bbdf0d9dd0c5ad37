-- The running runs the queue-depth gauge reports, each with its key and, per agent stored with
-- the run (`run_agents`, migration 0014: StartRun's agents), that agent's provider route
-- (`SpecAgent.provider_route` in its document; '' when none). A run whose items were enqueued
-- without StartRun has no `run_agents` row: one row with a NULL agent, its items counted under
-- route ''.
SELECT r.run_id, s.run_key, ra.agent,
       coalesce(ra.document ->> 'provider_route', '') AS route
FROM runs r
JOIN run_specs s ON s.run_id = r.run_id
LEFT JOIN run_agents ra ON ra.run_id = r.run_id
WHERE r.state = 'running'
ORDER BY r.run_id, ra.agent
