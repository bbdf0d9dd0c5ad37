-- The work items of trials whose live attempt ended, with their runs' states, for
-- core::dispatch::settle (`scheduler::apply`): the reaper's snapshot, and a fresh read for
-- the trials the apply statement did not settle because their item or run changed since
-- the batch's snapshot. $1 trial ids.
SELECT w.trial_id, w.state AS item_state, w.attempts_used, w.budget_from, w.retry_budget,
       w.run_id, w.agent, w.provider_route, r.state AS run_state
FROM work_items w
JOIN runs r ON r.run_id = w.run_id
WHERE w.trial_id = ANY ($1::uuid[])
