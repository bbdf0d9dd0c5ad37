-- Whether run $1's spec sets an `execution.budget` (a primary-key lookup of the spec; specs
-- never change, so status asks once per run and process).
SELECT (document #> '{condition,execution,budget}') IS NOT NULL AS has_budget
FROM run_specs WHERE run_id = $1
