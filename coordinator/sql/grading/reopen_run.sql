-- A finished run with grading queued runs again (it finishes when nothing is ready or
-- leased). $1 run id.
UPDATE runs SET state = 'running', updated_at = now()
WHERE run_id = $1 AND state = 'finished'
