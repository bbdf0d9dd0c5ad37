-- Moves done trials to the buckets Rust decided (late_buckets.sql's rows, core's
-- `accounting::Bucket::settled`), each guarded by the bucket it was decided from, and writes
-- the counter deltas of the move (migration 0020: -1 from the old bucket, +1 to the new one).
-- $1 trial ids; $2 the buckets decided from (NULL: none yet); $3 the new buckets; $4 the item
-- state `done` (core's `ItemState::Done`).
WITH moved AS (
    UPDATE work_items w
    SET bucket = d.bucket_new
    FROM unnest($1::uuid[], $2::text[], $3::text[]) AS d (trial_id, bucket_old, bucket_new)
    -- The state is a parameter, so a generic plan cannot use the partial index
    -- `work_items_done_ordinal` (a plan made while it held few rows would walk all of it
    -- instead of looking the items up by key: tests/keyed_plans.rs).
    WHERE w.trial_id = d.trial_id AND w.state = $4::text::item_state
      AND w.bucket IS NOT DISTINCT FROM d.bucket_old
    RETURNING w.run_id, w.agent, d.bucket_old, w.bucket
)
INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
SELECT run_id, agent, 'items', 'done', b, sum(n)
FROM (
    SELECT run_id, agent, bucket_old AS b, -1::bigint AS n FROM moved
    UNION ALL
    SELECT run_id, agent, bucket, 1::bigint FROM moved
) d
GROUP BY run_id, agent, b
HAVING sum(n) <> 0
