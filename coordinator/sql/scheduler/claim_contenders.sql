-- The runs one claim divides its slots among (akbench_core::dispatch::share::divide): every
-- run with ready work, found by a skip scan of the ready index (one probe per run, however
-- many items wait), that the claiming worker may serve, with its stored caps (priority and
-- weight, concurrency caps, worker labels). Their live leases are counted apart
-- (claim_run_live.sql), only when they decide the division (share::live_decides). Ready
-- items still in backoff are not told apart here: a run whose ready items all wait yields
-- none and leaves the claim's next round.
-- $1 the claiming worker (placement: core::placement::eligible over runs.caps.worker_labels
-- and the labels the worker advertised).
WITH RECURSIVE ready (run_id) AS (
    (SELECT w.run_id FROM work_items w WHERE w.state = 'ready' ORDER BY w.run_id LIMIT 1)
    UNION ALL
    SELECT (SELECT w.run_id FROM work_items w
             WHERE w.state = 'ready' AND w.run_id > ready.run_id
             ORDER BY w.run_id LIMIT 1)
    FROM ready
    WHERE ready.run_id IS NOT NULL
)
SELECT r.run_id, r.caps
FROM ready
JOIN runs r ON r.run_id = ready.run_id
-- Every label the run requires (`key`: any value; `key=value`: that value) is one the
-- claiming worker advertises.
WHERE NOT EXISTS (
        SELECT 1
        FROM jsonb_array_elements_text(r.caps -> 'worker_labels') AS req (label)
        WHERE NOT coalesce((
                SELECT CASE WHEN strpos(req.label, '=') > 0
                            THEN w.labels ->> split_part(req.label, '=', 1)
                                 = substr(req.label, strpos(req.label, '=') + 1)
                            ELSE w.labels ? req.label END
                FROM workers w
                WHERE w.worker_id = $1::text), false))
ORDER BY r.run_id
