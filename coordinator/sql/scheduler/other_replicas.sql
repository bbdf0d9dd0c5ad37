-- Every replica but $1 with its last mark and lease TTL (milliseconds; NULL: marked before
-- migration 0024): for the TTL check at start and the reaper's forgetting of dead replicas
-- (core::dispatch::replica::{ttl_conflict, forgotten}).
SELECT replica_id, seen_at, ttl_ms FROM replicas WHERE replica_id <> $1
