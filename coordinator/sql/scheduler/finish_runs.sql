-- Ends the runs that have nothing left to do: no work item ready or leased. A running run
-- becomes `finished`, a cancelling one `cancelled`. $1 run ids.
UPDATE runs r
SET state = CASE WHEN r.state = 'cancelling' THEN 'cancelled' ELSE 'finished' END,
    updated_at = now()
WHERE r.run_id = ANY($1::uuid[])
  AND r.state IN ('running', 'cancelling')
  AND NOT EXISTS (
      SELECT 1 FROM work_items w
      WHERE w.run_id = r.run_id AND w.state IN ('ready', 'leased')
  )
