-- Applies one run move decided by core's run machine (`dispatch::machine::run_on`): run $1
-- goes from state $2, the state it was decided on, to $3; a run no longer in $2 is left
-- alone. Returns the run when it moved.
UPDATE runs SET state = $3::text::run_state, updated_at = now()
WHERE run_id = $1 AND state = $2::text::run_state
RETURNING run_id
