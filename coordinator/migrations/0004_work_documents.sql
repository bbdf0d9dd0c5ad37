-- 0004_work_documents: the document a worker receives for a work item.
--
-- `StartRun` stores, per work item, the canonical JSON of core's `WorkItem` (the planned
-- trial plus the exact agent condition it runs under). Items created without one fall back to
-- the planned trial's own document.
ALTER TABLE work_items ADD COLUMN document jsonb;
