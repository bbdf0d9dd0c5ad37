-- The finished attempts of each done or cancelled trial of a run, in plan order then attempt
-- order: the planned trial (its key and document), the accepted record when it arrived, for an attempt without one
-- the transitions the coordinator stored (record numbering, from 0), and the worker that held
-- the attempt's lease. A trial cancelled before any attempt finished has one row with NULL
-- attempt columns. $1 run id; $2 trial ids (empty for all).
SELECT w.trial_id, w.ordinal, p.key AS trial_key, p.document::text AS planned,
       w.state AS item_state, COALESCE(w.cancel_reason, 'cancelled') AS cancel_reason,
       w.updated_at AS item_updated_at,
       a.attempt_id, a.number, a.terminal_state, a.cause, a.finished_at,
       s.record::text AS record,
       CASE WHEN a.attempt_id IS NOT NULL AND s.record IS NULL THEN (
           SELECT json_agg(json_build_object('seq', t.seq - 1, 'state', t.state, 'at', t.at,
                                             'note', NULLIF(t.note, ''))
                           ORDER BY t.seq)
           FROM unnest(a.step_states, a.step_ats, a.step_notes)
                WITH ORDINALITY AS t (state, at, note, seq))::text
       END AS transitions,
       a.worker_id
FROM work_items w
JOIN planned_trials p ON p.trial_id = w.trial_id
LEFT JOIN attempts a ON a.trial_id = w.trial_id AND a.finished_at IS NOT NULL
LEFT JOIN submissions s ON s.attempt_id = a.attempt_id
WHERE w.run_id = $1 AND w.state IN ('done', 'cancelled')
  AND (w.state = 'cancelled' OR a.attempt_id IS NOT NULL)
  AND (cardinality($2::uuid[]) = 0 OR w.trial_id = ANY($2))
ORDER BY w.ordinal, a.number
