-- The checksum of one applied migration, if it was applied. $1 version.
SELECT checksum FROM schema_migrations WHERE version = $1
