-- Locks run rows in a fixed order (a run's end is decided under this lock). $1 run ids.
SELECT 1 FROM runs WHERE run_id = ANY ($1::uuid[]) ORDER BY run_id FOR UPDATE
