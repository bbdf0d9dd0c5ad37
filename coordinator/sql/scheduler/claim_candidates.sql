-- Ready work in plan order, skipping rows other claimers hold. $1 limit; $2 trial ids
-- already refused in this transaction; $3/$4 full (run, agent) pairs; $5/$6 full
-- (run, provider route) pairs; $7 full runs; $8 the claiming worker when another worker may
-- take the items it lost (then those are skipped: core::dispatch::may_take), else NULL;
-- $9 the claiming worker (placement: core::placement::eligible over runs.caps.worker_labels
-- and the labels the worker advertised); $10 now, the scheduler's clock (readiness after a
-- backoff and route pauses are decided by it).
SELECT trial_id, run_id, agent, provider_route
FROM work_items
WHERE state = 'ready'
  AND ready_at <= $10::timestamptz
  AND NOT (trial_id = ANY ($2::uuid[]))
  AND (run_id, agent) NOT IN (SELECT * FROM unnest($3::uuid[], $4::text[]))
  AND (run_id, coalesce(provider_route, '')) NOT IN (SELECT * FROM unnest($5::uuid[], $6::text[]))
  AND NOT (run_id = ANY ($7::uuid[]))
  -- A paused provider route (route_pauses, migration 0010) gets no new claims.
  AND (provider_route IS NULL OR NOT EXISTS (
        SELECT 1 FROM route_pauses p
        WHERE p.route = work_items.provider_route AND p.paused_until > $10::timestamptz))
  AND ($8::text IS NULL OR lost_by IS NULL OR lost_by <> $8::text)
  -- Every label the run requires (`key`: any value; `key=value`: that value) is one the
  -- claiming worker advertises.
  AND NOT EXISTS (
        SELECT 1
        FROM runs r, jsonb_array_elements_text(r.caps -> 'worker_labels') AS req (label)
        WHERE r.run_id = work_items.run_id
          AND NOT coalesce((
                SELECT CASE WHEN strpos(req.label, '=') > 0
                            THEN w.labels ->> split_part(req.label, '=', 1)
                                 = substr(req.label, strpos(req.label, '=') + 1)
                            ELSE w.labels ? req.label END
                FROM workers w
                WHERE w.worker_id = $9::text), false))
ORDER BY run_id, ordinal
FOR UPDATE SKIP LOCKED
LIMIT $1
