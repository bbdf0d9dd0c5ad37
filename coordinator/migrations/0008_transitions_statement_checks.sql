-- 0008_transitions_statement_checks: a transition's attempt is checked once per statement.
--
-- The foreign key transitions.attempt_id -> attempts was checked once per inserted row by the
-- row-level RI trigger: eleven checks per attempt, the largest share of PostgreSQL's
-- end-of-statement trigger time when workers stream transitions. As 0005 did for
-- planned_trials, one statement-level trigger now checks all inserted rows with one
-- anti-join, raising the same SQLSTATE 23503 naming the same constraint. It is the same
-- guarantee because transitions are only ever inserted (never updated) and attempts are
-- never deleted: a trigger now refuses DELETE and TRUNCATE of attempts (SQLSTATE AKB01).
ALTER TABLE transitions DROP CONSTRAINT transitions_attempt_id_fkey;

CREATE FUNCTION akbench_transitions_attempt_exists() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing uuid;
BEGIN
    SELECT n.attempt_id INTO missing
    FROM (SELECT DISTINCT attempt_id FROM inserted) n
    WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.attempt_id = n.attempt_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "transitions" violates foreign key constraint "transitions_attempt_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'transitions_attempt_id_fkey',
                  TABLE = 'transitions', SCHEMA = TG_TABLE_SCHEMA,
                  DETAIL = format('Key (attempt_id)=(%s) is not present in table "attempts".', missing);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER transitions_attempt_exists AFTER INSERT ON transitions
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_transitions_attempt_exists();

CREATE FUNCTION akbench_transitions_no_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'UPDATE of attempt_id in transitions refused: transitions are only inserted'
        USING ERRCODE = 'AKB01', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
END
$$;

CREATE TRIGGER transitions_attempt_fixed BEFORE UPDATE OF attempt_id ON transitions
    FOR EACH ROW EXECUTE FUNCTION akbench_transitions_no_update();

CREATE TRIGGER attempts_no_delete BEFORE DELETE ON attempts
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER attempts_no_truncate BEFORE TRUNCATE ON attempts
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();
