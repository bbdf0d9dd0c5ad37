-- Stored transitions at the given (attempt, seq) pairs, to compare with re-sent ones: read
-- from the attempt's row by subscript (migration 0028; seq n is element n).
SELECT a.attempt_id, q.seq, a.step_states[q.seq] AS state, a.step_ats[q.seq] AS at,
       a.step_notes[q.seq] AS note
FROM unnest($1::uuid[], $2::int4[]) AS q (attempt_id, seq)
JOIN attempts a ON a.attempt_id = q.attempt_id
WHERE q.seq BETWEEN 1 AND cardinality(a.step_states)
