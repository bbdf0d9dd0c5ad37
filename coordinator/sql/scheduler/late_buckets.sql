-- The bucket of done trials whose record arrived after their finish was settled ($1: the
-- records' attempt ids, those insert_submissions.sql returned as `late`), from the last
-- attempt and its record (`akbench_bucket`, core's accounting::Bucket::settled), and the
-- counter deltas of the move (migration 0020: -1 from the old bucket, +1 to the new one).
-- The old bucket is read from the rows locked first.
WITH old AS (
    SELECT w.trial_id, w.bucket, akbench_bucket(a.terminal_state, s.ok) AS bucket_new
    FROM attempts a
    JOIN submissions s ON s.attempt_id = a.attempt_id
    JOIN work_items w ON w.trial_id = a.trial_id
    WHERE a.attempt_id = ANY ($1::uuid[])
      AND w.state = 'done' AND w.attempts_used = a.number
      AND a.finished_at IS NOT NULL
    FOR UPDATE OF w
), moved AS (
    UPDATE work_items w
    SET bucket = o.bucket_new
    FROM old o
    WHERE w.trial_id = o.trial_id AND w.bucket IS DISTINCT FROM o.bucket_new
    RETURNING w.run_id, w.agent, o.bucket AS bucket_old, w.bucket
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
