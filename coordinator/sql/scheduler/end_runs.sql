-- Applies the run ends Rust decided (core's `RunState::when_idle` over finish_runs.sql's
-- snapshot): each run moves from the state it was decided on to the decided one; a run no
-- longer in that state is left alone. $1 run ids; $2 the states decided on; $3 the new states.
UPDATE runs r
SET state = d.to_state, updated_at = now()
FROM unnest($1::uuid[], $2::text[]::run_state[], $3::text[]::run_state[])
     AS d (run_id, from_state, to_state)
WHERE r.run_id = d.run_id AND r.state = d.from_state
