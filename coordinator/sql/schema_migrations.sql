-- Bookkeeping of applied migrations; created by `Store::migrate` (under the migration
-- advisory lock) before any numbered migration runs.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer     PRIMARY KEY,
    name        text        NOT NULL,
    -- sha256 (hex) of the migration's SQL: an applied migration must never change.
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
