INSERT INTO quarantine (attempt_id, digest, record, reason)
SELECT a, d, r::jsonb, why FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS u (a, d, r, why)
