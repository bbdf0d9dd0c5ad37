-- Serializes migrators (concurrent coordinators migrate once). $1 the migration lock key.
SELECT pg_advisory_xact_lock($1)
