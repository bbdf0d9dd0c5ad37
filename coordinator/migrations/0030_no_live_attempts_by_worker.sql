-- 0030_no_live_attempts_by_worker: drops attempts_live_by_worker, an index no statement reads.
--
-- It was made with the first schema (0001) for "the live attempts of a worker"; every such
-- question now goes through the worker's leases (`leases_worker`: release_worker.sql,
-- revoke_unstarted.sql, live_attempts_of_run.sql, the metrics snapshot), and an attempt's
-- worker is read only by key (trial_attempts.sql). Each claimed attempt paid one entry in it
-- (one of 18 b-tree entries per attempt on the dispatch path, docs/PERFORMANCE.md
-- "References checked per statement").
DROP INDEX attempts_live_by_worker;
