-- The reaper's pass marks its replica $1 alive at $2 (the scheduler's clock) with its lease
-- TTL $3 (milliseconds) and returns its previous mark (NULL on its first), which it judges
-- the other replicas by (core::dispatch::replica::replica_alive).
WITH previous AS (
    SELECT seen_at FROM replicas WHERE replica_id = $1
), mark AS (
    INSERT INTO replicas (replica_id, seen_at, ttl_ms) VALUES ($1, $2, $3)
    ON CONFLICT (replica_id) DO UPDATE
    SET seen_at = GREATEST(replicas.seen_at, excluded.seen_at), ttl_ms = excluded.ttl_ms
)
SELECT (SELECT seen_at FROM previous) AS previous
