-- 0023_rules_in_rust: the last dispatch rules and counters that ran inside the database move
-- to Rust and to the statements that change what they count (issue 28: decide in Rust,
-- apply in SQL; counters written by the statement that changes what they count).
--
-- - `akbench_bucket(terminal, ok)` (migration 0005), the SQL copy of core's
--   `accounting::Bucket::settled`, is dropped. Its last users decide in Rust now: a record
--   that arrives after its trial was settled is found by `insert_submissions.sql`
--   (`settled`), its trial locked with what the bucket is decided from
--   (`late_buckets.sql`), the bucket decided by `Bucket::settled` and applied, guarded by
--   the bucket it was decided from, with its counter deltas (`rebucket.sql`).
-- - `attempts_run_counts` (migration 0015, a row trigger counting retries: attempts beyond
--   the first of their trial) is dropped: the claim that creates the attempts counts them
--   (`claim_create.sql`, `retried`). No other statement creates attempts.
-- - `work_items_run_counts_insert` (migration 0015, counting work items inserted done or
--   cancelled) is dropped: every statement that creates work items (`start_items.sql`,
--   `enqueue.sql`) creates them ready, which no counter counts.
-- - A run's end is decided in Rust (core's `RunState::when_idle` over the locked run's state,
--   `finish_runs.sql` / `end_runs.sql`); no schema change.
--
-- What stays in the database is integrity, not policy: append-only evidence, the foreign
-- keys kept as statement triggers, and `work_items_agent` (a work item inserted without its
-- agent takes its planned trial's: a column default that needs a lookup).
DROP TRIGGER attempts_run_counts ON attempts;
DROP FUNCTION akbench_run_counts_retry();
DROP TRIGGER work_items_run_counts_insert ON work_items;
DROP FUNCTION akbench_run_counts_items_inserted();
DROP FUNCTION akbench_bucket(text, boolean);
