-- Many attempts' transitions in one statement.
INSERT INTO transitions (attempt_id, seq, state, at, note)
SELECT * FROM unnest($1::uuid[], $2::int4[], $3::text[], $4::timestamptz[], $5::text[])
