-- Stored transitions at the given (attempt, seq) pairs, to compare with re-sent ones.
SELECT t.attempt_id, t.seq, t.state, t.at, t.note
FROM transitions t
JOIN unnest($1::uuid[], $2::int4[]) AS q (attempt_id, seq)
  ON t.attempt_id = q.attempt_id AND t.seq = q.seq
