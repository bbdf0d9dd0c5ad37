-- The planned agents of the runs $1 (uuid[]): run_catalog.by_agent as text.
SELECT run_id, by_agent::text AS by_agent FROM run_catalog WHERE run_id = ANY ($1)
