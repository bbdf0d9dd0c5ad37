-- Serialises the claimers of capped runs (so two cannot both take the last free place),
-- in a fixed order. $1 run ids.
SELECT pg_advisory_xact_lock(hashtextextended(r::text, 7)) FROM unnest($1::uuid[]) AS r ORDER BY r
