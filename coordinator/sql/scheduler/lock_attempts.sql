-- The attempts a batch of reports is about, locked (attempts before leases before items).
SELECT attempt_id, trial_id, epoch, fenced, state, last_seq, terminal_state, cause
FROM attempts
WHERE attempt_id = ANY ($1::uuid[])
ORDER BY attempt_id
FOR UPDATE
