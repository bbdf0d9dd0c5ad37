-- Puts done trials back in the queue as grade work: their document names the attempt to
-- grade; the retry budget is the plan's again (grading has its own infrastructure retries).
-- They leave their done counter and bucket until the grade decides it (migration 0020: no
-- trigger does it). $1 run id; $2 trial ids; $3 grade work documents; $4 retry budgets; $5
-- now, the scheduler's clock (ready at once by the clock claims compare with); $6-$9 the moves
-- core's item machine makes on a grade requeue (`dispatch::machine::MoveColumns::of(
-- ItemEvent::GradeRequeue)`: done items), each item guarded by the class it was decided on:
-- from states, from outcomes, to states, to outcomes. Returns how many were queued.
WITH old AS (
    SELECT w.trial_id, w.bucket, w.state, m.to_state, m.to_outcome
    FROM work_items w
    JOIN unnest($6::text[]::item_state[], $7::text[], $8::text[]::item_state[], $9::text[])
         AS m (from_state, from_outcome, to_state, to_outcome)
      ON w.state = m.from_state AND w.outcome IS NOT DISTINCT FROM m.from_outcome
    WHERE w.trial_id = ANY ($2::uuid[]) AND w.run_id = $1
    FOR UPDATE OF w
), requeued AS (
    UPDATE work_items w
    SET kind = 'grade', state = o.to_state, outcome = o.to_outcome, bucket = NULL, document = t.document,
        retry_budget = t.budget, ready_at = $5::timestamptz, updated_at = now()
    FROM unnest($2::uuid[], $3::jsonb[], $4::int4[]) AS t (trial_id, document, budget), old o
    WHERE w.trial_id = t.trial_id AND o.trial_id = t.trial_id AND w.state = o.state
    RETURNING w.run_id, w.agent, o.bucket AS bucket_old
), counted AS (
    INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
    SELECT run_id, agent, 'items', 'done', bucket_old, -count(*)
    FROM requeued
    GROUP BY run_id, agent, bucket_old
)
SELECT count(*)::bigint AS queued FROM requeued
