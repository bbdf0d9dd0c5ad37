-- Every scheduler statement reads and writes a few rows by key: within a scheduler
-- transaction, plans are nested loops over index scans whatever the statistics say. Its
-- statements are prepared once per connection, and PostgreSQL keeps a generic plan until
-- the next ANALYZE: built while the tables were young, a hash join over a sequential scan
-- of `attempts` stayed in place while the table grew (see docs/PERFORMANCE.md).
-- Such plans do not depend on the parameters: plan once per connection and statement
-- (plan_cache_mode).
-- No JIT: with sequential scans priced out, a generic plan's estimated cost passes
-- `jit_above_cost` (100,000) once `work_items` holds some 10,000 ready rows, and compiling it
-- took 40-55 ms on every claim of a 20,000-trial run, for a statement that runs in 0.3 ms
-- (dispatch fell from ~3,000 to ~540 attempts/s; docs/PERFORMANCE.md).
-- One prepared statement (set_config(..., true) is SET LOCAL), not five SET commands parsed
-- on every transaction.
SELECT set_config('enable_seqscan', 'off', true),
       set_config('enable_hashjoin', 'off', true),
       set_config('enable_mergejoin', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('jit', 'off', true)
