-- Puts done trials back in the queue as grade work: their document names the attempt to
-- grade; the retry budget is the plan's again (grading has its own infrastructure retries).
-- The bucket trigger clears their bucket until the grade decides it. $1 run id; $2 trial
-- ids; $3 grade work documents; $4 retry budgets; $5 now, the scheduler's clock (ready at
-- once by the clock claims compare with).
UPDATE work_items w
SET kind = 'grade', state = 'ready', document = t.document, retry_budget = t.budget,
    ready_at = $5::timestamptz, updated_at = now()
FROM unnest($2::uuid[], $3::jsonb[], $4::int4[]) AS t (trial_id, document, budget)
WHERE w.trial_id = t.trial_id AND w.run_id = $1 AND w.state = 'done'
