-- The finished attempts of each done trial of a run, in plan order then attempt order: the
-- planned trial, the accepted record when it arrived, and for an attempt without one the
-- transitions the coordinator stored (record numbering, from 0), and the worker that held the
-- attempt's lease. $1 run id; $2 trial ids
-- (empty for all).
SELECT w.trial_id, w.ordinal, p.document::text, a.attempt_id, a.number, a.terminal_state,
       a.cause, a.finished_at, s.record::text,
       CASE WHEN s.record IS NULL THEN (
           SELECT json_agg(json_build_object('seq', t.seq - 1, 'state', t.state, 'at', t.at,
                                             'note', NULLIF(t.note, ''))
                           ORDER BY t.seq)
           FROM transitions t WHERE t.attempt_id = a.attempt_id)::text
       END,
       a.worker_id
FROM work_items w
JOIN planned_trials p ON p.trial_id = w.trial_id
JOIN attempts a ON a.trial_id = w.trial_id AND a.finished_at IS NOT NULL
LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND w.state = 'done'
  AND (cardinality($2::uuid[]) = 0 OR w.trial_id = ANY($2))
ORDER BY w.ordinal, a.number
