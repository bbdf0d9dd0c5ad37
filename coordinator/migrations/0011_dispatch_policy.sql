-- 0011_dispatch_policy: what core::dispatch needs from work items.
--
-- - budget_from: attempts_used when the trial's retry budget was last renewed (`run resume`
--   gives a trial whose infrastructure errors spent its budget a fresh one); the budget is
--   spent when attempts_used - budget_from > retry_budget.
-- - lost_by: the worker whose lease of the trial's last attempt was taken back (reaped, or
--   released when its session broke); a rescued trial does not go back to it while another
--   worker can take it.

ALTER TABLE work_items
    ADD COLUMN budget_from integer NOT NULL DEFAULT 0 CHECK (budget_from >= 0),
    ADD COLUMN lost_by text;
