-- 0018_settle_buckets: the settle writes the bucket of the trials it makes done
-- (`sql/scheduler/settle_items.sql`, with the bucket trigger's own expression), and the
-- bucket trigger (migration 0005) runs only where the writer of a row that becomes done (or
-- is re-decided) left the bucket as it was: every other writer is still decided by the
-- trigger, and a row that leaves done still loses its bucket. On the dispatch path this saves
-- one PL/pgSQL call per settled trial (about 17 us beyond its query,
-- `pg_stat_statements.track = all`; docs/PERFORMANCE.md "Coordinator dispatch").
DROP TRIGGER work_items_bucket ON work_items;
CREATE TRIGGER work_items_bucket BEFORE UPDATE ON work_items
    FOR EACH ROW
    WHEN ((NEW.state = 'done' AND (OLD.state <> 'done' OR NEW.attempts_used <> OLD.attempts_used)
           AND NEW.bucket IS NOT DISTINCT FROM OLD.bucket)
          OR (NEW.state <> 'done' AND NEW.bucket IS NOT NULL))
    EXECUTE FUNCTION akbench_work_item_bucket();
