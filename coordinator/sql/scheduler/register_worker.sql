-- Upserts a worker that opened a session; returns when this session connected (the session's
-- identity for `disconnect_worker.sql`). $1 id; $2 slots; $3 labels; $4 version.
INSERT INTO workers (worker_id, slots, labels, version)
VALUES ($1, $2, $3, $4)
ON CONFLICT (worker_id) DO UPDATE
SET slots = excluded.slots, labels = excluded.labels, version = excluded.version,
    draining = false, connected_at = clock_timestamp(), last_seen = now(),
    disconnected_at = NULL
RETURNING connected_at
