-- 0007_worker_disconnects: a worker whose session ended is not "connected".
--
-- workers.disconnected_at is set when the worker's session ends (cleanly or not) and cleared
-- when it opens a new one; status counts a worker as connected only while it has no
-- disconnected_at and was seen recently. Rows from before this migration belong to sessions
-- of an earlier coordinator process: they count as disconnected until the worker reconnects.
ALTER TABLE workers ADD COLUMN disconnected_at timestamptz;
UPDATE workers SET disconnected_at = now();
