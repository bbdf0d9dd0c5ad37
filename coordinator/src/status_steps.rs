//! A run's multi-step tasks in its status (`[[steps]]`, issue 46): per task, for each step,
//! the trials that reached it, passed it, were stopped there, and its mean reward, tokens
//! and cost, counted by core's one definition ([`akbench_core::report::steps::task_steps`],
//! what `run aggregate` and `run report` apply to the records). The steps are read out of
//! the deciding attempts' accepted records (`sql/control/status_steps.sql`, over migration
//! 0037's partial index, so a run without multi-step tasks reads no record and makes no
//! second query); each multi-step task's done trials are then counted
//! (`status_step_trials.sql`), those whose deciding attempt ran no step included.

use std::collections::BTreeMap;

use akbench_core::record::steps::StepResult;
use akbench_core::report::steps::{task_steps, TaskSteps, TrialSteps};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::rows::{self, col, count, RowError};
use crate::store::StoreError;

const STEPS_SQL: &str = include_str!("../sql/control/status_steps.sql");
const TRIALS_SQL: &str = include_str!("../sql/control/status_step_trials.sql");

/// Why the steps could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StepsError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A row (or a record's steps) does not decode.
    #[error(transparent)]
    Row(#[from] RowError),
}

impl From<tokio_postgres::Error> for StepsError {
    fn from(e: tokio_postgres::Error) -> Self {
        StepsError::Store(e.into())
    }
}

/// The multi-step tasks of run `run` on `client`'s snapshot; empty for a run without any.
pub async fn run_steps(
    client: &impl GenericClient,
    run: Uuid,
) -> Result<Vec<TaskSteps>, StepsError> {
    let rows = client
        .query(&client.prepare_cached(STEPS_SQL).await?, &[&run])
        .await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let stepped = rows::all("status_steps.sql", &rows, |row| {
        let task: String = col(row, "task")?;
        let text: &str = col(row, "steps")?;
        let steps: Vec<StepResult> = serde_json::from_str(text).map_err(|e| RowError::Value {
            column: "steps",
            problem: e.to_string(),
        })?;
        Ok::<_, RowError>((task, steps))
    })?;
    let mut tasks: Vec<&str> = stepped.iter().map(|(t, _)| t.as_str()).collect();
    tasks.sort_unstable();
    tasks.dedup();
    let rows = client
        .query(&client.prepare_cached(TRIALS_SQL).await?, &[&run, &tasks])
        .await?;
    let done = rows::all("status_step_trials.sql", &rows, |row| {
        Ok::<_, RowError>((col::<String>(row, "task")?, count(row, "trials")?))
    })?;
    Ok(counted(&stepped, &done.into_iter().collect()))
}

/// Core's count over the trials with steps, `stepped` (task, the deciding attempt's steps),
/// and, for each task, as many trials without steps as its `done` trials exceed those.
pub fn counted(
    stepped: &[(String, Vec<StepResult>)],
    done: &BTreeMap<String, u64>,
) -> Vec<TaskSteps> {
    let mut trials: Vec<TrialSteps<'_>> = stepped
        .iter()
        .map(|(task, steps)| TrialSteps { task, steps })
        .collect();
    let mut with_steps: BTreeMap<&str, u64> = BTreeMap::new();
    for (task, _) in stepped {
        *with_steps.entry(task).or_default() += 1;
    }
    for (task, n) in with_steps {
        let all = done.get(task).copied().unwrap_or(n);
        for _ in n..all {
            trials.push(TrialSteps { task, steps: &[] });
        }
    }
    task_steps(&trials)
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::record::steps::StepVerdict;

    fn steps(verdicts: &[StepVerdict]) -> Vec<StepResult> {
        verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| StepResult {
                verdict: *v,
                ..StepResult::not_run(&format!("s{i}"))
            })
            .collect()
    }

    #[test]
    fn done_trials_without_steps_count_as_trials_of_their_task() {
        use StepVerdict::*;
        let stepped = vec![
            ("a".to_string(), steps(&[Solved, Solved])),
            ("a".to_string(), steps(&[Failed, NotRun])),
            ("b".to_string(), steps(&[NotGraded])),
        ];
        /// (done trials per task, want (task, trials, reached of the first step)).
        type Case<'a> = (Vec<(&'a str, u64)>, Vec<(&'a str, u64, u64)>);
        let cases: Vec<Case> = vec![
            // Every done trial has steps.
            (vec![("a", 2), ("b", 1)], vec![("a", 2, 2), ("b", 1, 1)]),
            // One more trial of `a` ended before its first step.
            (vec![("a", 3), ("b", 1)], vec![("a", 3, 2), ("b", 1, 1)]),
            // A task missing from the done counts (not yet counted) keeps its stepped trials.
            (vec![("a", 2)], vec![("a", 2, 2), ("b", 1, 1)]),
        ];
        for (done, want) in cases {
            let done = done.into_iter().map(|(t, n)| (t.to_string(), n)).collect();
            let got: Vec<(String, u64, u64)> = counted(&stepped, &done)
                .iter()
                .map(|t| (t.task.clone(), t.trials, t.steps[0].reached))
                .collect();
            let want: Vec<(String, u64, u64)> = want
                .into_iter()
                .map(|(t, n, r)| (t.to_string(), n, r))
                .collect();
            assert_eq!(got, want);
        }
        assert!(counted(&[], &BTreeMap::new()).is_empty());
    }
}
