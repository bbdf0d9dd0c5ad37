-- Run and work-item states as enum types (issue 48): `runs.state` is a `run_state`,
-- `work_items.state` an `item_state`, whose labels are core's `dispatch::RunState` and
-- `dispatch::machine::ItemState` names in their order (tests/state_enums.rs compares them).
-- A value outside them is refused by the type, so the text CHECKs go; statements bind
-- states as text and cast (`$2::text::item_state`, `$3::text[]::item_state[]`).
--
-- `run_counts.state` stays text: it holds count labels (`total`, and '' for the kinds that
-- count no state) besides item states. `attempts.state` and `transitions.state` are
-- lifecycle states (core::lifecycle::State), not these.
--
-- Changing a column's type rebuilds its indexes from their definitions; the partial ones
-- compare the state with a text literal (`state = 'done'::text`), which has no operator for
-- an enum, so they are dropped first and created again with the same columns and
-- predicates. The table is rewritten once per column.
CREATE TYPE run_state AS ENUM ('planned', 'running', 'cancelling', 'cancelled', 'finished');
CREATE TYPE item_state AS ENUM ('ready', 'leased', 'done', 'cancelled');

DROP INDEX runs_running;
ALTER TABLE runs
    DROP CONSTRAINT runs_state_check,
    ALTER COLUMN state DROP DEFAULT,
    ALTER COLUMN state TYPE run_state USING state::run_state,
    ALTER COLUMN state SET DEFAULT 'planned';
CREATE INDEX runs_running ON runs (run_id) WHERE state = 'running';

DROP INDEX work_items_ready, work_items_leased, work_items_done_at, work_items_outcomes,
    work_items_done_ordinal;
ALTER TABLE work_items
    DROP CONSTRAINT work_items_state_check,
    ALTER COLUMN state DROP DEFAULT,
    ALTER COLUMN state TYPE item_state USING state::item_state,
    ALTER COLUMN state SET DEFAULT 'ready';
CREATE INDEX work_items_ready ON work_items (run_id, ordinal) INCLUDE (ready_at)
    WHERE state = 'ready';
CREATE INDEX work_items_leased ON work_items (run_id, agent, provider_route)
    WHERE state = 'leased';
CREATE INDEX work_items_done_at ON work_items (run_id, updated_at) WHERE state = 'done';
CREATE INDEX work_items_outcomes ON work_items (run_id, agent, bucket) WHERE state = 'done';
CREATE INDEX work_items_done_ordinal ON work_items (run_id, ordinal) WHERE state = 'done';
