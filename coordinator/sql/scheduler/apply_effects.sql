-- Applies a batch of dispatch effects decided by core::dispatch (`scheduler::apply`) in one
-- statement: the transitions to store, the attempts' new states, the leases to delete, the
-- work items to settle and the run counters of the items made done (migration 0020: the
-- statement that changes what they count writes them; no trigger does). Each part is
-- set-based (`unnest` of arrays); an empty array does nothing.
--
-- $1-$5 transitions: attempt ids, seqs, states, times, notes. Each is appended to its
--   attempt's row (migration 0028), which $6 must name: seqs follow the stored ones, and
--   the CHECK attempts_steps_complete refuses arrays whose length is not the new last seq.
-- $6-$11 attempts: ids, states, last seqs, terminal states (NULL: not finished), causes,
--   fenced (its lease was taken back).
-- $12 the attempts whose leases end.
-- $13-$19 settles, guarded: trial ids; the attempt number that must still be the item's
--   live one (`attempts_used`); the run state decided on; the item's new state and outcome
--   (core's item machine, `dispatch::machine::item_on` over the settle: `ready` retried, or
--   `done`), bucket (core's Bucket::settled) and ready_at (now, or now + the retry's
--   backoff); $20 the item state each was decided on (`leased`). A row whose guard fails is
--   left alone and not returned, and the scheduler decides it again.
-- Returns the settled items.
WITH steps AS (
    SELECT t.attempt_id,
           array_agg(t.state ORDER BY t.seq) AS states,
           array_agg(t.at ORDER BY t.seq) AS ats,
           array_agg(t.note ORDER BY t.seq) AS notes
    FROM unnest($1::uuid[], $2::int4[], $3::text[], $4::timestamptz[], $5::text[])
         AS t (attempt_id, seq, state, at, note)
    GROUP BY t.attempt_id
), attempts_updated AS (
    UPDATE attempts a
    SET state = u.state,
        last_seq = u.last_seq,
        step_states = a.step_states || coalesce(s.states, '{}'),
        step_ats = a.step_ats || coalesce(s.ats, '{}'),
        step_notes = a.step_notes || coalesce(s.notes, '{}'),
        terminal_state = coalesce(u.terminal_state, a.terminal_state),
        finished_at = CASE WHEN u.terminal_state IS NOT NULL AND a.finished_at IS NULL
                           THEN now() ELSE a.finished_at END,
        cause = CASE WHEN u.terminal_state IS NOT NULL THEN u.cause ELSE a.cause END,
        fenced = a.fenced OR u.fenced
    FROM unnest($6::uuid[], $7::text[], $8::int4[], $9::text[], $10::text[], $11::bool[])
         AS u (attempt_id, state, last_seq, terminal_state, cause, fenced)
         LEFT JOIN steps s ON s.attempt_id = u.attempt_id
    WHERE a.attempt_id = u.attempt_id
), leases_ended AS (
    DELETE FROM leases WHERE attempt_id = ANY ($12::uuid[])
), settled AS (
    UPDATE work_items w
    SET state = s.state, outcome = s.outcome, bucket = s.bucket, ready_at = s.ready_at,
        updated_at = now()
    FROM unnest($13::uuid[], $14::int4[], $15::text[]::run_state[], $16::text[]::item_state[],
                $17::text[], $18::text[], $19::timestamptz[], $20::text[]::item_state[])
         AS s (trial_id, attempts_used, run_state, state, outcome, bucket, ready_at,
               from_state),
         runs r
    -- The state guard is a column of the unnest, never a constant, so the planner cannot
    -- pick the partial index `work_items_leased` (whose stale estimate of one row once made
    -- generic plans scan every leased item) over the key lookup (tests/keyed_plans.rs).
    WHERE w.trial_id = s.trial_id AND w.state = s.from_state
      AND w.attempts_used = s.attempts_used
      AND r.run_id = w.run_id AND r.state = s.run_state
    RETURNING w.trial_id, w.run_id, w.agent, w.state, w.outcome, w.bucket, w.provider_route
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', 'done', bucket, count(*)
    FROM settled WHERE state = 'done'
    GROUP BY run_id, agent, bucket
)
SELECT trial_id, run_id, outcome, provider_route FROM settled
