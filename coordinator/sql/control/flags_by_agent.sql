-- Per agent of run $1: its done trials whose deciding grade was flagged (core's
-- GradeFlags::of_record: the grade in the accepted record of the trial's last finished
-- attempt), `tampered`, `withheld` and `unguarded` counted apart (migrations 0021, 0032). It starts
-- from the flagged records (partial index submissions_flagged), which are few, so its cost
-- does not grow with the run's size. Agents without a flagged trial have no row.
SELECT w.agent,
       count(*) FILTER (WHERE s.grade_tampered)::bigint AS tampered,
       count(*) FILTER (WHERE s.grade_withheld)::bigint AS withheld,
       count(*) FILTER (WHERE s.grade_unguarded)::bigint AS unguarded
FROM submissions s
JOIN deciding_attempts a ON a.attempt_id = s.attempt_id
JOIN work_items w ON w.trial_id = a.trial_id
WHERE (s.grade_tampered OR s.grade_withheld OR s.grade_unguarded)
  AND w.run_id = $1
  AND w.state = 'done'
GROUP BY w.agent
ORDER BY w.agent
