-- Creates the work items of a run in one statement, and counts them per agent (migration
-- 0015's `total` counters, written here since migration 0023). $1 run_id; $2..$8 parallel
-- arrays; $9 now, the scheduler's clock (the items are ready from then by the clock claims
-- compare with). Returns how many items it created (`created`).
WITH created AS (
    INSERT INTO work_items (trial_id, run_id, ordinal, retry_budget, agent, provider_route, kind,
                            document, ready_at)
    SELECT t.trial_id, $1, t.ordinal, t.retry_budget, t.agent, t.provider_route, t.kind,
           t.document, $9::timestamptz
    FROM unnest($2::uuid[], $3::int4[], $4::int4[], $5::text[], $6::text[], $7::text[],
                $8::jsonb[])
         AS t (trial_id, ordinal, retry_budget, agent, provider_route, kind, document)
    RETURNING run_id, agent
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', 'total', NULL, count(*)
    FROM created
    GROUP BY run_id, agent
)
SELECT count(*) AS created FROM created
