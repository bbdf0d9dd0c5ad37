-- Ready work of each run the claim chose, as many items as core gave the run
-- (akbench_core::dispatch::share::divide), each run's in plan order, skipping rows other
-- claimers hold. $1/$2 the runs and how many items of each (in the order core listed them);
-- $3 trial ids this transaction already chose or refused (still `ready` until the claim
-- creates their attempts); $4/$5 full (run, agent) pairs; $6/$7 full (run, provider route)
-- pairs; $8 the claiming worker when another worker may take the items it lost (then those
-- are skipped: core::dispatch::may_take), else NULL (a claim for several workers gets each
-- item's `lost_by` and gives it to another: scheduler/claim.rs); $9 now, the scheduler's clock
-- (readiness after a backoff and route pauses are decided by it). Placement (worker labels)
-- was decided per run by claim_contenders.sql.
SELECT c.trial_id, c.run_id, c.agent, c.provider_route, c.lost_by
FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS p (run_id, n, pos)
CROSS JOIN LATERAL (
    SELECT w.trial_id, w.run_id, w.agent, w.provider_route, w.ordinal, w.lost_by
    FROM work_items w
    WHERE w.run_id = p.run_id
      AND w.state = 'ready'
      AND w.ready_at <= $9::timestamptz
      AND NOT (w.trial_id = ANY ($3::uuid[]))
      AND (w.run_id, w.agent) NOT IN (SELECT * FROM unnest($4::uuid[], $5::text[]))
      AND (w.run_id, coalesce(w.provider_route, ''))
          NOT IN (SELECT * FROM unnest($6::uuid[], $7::text[]))
      -- A paused provider route (route_pauses, migration 0010) gets no new claims.
      AND (w.provider_route IS NULL OR NOT EXISTS (
            SELECT 1 FROM route_pauses rp
            WHERE rp.route = w.provider_route AND rp.paused_until > $9::timestamptz))
      AND ($8::text IS NULL OR w.lost_by IS NULL OR w.lost_by <> $8::text)
    ORDER BY w.ordinal
    LIMIT p.n
    FOR UPDATE SKIP LOCKED
) c
ORDER BY p.pos, c.ordinal
