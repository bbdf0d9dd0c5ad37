-- The bucket of done trials whose record arrived after their finish was settled ($1: the
-- records' attempt ids, those insert_submissions.sql returned as `late`), from the last
-- attempt and its record: the bucket trigger's expression (migration 0005). The bucket
-- trigger leaves these rows alone (their state and attempt stay; migration 0018); the
-- counter trigger moves their count from the old bucket to the new one.
UPDATE work_items w
SET bucket = akbench_bucket(a.terminal_state, s.ok)
FROM attempts a
JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE a.attempt_id = ANY ($1::uuid[])
  AND w.trial_id = a.trial_id AND w.state = 'done' AND w.attempts_used = a.number
  AND a.finished_at IS NOT NULL
  AND w.bucket IS DISTINCT FROM akbench_bucket(a.terminal_state, s.ok)
