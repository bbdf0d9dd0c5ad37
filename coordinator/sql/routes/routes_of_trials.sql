-- The provider routes of trials (those that have one). $1 trial ids.
SELECT trial_id, provider_route
FROM work_items
WHERE trial_id = ANY ($1::uuid[]) AND provider_route IS NOT NULL
