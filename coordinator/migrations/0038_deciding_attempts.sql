-- The deciding attempt of each trial, the one rule that says whose grade a trial's verdict
-- is: its last finished attempt (the highest `number` with `finished_at` set). Status's
-- counts of flagged grades, network facts and per-step rows read it
-- (sql/control/flags_by_agent.sql, network_by_agent.sql, status_steps.sql) instead of
-- each repeating the rule. A plain view: PostgreSQL inlines it into each query, so each
-- still starts from its own partial index of `submissions`; nothing is stored or kept by a
-- trigger.
CREATE VIEW deciding_attempts AS
SELECT a.attempt_id, a.trial_id, a.number
FROM attempts a
WHERE a.finished_at IS NOT NULL
  AND NOT EXISTS (
      SELECT 1
      FROM attempts b
      WHERE b.trial_id = a.trial_id AND b.finished_at IS NOT NULL AND b.number > a.number
  );
