-- Every scheduler statement reads and writes a few rows by key: within a scheduler
-- transaction, plans are nested loops over index scans whatever the statistics say. Its
-- statements are prepared once per connection, and PostgreSQL keeps a generic plan until
-- the next ANALYZE: built while the tables were young, a hash join over a sequential scan
-- of `attempts` stayed in place while the table grew (see docs/PERFORMANCE.md).
SET LOCAL enable_seqscan = off;
SET LOCAL enable_hashjoin = off;
SET LOCAL enable_mergejoin = off;
-- Such plans do not depend on the parameters: plan once per connection and statement.
SET LOCAL plan_cache_mode = force_generic_plan;
