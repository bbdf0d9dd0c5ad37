-- Per agent of run $1, and in total (the row whose agent is NULL): among its done trials,
-- those whose deciding grade (the last finished attempt's) was made in the agent's
-- environment, those whose agent reached for a host the task did not declare in any attempt
-- and how many distinct such hosts, and the attempts a vouched grading fetch ended
-- `infrastructure_error` (migration 0035, core::report::network). It starts from the
-- records concerned (partial index submissions_network). Agents without one have no row.
WITH concerned AS (
    SELECT w.agent, w.trial_id, s.attempt_id, s.grade_shared, s.agent_undeclared,
           s.fetch_failed, s.record,
           d.attempt_id IS NOT NULL AS deciding
    FROM submissions s
    JOIN attempts a ON a.attempt_id = s.attempt_id
    JOIN work_items w ON w.trial_id = a.trial_id
    LEFT JOIN deciding_attempts d ON d.attempt_id = s.attempt_id
    WHERE (s.grade_shared OR s.agent_undeclared OR s.fetch_failed)
      AND w.run_id = $1
      AND w.state = 'done'
)
SELECT c.agent,
       count(DISTINCT c.trial_id) FILTER (WHERE c.grade_shared AND c.deciding)::bigint
           AS graded_shared,
       count(DISTINCT c.trial_id) FILTER (WHERE c.agent_undeclared)::bigint
           AS undeclared_trials,
       count(DISTINCT h.host)::bigint AS undeclared_hosts,
       count(DISTINCT c.attempt_id) FILTER (WHERE c.fetch_failed)::bigint
           AS fetch_failed_attempts
FROM concerned c
LEFT JOIN LATERAL jsonb_path_query(
    c.record, '$.agent_process.runtime.egress[*] ? (@.undeclared == true).host'
) AS h(host) ON c.agent_undeclared
GROUP BY GROUPING SETS ((c.agent), ())
ORDER BY c.agent NULLS LAST
