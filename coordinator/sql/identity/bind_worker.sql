-- Binds $1 (worker id) to $2 (credential) on first use; returns a row only when the id is
-- (now) bound to that credential. No row: the id belongs to another credential.
INSERT INTO worker_credentials (worker_id, credential)
VALUES ($1, $2)
ON CONFLICT (worker_id) DO UPDATE SET credential = EXCLUDED.credential
    WHERE worker_credentials.credential = EXCLUDED.credential
RETURNING worker_id
