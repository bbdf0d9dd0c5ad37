-- The latest done trials of a run that did not succeed (graded and not solved, or ended
-- without a verdict; `not_graded` left out), newest first, each with the cause of its last
-- finished attempt (empty for a graded failure). $1 run id.
--
-- Its cost does not grow with the run: `fifth` walks the partial index work_items_done_at
-- backwards to the fifth such trial's end, and only trials ended at or after it (five, more
-- only on a tie) are joined to their keys and sorted by (end, key); the cause of the last
-- attempt is read for the five kept only. Sorting every failure of the run by its key took
-- 69 ms at 250,000 failures; reading the cause of every trial of a tie (hundreds when a
-- report round settles many at one instant) took ~20 ms (docs/performance-notebook.md, "Status at a
-- million").
WITH fifth AS (
    SELECT w.updated_at
    FROM work_items w
    WHERE w.run_id = $1 AND w.state = 'done' AND w.bucket IS NOT NULL
      AND w.bucket NOT IN ('succeeded', 'not_graded')
    ORDER BY w.updated_at DESC
    OFFSET 4 LIMIT 1
),
latest AS (
    SELECT p.key, w.trial_id, w.bucket, w.updated_at
    FROM work_items w
    JOIN planned_trials p ON p.trial_id = w.trial_id
    WHERE w.run_id = $1 AND w.state = 'done' AND w.bucket IS NOT NULL
      AND w.bucket NOT IN ('succeeded', 'not_graded')
      AND w.updated_at >= COALESCE((SELECT updated_at FROM fifth), '-infinity'::timestamptz)
    ORDER BY w.updated_at DESC, p.key
    LIMIT 5
)
SELECT l.key AS trial, l.bucket, COALESCE(a.cause, '') AS cause, l.updated_at AS at
FROM latest l
LEFT JOIN LATERAL (
    SELECT cause FROM attempts
    WHERE trial_id = l.trial_id AND finished_at IS NOT NULL
    ORDER BY number DESC LIMIT 1
) a ON true
ORDER BY l.updated_at DESC, l.key
