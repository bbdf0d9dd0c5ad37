-- The done trials whose deciding attempt's record arrived after their finish was settled
-- ($1: the records' attempt ids, those insert_submissions.sql returned as `settled`; $2 the
-- item state `done`, core's `ItemState::Done`), locked,
-- with what their bucket is decided from: the attempt's terminal state and its record's
-- `ok`. Rust decides the bucket (core's `accounting::Bucket::settled`) and rebucket.sql
-- applies the moves.
SELECT w.trial_id, w.bucket, a.terminal_state, s.ok
FROM attempts a
JOIN submissions s ON s.attempt_id = a.attempt_id
JOIN work_items w ON w.trial_id = a.trial_id
WHERE a.attempt_id = ANY ($1::uuid[])
  -- The state is a parameter, so a generic plan cannot use the partial index
  -- `work_items_done_ordinal` (a plan made while it held few rows would walk all of it
  -- instead of looking the items up by key: tests/keyed_plans.rs).
  AND w.state = $2::text::item_state AND w.attempts_used = a.number
  AND a.finished_at IS NOT NULL
FOR UPDATE OF w
