-- Expired leases whose workers this coordinator heard holding them (core::dispatch::reap):
-- each gets the expiry core computed, TTL after that heartbeat. $1 attempt ids; $2 expiries.
-- The caller holds their attempts locked (reap_expired.sql).
UPDATE leases l
SET expires_at = u.expires_at
FROM unnest($1::uuid[], $2::timestamptz[]) AS u (attempt_id, expires_at)
WHERE l.attempt_id = u.attempt_id
