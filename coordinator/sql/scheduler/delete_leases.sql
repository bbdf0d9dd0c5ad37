DELETE FROM leases WHERE attempt_id = ANY ($1::uuid[])
