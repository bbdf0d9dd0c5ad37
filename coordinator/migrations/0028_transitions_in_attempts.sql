-- 0028_transitions_in_attempts: an attempt's transitions are stored in its own row.
--
-- Each attempt's lifecycle (about eleven transitions) was eleven rows of `transitions`, each
-- a heap tuple, a primary-key index entry and its WAL, and a statement-level trigger
-- (migration 0008) checked their attempts. The report path already updates the attempt row
-- in the same statement (its state and last seq), so the transitions now travel in that
-- update: three arrays on `attempts`, element i being seq i + 1 (seqs are contiguous from 1:
-- the scheduler refuses a gap). On the dispatch benchmark this took the WAL written per
-- attempt from ~6,600 to ~4,900 bytes (docs/PERFORMANCE.md, "Transitions in the attempt
-- row").
--
-- `transitions` becomes a view with the same columns (attempt_id, seq, state, at, note), so
-- readers and operators' queries are unchanged; it is read-only. The only writer is
-- `sql/scheduler/apply_effects.sql`, which appends.
--
-- Integrity, as before: a transition cannot outlive or precede its attempt (it is part of
-- the row, and attempts are never deleted: 0008's triggers stay), and the arrays' lengths
-- equal `last_seq` (a CHECK), so a write that moves one without the others is refused.
ALTER TABLE attempts
    ADD COLUMN step_states text[] NOT NULL DEFAULT '{}',
    ADD COLUMN step_ats timestamptz[] NOT NULL DEFAULT '{}',
    ADD COLUMN step_notes text[] NOT NULL DEFAULT '{}';

-- Stored transitions move into their attempts. A stored history with a gap or with more or
-- fewer rows than its attempt's last seq cannot be represented: refuse the migration (the
-- transaction leaves the database as it was) and name the attempt.
DO $$
DECLARE
    bad uuid;
BEGIN
    SELECT a.attempt_id INTO bad
    FROM attempts a
    LEFT JOIN (SELECT attempt_id, count(*) AS n, max(seq) AS top
               FROM transitions GROUP BY attempt_id) t ON t.attempt_id = a.attempt_id
    WHERE coalesce(t.n, 0) <> a.last_seq OR coalesce(t.top, 0) <> a.last_seq
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'failed to move transitions into attempts: attempt % has stored transitions that are not seqs 1..last_seq', bad
            USING HINT = 'this database holds a history the scheduler never writes; restore it from a backup taken with the previous release';
    END IF;
END
$$;

UPDATE attempts a
SET step_states = t.states, step_ats = t.ats, step_notes = t.notes
FROM (SELECT attempt_id,
             array_agg(state ORDER BY seq) AS states,
             array_agg(at ORDER BY seq) AS ats,
             array_agg(note ORDER BY seq) AS notes
      FROM transitions
      GROUP BY attempt_id) t
WHERE a.attempt_id = t.attempt_id;

DROP TABLE transitions;
DROP FUNCTION akbench_transitions_attempt_exists();
DROP FUNCTION akbench_transitions_no_update();

ALTER TABLE attempts ADD CONSTRAINT attempts_steps_complete CHECK (
    cardinality(step_states) = last_seq
    AND cardinality(step_ats) = last_seq
    AND cardinality(step_notes) = last_seq);

CREATE VIEW transitions AS
SELECT a.attempt_id, s.seq::integer AS seq, s.state, s.at, s.note
FROM attempts a
CROSS JOIN LATERAL unnest(a.step_states, a.step_ats, a.step_notes)
    WITH ORDINALITY AS s (state, at, note, seq);
