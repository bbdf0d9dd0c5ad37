-- Live attempts per (run, agent, provider route). $1 run ids.
SELECT run_id, agent, provider_route, count(*) AS n
FROM work_items
WHERE run_id = ANY ($1::uuid[]) AND state = 'leased'
GROUP BY run_id, agent, provider_route
