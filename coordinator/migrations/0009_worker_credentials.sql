-- 0009_worker_credentials: a worker id belongs to the credential that first registered it.
--
-- credential is `cert:<subject>` for a worker that presented a client certificate or
-- `token:<sha256 hex>` for a token-authenticated one (never the token itself). A session
-- for the same worker id with another credential is refused, so one worker cannot take over
-- another's session and leases. An open coordinator (no tokens, no certificates) binds nothing.
CREATE TABLE worker_credentials (
    worker_id   text        PRIMARY KEY,
    credential  text        NOT NULL,
    bound_at    timestamptz NOT NULL DEFAULT now()
);
