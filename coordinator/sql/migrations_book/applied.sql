-- The migrations applied to this database, in order (`Store::migrate` checks them against
-- the embedded ones; `/readyz` waits for all of them).
SELECT version, name, checksum FROM schema_migrations ORDER BY version
