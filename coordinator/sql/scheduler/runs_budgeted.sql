-- Whether the runs $1 have an `execution.budget` (read once per run: specs are immutable).
SELECT run_id, document #> '{condition,execution,budget}' IS NOT NULL AS budgeted
FROM run_specs
WHERE run_id = ANY ($1::uuid[])
