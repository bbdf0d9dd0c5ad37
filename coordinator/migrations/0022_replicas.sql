-- 0022_replicas: coordinator replicas on one database (docs/remote.md "Replicas").
--
-- Each coordinator process (replica) marks itself alive in `replicas` on every reaper pass
-- and when a worker session registers on it (seen_at: the scheduler's clock, the one lease
-- expiries use); `workers.replica` names the replica of the worker's last session. A reaper
-- leaves an expired lease to the replica holding its worker's session while that replica is
-- alive (core::dispatch::replica). Rows from before this migration name no replica: their
-- leases are decided by the stored expiry, as before.
CREATE TABLE replicas (
    replica_id uuid        PRIMARY KEY,
    seen_at    timestamptz NOT NULL
);
ALTER TABLE workers ADD COLUMN replica uuid;
