-- Upserts a worker that opened a session. $1 id; $2 slots; $3 labels; $4 version.
INSERT INTO workers (worker_id, slots, labels, version)
VALUES ($1, $2, $3, $4)
ON CONFLICT (worker_id) DO UPDATE
SET slots = excluded.slots, labels = excluded.labels, version = excluded.version,
    draining = false, connected_at = now(), last_seen = now()
