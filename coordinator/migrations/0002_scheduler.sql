-- 0002_scheduler: what the scheduler needs beyond 0001.
--
-- - runs.caps: per-run concurrency caps, `{"per_agent": {"oracle": 2}, "per_provider": {...}}`.
-- - work_items.agent / provider_route: what the caps count; outcome: the terminal state of
--   the trial once the coordinator decided it is done.
-- - attempts.last_seq: the highest stored transition seq (0 before the first);
--   attempts.fenced: the attempt's lease was taken back (reaped); its epoch is stale forever.

ALTER TABLE runs ADD COLUMN caps jsonb NOT NULL DEFAULT '{}';

ALTER TABLE work_items
    ADD COLUMN agent text NOT NULL DEFAULT '',
    ADD COLUMN provider_route text,
    ADD COLUMN outcome text CHECK (outcome IN (
        'completed', 'failed', 'timeout', 'cancelled', 'infrastructure_error',
        'invalid_configuration', 'evaluation_error', 'not_graded'));

-- Cap counting: live (leased) items of a run.
CREATE INDEX work_items_leased ON work_items (run_id, agent, provider_route)
    WHERE state = 'leased';

ALTER TABLE attempts
    ADD COLUMN last_seq integer NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    ADD COLUMN fenced boolean NOT NULL DEFAULT false;
