-- The runs one claim divides its slots among (akbench_core::dispatch::share::divide): every
-- running run with ready work that the claiming worker may serve, with its stored caps
-- (priority and weight, concurrency caps, worker labels). Their live leases are counted apart
-- (claim_run_live.sql), only when they decide the division (share::live_decides). Ready
-- items still in backoff are not told apart here: a run whose ready items all wait yields
-- none and leaves the claim's next round.
--
-- The runs come from `runs` (the partial index runs_running, migration 0034: one entry per
-- running run), and each is probed once for a ready item, bounded by its run id. Only a
-- running run has ready items: a start moves the run to `running` in the transaction that
-- creates them, resume and grading re-open the run in the transaction that re-queues them,
-- and nothing is re-queued while a run is cancelling. So a claim never reads the index
-- entries of a run being started: until that start commits its run is `planned` in the
-- claim's snapshot. (A skip scan of the ready index did: each probe stepped over every entry
-- the start had inserted so far, uncommitted, and a claim made during a start of 1,000,000
-- trials took seconds; docs/performance-notebook.md, "Claims during a large start".)
-- $1 the claiming worker (placement: core::placement::eligible over runs.caps.worker_labels
-- and the labels the worker advertised).
SELECT r.run_id, r.caps
FROM runs r
WHERE r.state = 'running'
  AND EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.run_id AND w.state = 'ready')
  -- Every label the run requires (`key`: any value; `key=value`: that value) is one the
  -- claiming worker advertises.
  AND NOT EXISTS (
        SELECT 1
        FROM jsonb_array_elements_text(r.caps -> 'worker_labels') AS req (label)
        WHERE NOT coalesce((
                SELECT CASE WHEN strpos(req.label, '=') > 0
                            THEN w.labels ->> split_part(req.label, '=', 1)
                                 = substr(req.label, strpos(req.label, '=') + 1)
                            ELSE w.labels ? req.label END
                FROM workers w
                WHERE w.worker_id = $1::text), false))
ORDER BY r.run_id
