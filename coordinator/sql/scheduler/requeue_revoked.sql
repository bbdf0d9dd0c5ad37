-- The work items of revoked unstarted attempts ($1 trial ids) go back to `ready`, the attempt
-- given back to their retry budget (budget_from + 1): it never ran. A budget stop then
-- cancels them with its ready items (budget_cancel.sql); a paused route's wait for its pause
-- to end (claim_candidates.sql skips paused routes). $2 now, the scheduler's clock (ready
-- at once: docs/testing.md, "Clocks"); $3 the item state a revoke moves from and $4 the one
-- it moves to (core's item machine, `ItemEvent::Revoke`).
UPDATE work_items
SET state = $4::text::item_state, budget_from = budget_from + 1, ready_at = $2, updated_at = now()
-- The state guard is a parameter, so a generic plan cannot use the partial index
-- `work_items_leased` (a plan made while it held few rows would walk all of it instead of
-- looking the items up by key: tests/keyed_plans.rs).
WHERE trial_id = ANY ($1::uuid[]) AND state = $3::text::item_state
