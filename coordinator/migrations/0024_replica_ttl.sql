-- 0024_replica_ttl: each replica records the lease TTL it runs with when it marks itself
-- alive (docs/remote.md "Replicas"), so a replica starting with another TTL than a live one
-- is refused (core::dispatch::replica::ttl_conflict); rows of replicas that stopped marking
-- long ago are deleted by the others' reaper passes (core::dispatch::replica::forgotten).
ALTER TABLE replicas ADD COLUMN ttl_ms bigint;
