-- 0010_route_pauses: provider routes back off (DESIGN.md section 6).
--
-- One row per provider route that has seen an attempt end: consecutive provider failures
-- (an `infrastructure_error` whose cause starts "provider: "), the pause they earned (core's
-- `route_pause::next`) and the last failure's cause. While `paused_until` is in the future no
-- work item of the route is claimed (claim_candidates.sql); an attempt on the route that ran
-- against the provider resets it.
CREATE TABLE route_pauses (
    route                 text        PRIMARY KEY,
    consecutive_failures  integer     NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    paused_until          timestamptz,
    last_error            text,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
