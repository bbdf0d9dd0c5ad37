-- The work items $1 (trial ids) as core's item machine reads them (their class: state and
-- outcome), with what a grade requeue keeps (document, retry budget) and their live attempt
-- (the one numbered `attempts_used`, when there is one) and its last seq.
SELECT w.trial_id, w.state::text AS state, w.outcome, w.document, w.retry_budget,
       w.attempts_used, a.attempt_id, a.last_seq
FROM work_items w
LEFT JOIN attempts a ON a.trial_id = w.trial_id AND a.number = w.attempts_used
WHERE w.trial_id = ANY ($1::uuid[])
