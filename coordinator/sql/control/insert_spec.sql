-- Inserts the spec of a new run ($1 run_id, $2 run_key, $3 spec digest, $4 spec JSON). Its
-- planned trials follow by binary COPY, then `insert_plan_headers.sql`, in one transaction.
INSERT INTO run_specs (run_id, run_key, digest, document)
VALUES ($1, $2, $3, $4::text::jsonb)
