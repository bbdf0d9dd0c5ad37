-- Placement of run $1: the labels it requires (runs.caps.worker_labels, a JSON array as
-- text, NULL when none) and the labels of every connected worker (session open and seen
-- within the last $2 seconds), a JSON array of objects as text.
SELECT (SELECT r.caps -> 'worker_labels' FROM runs r WHERE r.run_id = $1)::text AS required,
       (SELECT coalesce(json_agg(w.labels), '[]'::json)
          FROM workers w
         WHERE w.disconnected_at IS NULL AND w.last_seen > now() - make_interval(secs => $2))::text AS workers
