-- The new latest state of many attempts; a non-null terminal state finishes the attempt.
-- $6 fences the attempt (its lease was taken back).
UPDATE attempts a
SET state = u.state,
    last_seq = u.last_seq,
    terminal_state = coalesce(u.terminal_state, a.terminal_state),
    finished_at = CASE WHEN u.terminal_state IS NOT NULL AND a.finished_at IS NULL
                       THEN now() ELSE a.finished_at END,
    cause = CASE WHEN u.terminal_state IS NOT NULL THEN u.cause ELSE a.cause END,
    fenced = a.fenced OR u.fenced
FROM unnest($1::uuid[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::bool[])
     AS u (attempt_id, state, last_seq, terminal_state, cause, fenced)
WHERE a.attempt_id = u.attempt_id
