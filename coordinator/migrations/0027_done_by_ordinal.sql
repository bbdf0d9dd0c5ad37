-- 0027_done_by_ordinal: a run's done work items in plan order, for paging the viewer's
-- compact trial rows (`ListTrialRows` with `after`/`limit`, `sql/control/view_rows.sql`).
--
-- A page is `WHERE run_id = $1 AND state = 'done' AND ordinal > $after ORDER BY ordinal
-- LIMIT $n`: with this partial index it reads the page's rows and no others, at any run
-- size and however few of a run's trials are done (a scan of planned_trials by
-- (run_id, ordinal) would step over every trial not yet done). The work item's ordinal is
-- its planned trial's and never changes; an item enters the index when it becomes done.
CREATE INDEX work_items_done_ordinal ON work_items (run_id, ordinal) WHERE state = 'done';
