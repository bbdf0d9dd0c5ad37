-- Why a work item was cancelled without running: 'budget' when the run's execution.budget
-- was spent (core::budget). NULL for every other cancellation.
ALTER TABLE work_items ADD COLUMN cancel_reason text;
