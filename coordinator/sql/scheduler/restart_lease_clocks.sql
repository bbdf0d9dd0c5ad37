-- A coordinator that starts has heard from no worker yet: every live lease gets the restart
-- grace from now ($1 in milliseconds: core's LeaseTiming::restart_grace, one TTL and the
-- workers' longest reconnect wait; $2 now, the scheduler's clock), so that the time
-- the coordinator was down (or restarting) is never counted as the workers' silence. A lease
-- already released ('-infinity': its worker was judged gone) stays released; a lease that
-- expires later keeps its expiry.
UPDATE leases
SET expires_at = $2::timestamptz + $1::bigint * interval '1 millisecond'
WHERE expires_at > '-infinity'
  AND expires_at < $2::timestamptz + $1::bigint * interval '1 millisecond'
