-- Creates the execute work items of a run being started, in one statement, from its planned
-- trials (migration 0014): the run's agent conditions are stored once in `run_agents`, and
-- each item gets its trial's ordinal, agent and infrastructure retry budget (the planned
-- trial's `retries` column, written at submit since migration 0025, or for a trial stored
-- before it its document's `attempt.infrastructure_retries`; a trial without one is a
-- damaged plan, refused by the NOT NULL of `retry_budget`) and its agent's provider route, with no document of
-- its own (readers compose it: see `claim_create.sql`). Runs in the transaction that moves
-- the run to `running` (`start_run.sql`). Every planned trial's agent must be among $2
-- (checked first: `start_unknown_agent.sql`).
-- $1 run_id; $2 agent labels; $3 their provider routes; $4 their documents (core's SpecAgent);
-- $5 now, the scheduler's clock (the items are ready from then by the clock claims compare
-- with). Returns how many items it created (`created`), counted per agent.
WITH agents AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::jsonb[]) AS a (agent, provider_route, document)
), stored AS (
    INSERT INTO run_agents (run_id, agent, document)
    SELECT $1, agent, document FROM agents
), created AS (
    INSERT INTO work_items (trial_id, run_id, ordinal, retry_budget, agent, provider_route, kind,
                            ready_at)
    SELECT p.trial_id, p.run_id, p.ordinal,
           COALESCE(p.retries,
                    LEAST((p.document::json -> 'attempt' ->> 'infrastructure_retries')::bigint,
                          2147483647)::int4),
           p.agent, a.provider_route, 'execute', $5::timestamptz
    FROM planned_trials p
    JOIN agents a ON a.agent = p.agent
    WHERE p.run_id = $1
    RETURNING run_id, agent
), counted AS (
    -- The run's items per agent (migration 0015's `total` counters, written here since
    -- migration 0023).
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', 'total', NULL, count(*)
    FROM created
    GROUP BY run_id, agent
)
SELECT count(*) AS created FROM created
