-- Inserts the draft and ready plan headers, the catalog row and the runs row of a run whose
-- spec and planned trials were written in this transaction ($1 run_id, $2 run_key, $3 spec
-- digest, $4 draft digest, $5 draft header JSON, $6 ready digest, $7 ready header JSON,
-- $8 experiment, $9 trial count, $10 planned trials by agent as JSON).
WITH plan_rows AS (
    INSERT INTO plans (run_id, stage, digest, document)
    SELECT $1, s.stage, s.digest, s.document::jsonb
    FROM (VALUES ('draft', $4::text, $5::text), ('ready', $6::text, $7::text))
        AS s (stage, digest, document)
    RETURNING run_id
), catalog AS (
    INSERT INTO run_catalog (run_id, run_key, experiment, trial_count, by_agent,
                             spec_digest, plan_digest)
    VALUES ($1, $2, $8, $9, $10::text::jsonb, $3, $6)
    RETURNING run_id
)
INSERT INTO runs (run_id) VALUES ($1)
