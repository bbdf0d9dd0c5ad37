-- The budget of the runs $1 is spent: their ready items (never started, or waiting for a
-- retry) become `cancelled` with the reason 'budget'; leased ones finish.
UPDATE work_items
SET state = 'cancelled', outcome = 'cancelled', cancel_reason = 'budget', updated_at = now()
WHERE run_id = ANY($1::uuid[]) AND state = 'ready'
RETURNING run_id
