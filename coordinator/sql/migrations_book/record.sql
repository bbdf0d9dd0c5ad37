-- Records a migration as applied. $1 version; $2 name; $3 checksum (sha256 hex of its SQL).
INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)
