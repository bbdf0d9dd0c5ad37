-- The state of run $1 (no row: no such run).
SELECT state::text AS state FROM runs WHERE run_id = $1
