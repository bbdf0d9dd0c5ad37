-- Upserts a worker that opened a session on replica $5 (marked alive at $6, the scheduler's
-- clock: docs/remote.md "Replicas"); returns when this session connected (the session's
-- identity for `disconnect_worker.sql`). $1 id; $2 slots; $3 labels; $4 version.
WITH mark AS (
    INSERT INTO replicas (replica_id, seen_at) VALUES ($5, $6)
    ON CONFLICT (replica_id) DO UPDATE SET seen_at = GREATEST(replicas.seen_at, excluded.seen_at)
)
INSERT INTO workers (worker_id, slots, labels, version, replica)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (worker_id) DO UPDATE
SET slots = excluded.slots, labels = excluded.labels, version = excluded.version,
    draining = false, connected_at = clock_timestamp(), last_seen = now(),
    disconnected_at = NULL, replica = excluded.replica
RETURNING connected_at
