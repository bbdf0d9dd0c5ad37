-- The accepted records of attempts $1: their digests (a re-upload is a duplicate or a
-- conflict) and `ok` (the bucket of a trial settled by this batch). Run after the attempts
-- are locked, so a record another session stored and committed meanwhile is seen.
SELECT attempt_id, digest, ok FROM submissions WHERE attempt_id = ANY ($1::uuid[])
