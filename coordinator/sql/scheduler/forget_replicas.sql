-- Deletes the rows of replicas Rust judged long dead (core::dispatch::replica::forgotten),
-- each guarded by the mark it was judged on (a replica that marked since stays).
-- $1 replica ids; $2 their marks as read.
DELETE FROM replicas r
USING unnest($1::uuid[], $2::timestamptz[]) AS d (replica_id, seen_at)
WHERE r.replica_id = d.replica_id AND r.seen_at = d.seen_at
