-- 0026_submit_without_capture: storing a plan's trials captures nothing beside the rows.
--
-- Migration 0005 replaced the foreign key planned_trials.run_id -> run_specs by a
-- statement-level trigger (`planned_trials_run_exists`) reading a transition table of the
-- inserted rows. PostgreSQL captures whole rows into a transition table, although the
-- check reads only `run_id`: at 1,000,000 trials (~1 KB each) the submit's COPY wrote 930 MB
-- of temporary files for it and read them back (docs/PERFORMANCE.md, "A million trials").
--
-- The check is now the submit's own, by construction: planned trials are written only by
-- the submit (`SubmitPlan` and `SubmitPlanStream`, coordinator/src/evidence*.rs), in the
-- transaction that first inserts the run's `run_specs` row (`sql/control/insert_spec.sql`,
-- a plain INSERT: a spec already stored makes the submit compare, never copy) and then
-- copies the trials with that row's run_id. run_specs rows are never updated, deleted or
-- truncated (append-only, migration 0001), nor are planned trials, so a trial's run spec
-- exists for as long as the trial does. No trigger, no per-row or per-statement work.
DROP TRIGGER planned_trials_run_exists ON planned_trials;
DROP FUNCTION akbench_planned_trials_run_exists();
