-- Creates the work items of a run in one statement. $1 run_id; $2..$8 parallel arrays; $9 now,
-- the scheduler's clock (the items are ready from then by the clock claims compare with).
INSERT INTO work_items (trial_id, run_id, ordinal, retry_budget, agent, provider_route, kind,
                        document, ready_at)
SELECT t.trial_id, $1, t.ordinal, t.retry_budget, t.agent, t.provider_route, t.kind, t.document,
       $9::timestamptz
FROM unnest($2::uuid[], $3::int4[], $4::int4[], $5::text[], $6::text[], $7::text[],
            $8::jsonb[])
     AS t (trial_id, ordinal, retry_budget, agent, provider_route, kind, document)
