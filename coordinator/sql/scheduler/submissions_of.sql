SELECT attempt_id, digest FROM submissions WHERE attempt_id = ANY ($1::uuid[])
