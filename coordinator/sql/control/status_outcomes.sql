-- Finished trials of a run by agent and accounting bucket: an index-only scan of
-- work_items_outcomes. The scheduler stores each done trial's bucket when it settles it and
-- when the record of its last attempt arrives; NULL (a `completed` attempt without its
-- record yet) is not counted.
SELECT agent, bucket, count(*)::bigint
FROM work_items
WHERE run_id = $1 AND state = 'done' AND bucket IS NOT NULL
GROUP BY agent, bucket
