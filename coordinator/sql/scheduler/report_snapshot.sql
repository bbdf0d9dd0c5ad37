-- The snapshot a batch of reports is decided on, in one statement: the attempts it is about,
-- locked (attempts before leases before items), each with its work item (its live attempt
-- number, retry budget, agent and provider route) and its run's state, for
-- core::dispatch to decide acceptance and settlement (`scheduler::apply`). The work item and
-- run are read, not locked: the statement that applies the decisions (`apply_effects.sql`)
-- settles an item only if it is still leased by this attempt and its run still in the state
-- decided on, and the scheduler decides again, from a fresh read, for any it did not.
-- $1 attempt ids.
SELECT a.attempt_id, a.trial_id, a.number, a.epoch, a.fenced, a.state, a.last_seq,
       a.terminal_state, a.cause,
       w.state AS item_state, w.attempts_used, w.budget_from, w.retry_budget, w.run_id,
       w.agent, w.provider_route, r.state AS run_state
FROM attempts a
JOIN work_items w ON w.trial_id = a.trial_id
JOIN runs r ON r.run_id = w.run_id
WHERE a.attempt_id = ANY ($1::uuid[])
ORDER BY a.attempt_id
FOR UPDATE OF a
