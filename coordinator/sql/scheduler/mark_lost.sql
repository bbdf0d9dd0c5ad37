-- Remembers which worker lost each rescued trial's lease, so that the trial does not go back
-- to it while another worker can take it (core::dispatch::may_take). $1 trial ids; $2 workers.
UPDATE work_items w
SET lost_by = u.worker_id
FROM unnest($1::uuid[], $2::text[]) AS u (trial_id, worker_id)
WHERE w.trial_id = u.trial_id
