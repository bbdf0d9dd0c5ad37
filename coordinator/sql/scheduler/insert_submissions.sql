INSERT INTO submissions (attempt_id, digest, record)
SELECT a, d, r::jsonb FROM unnest($1::uuid[], $2::text[], $3::text[]) AS u (a, d, r)
