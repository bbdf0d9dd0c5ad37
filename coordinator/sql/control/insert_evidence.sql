-- Inserts the spec, the draft and ready plan headers, the catalog row and the runs row of
-- one run ($1 run_id, $2 run_key, $3 spec digest, $4 spec JSON, $5 draft digest,
-- $6 draft header JSON, $7 ready digest, $8 ready header JSON, $9 experiment,
-- $10 trial count, $11 planned trials by agent as JSON). The planned trials follow by binary COPY in the same transaction.
WITH spec AS (
    INSERT INTO run_specs (run_id, run_key, digest, document)
    VALUES ($1, $2, $3, $4::text::jsonb)
    RETURNING run_id
), plan_rows AS (
    INSERT INTO plans (run_id, stage, digest, document)
    SELECT run_id, s.stage, s.digest, s.document::jsonb
    FROM spec, (VALUES ('draft', $5::text, $6::text), ('ready', $7::text, $8::text))
        AS s (stage, digest, document)
    RETURNING run_id
), catalog AS (
    INSERT INTO run_catalog (run_id, run_key, experiment, trial_count, by_agent,
                             spec_digest, plan_digest)
    SELECT run_id, $2, $9, $10, $11::text::jsonb, $3, $7 FROM spec
    RETURNING run_id
)
INSERT INTO runs (run_id) SELECT run_id FROM spec
