-- 0015_run_counts: per-run counters, so the status projection reads O(agents) rows of a run
-- instead of scanning its trials (about 0.4 s per call on a 100,000-trial run whose trials
-- all had records: the spend join of work_items x attempts x submissions, the retries join,
-- the index scans of every work item by state and bucket).
--
-- `run_counts` holds signed deltas, summed at read (`sql/control/status_counts.sql`):
--
-- - kind 'items', state 'total': work items inserted, per agent (`ready` is then
--   total - leased - done - cancelled; `leased` is read from the small partial index
--   work_items_leased, bounded by the live slots);
-- - kind 'items', state 'done' / 'cancelled', bucket (NULL for a done item whose bucket is
--   not known yet): work items in that state, per agent;
-- - kind 'retries': attempts beyond the first of their trial (number > 1), per agent;
-- - kind 'spend': `n` trials with at least one accepted record, `n_cost` trials of which a
--   record reported a cost, and the sums of the records' spend columns (migration 0013; NULL
--   where no record reported the value, never 0; the cost is summed as numeric, so the total
--   does not depend on the order of the deltas).
--
-- They are written by triggers in the transaction of the change itself, whoever writes
-- (scheduler, resume, cancel, grading), so a counter cannot disagree with the rows it
-- counts. Writers only INSERT (no row is ever updated by two writers: no hot row, no lock
-- waits, no deadlock between dispatch transactions); `akbench_compact_run_counts(run)`
-- folds a run's deltas into one row per key in one statement (DELETE ... RETURNING feeding
-- an INSERT of the sums, so totals never change) under a per-run advisory lock; status calls
-- it when a run has accumulated many deltas. Claims (ready -> leased) write nothing.

CREATE TABLE run_counts (
    run_id              uuid    NOT NULL,
    agent               text    NOT NULL,
    kind                text    NOT NULL CHECK (kind IN ('items', 'retries', 'spend')),
    state               text    NOT NULL DEFAULT '',
    bucket              text,
    n                   bigint  NOT NULL DEFAULT 0,
    n_cost              bigint  NOT NULL DEFAULT 0,
    input_tokens        numeric,
    cached_input_tokens numeric,
    output_tokens       numeric,
    cost_usd            numeric
);

CREATE INDEX run_counts_run ON run_counts (run_id);

-- Work items inserted: the total per agent, and any inserted already done or cancelled.
CREATE FUNCTION akbench_run_counts_items_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', 'total', NULL, count(*)
    FROM inserted GROUP BY run_id, agent
    UNION ALL
    SELECT run_id, agent, 'items', state, bucket, count(*)
    FROM inserted WHERE state IN ('done', 'cancelled')
    GROUP BY run_id, agent, state, bucket;
    RETURN NULL;
END
$$;

CREATE TRIGGER work_items_run_counts_insert AFTER INSERT ON work_items
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_run_counts_items_inserted();

-- Work items updated: a row that enters or leaves done / cancelled (or changes bucket there)
-- moves those counts by one. A row-level trigger whose WHEN PostgreSQL evaluates before any
-- function call, so claims and re-queues between ready and leased (most updates on the
-- dispatch path) cost nothing here: no transition table is captured, no function runs.
CREATE FUNCTION akbench_run_counts_item_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state IN ('done', 'cancelled') THEN
        INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
        VALUES (OLD.run_id, OLD.agent, 'items', OLD.state, OLD.bucket, -1);
    END IF;
    IF NEW.state IN ('done', 'cancelled') THEN
        INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
        VALUES (NEW.run_id, NEW.agent, 'items', NEW.state, NEW.bucket, 1);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER work_items_run_counts_update AFTER UPDATE ON work_items
    FOR EACH ROW
    WHEN ((OLD.state IN ('done', 'cancelled') OR NEW.state IN ('done', 'cancelled'))
          AND (OLD.state, OLD.bucket, OLD.run_id, OLD.agent)
              IS DISTINCT FROM (NEW.state, NEW.bucket, NEW.run_id, NEW.agent))
    EXECUTE FUNCTION akbench_run_counts_item_moved();

-- Attempts inserted beyond the first of their trial (a row-level trigger whose WHEN skips
-- first attempts, which the claim creates, without a function call).
CREATE FUNCTION akbench_run_counts_retry() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_counts (run_id, agent, kind, n)
    SELECT w.run_id, w.agent, 'retries', 1 FROM work_items w WHERE w.trial_id = NEW.trial_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER attempts_run_counts AFTER INSERT ON attempts
    FOR EACH ROW WHEN (NEW.number > 1)
    EXECUTE FUNCTION akbench_run_counts_retry();

