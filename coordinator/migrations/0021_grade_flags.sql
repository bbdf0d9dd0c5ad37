-- Whether an accepted record's grade was flagged `grading tampered`, and whether grading
-- withheld paths of the agent's diff (core::grading::integrity::GradeFlags::of_grade), as
-- columns of its submission computed by PostgreSQL when the record is stored: status,
-- reconcile and the viewer's compact rows count flagged trials per agent without parsing
-- records. Workers upload attempt records (`grade` at the top); a trial record
-- (`attempts[].grade`) is never stored as a submission. False without a grade.
ALTER TABLE submissions
    ADD COLUMN grade_tampered boolean NOT NULL
        GENERATED ALWAYS AS (COALESCE(record #> '{grade,tampered}' = 'true'::jsonb, false)) STORED,
    ADD COLUMN grade_withheld boolean NOT NULL
        GENERATED ALWAYS AS (
            COALESCE(jsonb_typeof(record #> '{grade,withheld}') = 'array'
                     AND record #> '{grade,withheld}' <> '[]'::jsonb, false)
        ) STORED;

-- Flagged records are few: the per-run flag counts start from them.
CREATE INDEX submissions_flagged ON submissions (attempt_id)
    WHERE grade_tampered OR grade_withheld;
