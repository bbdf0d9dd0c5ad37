-- The trials of a run owed a grade, locked, each with the record to grade. A trial is owed a
-- grade when it is done and its deciding attempt (number = attempts_used) owes one by core's
-- one rule (`grading::owes_grade`, given as the states it holds per kind: $4 for an execute
-- attempt, $5 for a grade attempt). The record graded is that of the trial's latest execute
-- attempt that owes a grade ($4) with an accepted record. Trials with a verdict, trials whose agent
-- failed, timed out or never ran (invalid configuration, infrastructure error, cancelled) and
-- trials not done are never selected. In plan order, a page at a time: $1 run id; $2 only
-- ordinals above this; $3 at most this many; $4, $5 above. The document of a trial is its work item's own,
-- else the WorkItem composed from the planned trial and the run's agent condition (an item
-- created by StartRun, migration 0014; as `claim_create.sql` composes it), else NULL.
SELECT w.trial_id,
       COALESCE(w.document,
                CASE WHEN a.document IS NOT NULL
                     THEN jsonb_build_object('trial', p.document::jsonb, 'agent', a.document)
                END)::text AS document,
       s.record::text AS record, w.ordinal
FROM work_items w
JOIN planned_trials p ON p.trial_id = w.trial_id
LEFT JOIN run_agents a ON a.run_id = w.run_id AND a.agent = w.agent
JOIN attempts d ON d.trial_id = w.trial_id AND d.number = w.attempts_used
JOIN LATERAL (
    SELECT a.attempt_id
    FROM attempts a
    WHERE a.trial_id = w.trial_id AND a.kind = 'execute'
      AND a.terminal_state = ANY ($4::text[])
    ORDER BY a.number DESC
    LIMIT 1
) src ON true
JOIN submissions s ON s.attempt_id = src.attempt_id
WHERE w.run_id = $1 AND w.state = 'done' AND w.ordinal > $2
  AND ((d.kind = 'execute' AND d.terminal_state = ANY ($4::text[]))
       OR (d.kind = 'grade' AND d.terminal_state = ANY ($5::text[])))
ORDER BY w.ordinal
LIMIT $3
FOR UPDATE OF w
