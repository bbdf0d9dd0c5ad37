-- Trials of a run with an outcome, by agent and accounting bucket: the done ones (an
-- index-only scan of work_items_outcomes; the scheduler stores each done trial's bucket when
-- it settles it and when the record of its last attempt arrives; NULL, a `completed` attempt
-- without its record yet, is not counted) and the ones cancelled before an attempt ran to
-- an end (bucket `cancelled`), as reconcile and the records export count them
-- (core::accounting::Coverage).
SELECT agent, bucket, count(*)::bigint AS n
FROM work_items
WHERE run_id = $1 AND state = 'done' AND bucket IS NOT NULL
GROUP BY agent, bucket
UNION ALL
SELECT agent, 'cancelled', count(*)::bigint
FROM work_items
WHERE run_id = $1 AND state = 'cancelled'
GROUP BY agent
