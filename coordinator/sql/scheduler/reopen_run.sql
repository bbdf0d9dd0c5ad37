-- A resumed run that has work again runs again (it ends when nothing is ready or leased).
-- $1 run id.
UPDATE runs SET state = 'running', updated_at = now()
WHERE run_id = $1 AND state IN ('finished', 'cancelling', 'cancelled')
  AND EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = $1 AND w.state IN ('ready', 'leased'))
