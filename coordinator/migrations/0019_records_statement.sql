-- 0019_records_statement: a stored batch of records runs no trigger. Its work is done by the
-- one statement that stores records (`sql/scheduler/insert_submissions.sql`, called by
-- `scheduler::store_records`, the only writer of `submissions`):
--
-- - the spend deltas (migration 0015's `spend` rows of run_counts, the same per (run, agent)
--   as 0016's trigger) are a data-modifying CTE of that statement, whose snapshot does not
--   see the records it stores: "no accepted record outside the statement" needs no
--   exclusion list any more;
-- - the bucket of a done trial whose record arrives after its finish was settled is set by
--   `sql/scheduler/late_buckets.sql`, run only for the records that statement returns as
--   late (on the dispatch path records come before the settle, so it never runs);
-- - a record's attempt is checked by the plain foreign key again (one keyed RI check per
--   record, about 5 us, instead of a PL/pgSQL call per batch, about 160 us beyond its
--   queries: docs/PERFORMANCE.md "Coordinator dispatch").
DROP TRIGGER submissions_inserted ON submissions;
DROP FUNCTION akbench_submissions_inserted();

ALTER TABLE submissions
    ADD CONSTRAINT submissions_attempt_id_fkey FOREIGN KEY (attempt_id)
        REFERENCES attempts (attempt_id);
