-- 0017_empty_causes: an attempt that ended without a cause had an empty one ('') where its
-- record says `cause: null`; the scheduler now stores NULL (scheduler/report.rs `finish_of`),
-- and the rows stored before follow, so the viewer, status and exports read one value.
UPDATE attempts SET cause = NULL WHERE cause = '';
