-- The runs among $1 that certainly stay open: each has a work item that is ready or leased
-- and that no other transaction is changing. One such item is share-locked (SKIP LOCKED:
-- never waits) until this transaction commits, so it stays ready or leased until then, and
-- whoever settles it later waits for this commit and decides the run after it (see
-- `finish_runs`). The last ready item in plan order is tried first (claimers take from the
-- front; settles do not wait for it), then a leased one. $1 run ids.
SELECT r.run_id
FROM unnest($1::uuid[]) AS r (run_id)
WHERE EXISTS (
          SELECT 1 FROM work_items w
          WHERE w.run_id = r.run_id AND w.state = 'ready'
          ORDER BY w.run_id DESC, w.ordinal DESC
          LIMIT 1
          FOR SHARE SKIP LOCKED
      )
   OR EXISTS (
          SELECT 1 FROM work_items w
          WHERE w.run_id = r.run_id AND w.state = 'leased'
          LIMIT 1
          FOR SHARE SKIP LOCKED
      )
