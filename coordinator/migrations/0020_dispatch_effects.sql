-- 0020_dispatch_effects: no trigger keeps the work items' counters or buckets. The statement
-- that changes a work item's state or bucket writes the counter deltas of what it changed
-- (migration 0015's `items` rows of run_counts) and the bucket it decides:
--
-- - `work_items_run_counts_update` (migration 0016, statement-level, fired by every UPDATE of
--   work_items, claims included, with both transition tables captured) is dropped. Its deltas
--   are written by:
--   - `sql/scheduler/apply_effects.sql`: the settles of the report path, the reaper and a
--     released worker's leases (leased -> done, with the bucket core decides:
--     `accounting::Bucket::settled`; leased -> ready writes nothing);
--   - `sql/scheduler/late_buckets.sql`: a done trial whose record arrived after its settle
--     moves from its old bucket to the new one;
--   - `sql/scheduler/resume_items.sql` and `sql/grading/requeue.sql`: done or cancelled items
--     back to ready leave their key;
--   - `sql/scheduler/cancel_run.sql` and `sql/scheduler/budget_cancel.sql`: ready items made
--     cancelled enter ('cancelled', no bucket).
--   Claims (ready -> leased), revocations (leased -> ready), mark_lost and the scheduler's
--   other updates change no count and write none. Inserts keep 0015's statement-level
--   trigger (enqueue and start, off the dispatch path).
-- - `work_items_bucket` (migration 0005, narrowed in 0018) is dropped: the settle writes the
--   bucket of the items it makes done (it already did, 0018), `late_buckets.sql` the bucket
--   of a late record's trial, and the writers that move an item out of done
--   (`resume_items.sql`, `grading/requeue.sql`) clear it. `akbench_bucket` stays for
--   `late_buckets.sql` and `insert_submissions.sql`.
--
-- Nothing else writes work_items: tests and benches that set up rows by hand write their
-- counters the same way (`scheduler::test_support::finish_trial`). `coordinator/tests/
-- run_counts.rs` recounts the counters against the rows through accept, retry, fence,
-- cancel, resume and a late record.
DROP TRIGGER work_items_run_counts_update ON work_items;
DROP FUNCTION akbench_run_counts_items_updated();
DROP TRIGGER work_items_bucket ON work_items;
DROP FUNCTION akbench_work_item_bucket();