-- Records accepted: their spend, and whether their trial now has its first record or its
-- first record with a cost. "Before" is the trial's records outside this statement plus the
-- ones of this statement already counted (the loop's arrays).
CREATE FUNCTION akbench_run_counts_spend() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    s record;
    t uuid;
    r uuid;
    ag text;
    had boolean;
    had_cost boolean;
    seen uuid[] := '{}';
    seen_cost uuid[] := '{}';
    runs uuid[] := '{}';
    agents text[] := '{}';
    ns bigint[] := '{}';
    costed bigint[] := '{}';
    ins numeric[] := '{}';
    cached numeric[] := '{}';
    outs numeric[] := '{}';
    costs numeric[] := '{}';
BEGIN
    FOR s IN SELECT attempt_id, input_tokens, cached_input_tokens, output_tokens, cost_usd
             FROM inserted LOOP
        SELECT a.trial_id, w.run_id, w.agent INTO t, r, ag
        FROM attempts a JOIN work_items w ON w.trial_id = a.trial_id
        WHERE a.attempt_id = s.attempt_id;
        CONTINUE WHEN t IS NULL;
        had := t = ANY (seen) OR EXISTS (
            SELECT 1 FROM attempts o JOIN submissions os ON os.attempt_id = o.attempt_id
            WHERE o.trial_id = t AND o.attempt_id <> s.attempt_id
              AND NOT EXISTS (SELECT 1 FROM inserted i WHERE i.attempt_id = o.attempt_id));
        had_cost := t = ANY (seen_cost) OR EXISTS (
            SELECT 1 FROM attempts o JOIN submissions os ON os.attempt_id = o.attempt_id
            WHERE o.trial_id = t AND o.attempt_id <> s.attempt_id AND os.cost_usd IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM inserted i WHERE i.attempt_id = o.attempt_id));
        seen := seen || t;
        IF s.cost_usd IS NOT NULL THEN
            seen_cost := seen_cost || t;
        END IF;
        runs := runs || r;
        agents := agents || ag;
        ns := ns || CASE WHEN had THEN 0::bigint ELSE 1::bigint END;
        costed := costed || CASE WHEN NOT had_cost AND s.cost_usd IS NOT NULL
                                 THEN 1::bigint ELSE 0::bigint END;
        ins := ins || s.input_tokens;
        cached := cached || s.cached_input_tokens;
        outs := outs || s.output_tokens;
        costs := costs || s.cost_usd::numeric;
    END LOOP;
    -- One delta per (run, agent) of the statement, however many records it stored.
    INSERT INTO run_counts (run_id, agent, kind, n, n_cost, input_tokens, cached_input_tokens,
                            output_tokens, cost_usd)
    SELECT u.r, u.ag, 'spend', sum(u.n), sum(u.nc), sum(u.i), sum(u.ci), sum(u.o), sum(u.c)
    FROM unnest(runs, agents, ns, costed, ins, cached, outs, costs)
         AS u (r, ag, n, nc, i, ci, o, c)
    GROUP BY u.r, u.ag;
    RETURN NULL;
END
$$;

CREATE TRIGGER submissions_run_counts AFTER INSERT ON submissions
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_run_counts_spend();

-- An accepted record is evidence and the spend counters summed it when it was stored: it is
-- never changed or removed afterwards (SQLSTATE AKB01, as the other append-only tables).
CREATE TRIGGER submissions_append_only BEFORE UPDATE OR DELETE ON submissions
    FOR EACH ROW EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER submissions_no_truncate BEFORE TRUNCATE ON submissions
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();

-- Folds the deltas of run `r` into one row per key; skipped (false) while another session
-- folds the same run. Totals are unchanged: the rows deleted are exactly the rows summed.
CREATE FUNCTION akbench_compact_run_counts(r uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('akbench_run_counts'), hashtext(r::text)) THEN
        RETURN false;
    END IF;
    WITH gone AS (
        DELETE FROM run_counts WHERE run_id = r RETURNING *
    )
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n, n_cost, input_tokens,
                            cached_input_tokens, output_tokens, cost_usd)
    SELECT run_id, agent, kind, state, bucket, sum(n), sum(n_cost), sum(input_tokens),
           sum(cached_input_tokens), sum(output_tokens), sum(cost_usd)
    FROM gone
    GROUP BY run_id, agent, kind, state, bucket;
    RETURN true;
END
$$;

-- Back-fill: the runs that exist now, counted from the raw tables (one row per key).
INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
SELECT run_id, agent, 'items', 'total', NULL, count(*)
FROM work_items GROUP BY run_id, agent
UNION ALL
SELECT run_id, agent, 'items', state, bucket, count(*)
FROM work_items WHERE state IN ('done', 'cancelled')
GROUP BY run_id, agent, state, bucket;

INSERT INTO run_counts (run_id, agent, kind, n)
SELECT w.run_id, w.agent, 'retries', count(*)
FROM attempts a JOIN work_items w ON w.trial_id = a.trial_id
WHERE a.number > 1
GROUP BY w.run_id, w.agent;

INSERT INTO run_counts (run_id, agent, kind, n, n_cost, input_tokens, cached_input_tokens,
                        output_tokens, cost_usd)
SELECT run_id, agent, 'spend', count(*), count(cost_usd), sum(input_tokens),
       sum(cached_input_tokens), sum(output_tokens), sum(cost_usd)
FROM (
    SELECT w.run_id, w.agent, w.trial_id,
           sum(s.input_tokens) AS input_tokens,
           sum(s.cached_input_tokens) AS cached_input_tokens,
           sum(s.output_tokens) AS output_tokens,
           sum(s.cost_usd::numeric) AS cost_usd
    FROM work_items w
    JOIN attempts a ON a.trial_id = w.trial_id
    JOIN submissions s ON s.attempt_id = a.attempt_id
    GROUP BY w.run_id, w.agent, w.trial_id
) per_trial
GROUP BY run_id, agent;
