-- Whether an accepted record's grade is solved without a tripwire that failed as it must
-- (core::grading::integrity::GradeFlags::of_grade, `unguarded`: core::grading::tripwire_held
-- is the one rule, `grade.tripwire.result` = 'failed as it must'): no tripwire twin applies
-- to the task, or it was ineffective, unconfirmed or gave no verdict. Status, reconcile and
-- the viewer's compact rows count such verdicts per agent beside `grade_tampered` and
-- `grade_withheld` (migration 0021). Adding a stored column rewrites `submissions` once.
ALTER TABLE submissions
    ADD COLUMN grade_unguarded boolean NOT NULL
        GENERATED ALWAYS AS (
            COALESCE(record #> '{grade,ok}' = 'true'::jsonb
                     AND COALESCE(record #>> '{grade,tripwire,result}', '') <> 'failed as it must',
                     false)
        ) STORED;

DROP INDEX submissions_flagged;
CREATE INDEX submissions_flagged ON submissions (attempt_id)
    WHERE grade_tampered OR grade_withheld OR grade_unguarded;
