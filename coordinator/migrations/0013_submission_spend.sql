-- The spend a record reports (observations: tokens and cost), as columns of its submission,
-- computed by PostgreSQL when the record is stored. The status projection and the budget
-- check sum these columns; before, every status call detoasted and parsed every accepted
-- record of the run (about 0.8 s per call on a 100,000-trial run whose trials all had
-- records). NULL where the record reported nothing, never 0.
ALTER TABLE submissions
    ADD COLUMN input_tokens numeric
        GENERATED ALWAYS AS ((record #>> '{observations,input_tokens}')::numeric) STORED,
    ADD COLUMN cached_input_tokens numeric
        GENERATED ALWAYS AS ((record #>> '{observations,cached_input_tokens}')::numeric) STORED,
    ADD COLUMN output_tokens numeric
        GENERATED ALWAYS AS ((record #>> '{observations,output_tokens}')::numeric) STORED,
    ADD COLUMN cost_usd float8
        GENERATED ALWAYS AS ((record #>> '{observations,cost_usd}')::float8) STORED;
