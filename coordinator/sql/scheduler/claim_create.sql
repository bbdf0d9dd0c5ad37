-- Leases the chosen items: one attempt each (number = attempts_used + 1), a lease with a new
-- fencing epoch, and counts the retries among them. The document of each: the item's own (grade work), else the canonical
-- WorkItem {"trial": planned trial, "agent": the run's agent condition} of an item created
-- by StartRun (migration 0014), else (items enqueued without one) the planned trial's
-- document. planned_trials.document is the trial's canonical JSON as `text` (migration 0031):
-- it is cast to `json` (checked, not parsed into jsonb) to be nested; the coordinator reads the
-- result and sends the worker its canonical form (workers_service::convert).
-- $1 the worker of each item (one claim may serve several workers: scheduler/rounds.rs);
-- $2 trial ids; $3 new attempt ids; $4 ttl in milliseconds; $5 now, the scheduler's clock (a
-- lease expires by the clock that reaps it: docs/testing.md, "Clocks"); $6 the item state a
-- claim moves from and $7 the one it moves to (core's item machine, `ItemEvent::Claim`).
WITH taken AS (
    SELECT * FROM unnest($2::uuid[], $3::uuid[], $1::text[]) AS t (trial_id, attempt_id, worker_id)
), items AS (
    UPDATE work_items w
    SET state = $7::text::item_state, attempts_used = w.attempts_used + 1, updated_at = now()
    FROM taken t
    -- The state guard is a parameter, so a generic plan cannot use the partial index
    -- `work_items_ready` (a plan made while it held few rows would walk all of it instead of
    -- looking the items up by key: tests/keyed_plans.rs).
    WHERE w.trial_id = t.trial_id AND w.state = $6::text::item_state
    RETURNING w.trial_id, w.run_id, w.ordinal, w.attempts_used, w.kind, w.agent, w.document,
              t.attempt_id, t.worker_id
), created AS (
    INSERT INTO attempts (attempt_id, trial_id, number, kind, worker_id, epoch)
    SELECT attempt_id, trial_id, attempts_used, kind, worker_id, nextval('lease_epochs')
    FROM items
    RETURNING attempt_id, trial_id, number, kind, worker_id, epoch
), leased AS (
    INSERT INTO leases (attempt_id, worker_id, epoch, expires_at)
    SELECT attempt_id, worker_id, epoch, $5::timestamptz + $4::bigint * interval '1 millisecond'
    FROM created
), retried AS (
    -- Attempts beyond the first of their trial are retries (migration 0015's `retries`
    -- counter, written here since migration 0023).
    INSERT INTO run_counts (run_id, agent, kind, n)
    SELECT i.run_id, i.agent, 'retries', count(*)
    FROM items i
    WHERE i.attempts_used > 1
    GROUP BY i.run_id, i.agent
)
SELECT c.attempt_id, c.trial_id, i.run_id, c.number, c.kind, c.epoch,
       COALESCE(i.document::json,
                CASE WHEN a.document IS NOT NULL
                     THEN json_build_object('trial', p.document::json, 'agent', a.document)
                END,
                p.document::json) AS document
FROM created c
JOIN items i ON i.trial_id = c.trial_id
JOIN planned_trials p ON p.trial_id = c.trial_id
LEFT JOIN run_agents a ON a.run_id = i.run_id AND a.agent = i.agent
ORDER BY i.run_id, i.ordinal
