-- The accepted records of multi-step attempts (`[[steps]]`, issue 46: an attempt record with
-- a `steps` array, which a one-step task's record never has), for the per-step rows of `run
-- status` (sql/control/status_steps.sql, core::report::steps). Such records are the few, and
-- a run without multi-step tasks has none: its status reads an empty index and pays nothing.
-- An index, not a stored column: building it reads `submissions` once and rewrites nothing.
CREATE INDEX submissions_steps ON submissions (attempt_id) WHERE record ? 'steps';
