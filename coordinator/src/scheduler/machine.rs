//! Applies core's run and item machine (`akbench_core::dispatch::machine`) inside a
//! transaction: the run row is locked and read (`run_for_update.sql`), core decides the event,
//! and the move is applied by a statement guarded by the state it was decided on
//! (`move_run.sql`, `start_run.sql`). Statements that move many items take
//! [`MoveColumns::of`] for their event. Nothing here decides a transition.

use akbench_core::dispatch::machine::{run_on, RunEvent, RunMove};
use akbench_core::dispatch::RunState;
use uuid::Uuid;

use crate::rows::{self, col, parsed};
use crate::store::{StoreError, Tx};

pub use akbench_core::dispatch::machine::{ItemEvent, MoveColumns};

/// A statement parameter.
pub type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// The parameters of a statement that applies the item moves `m` after `first`: `first`,
/// then from states, from outcomes, to states, to outcomes (each statement's `unnest`).
pub fn with_moves<'a>(first: &[Param<'a>], m: &'a MoveColumns) -> Vec<Param<'a>> {
    let mut p = first.to_vec();
    p.extend([
        &m.from_state as Param<'a>,
        &m.from_outcome,
        &m.to_state,
        &m.to_outcome,
    ]);
    p
}

const FINISH_RUNS_SQL: &str = include_str!("../../sql/scheduler/finish_runs.sql");
const RUNS_STILL_PENDING_SQL: &str = include_str!("../../sql/scheduler/runs_still_pending.sql");
const LOCK_RUNS_SQL: &str = include_str!("../../sql/scheduler/lock_runs.sql");
const END_RUNS_SQL: &str = include_str!("../../sql/scheduler/end_runs.sql");
const RUN_FOR_UPDATE_SQL: &str = include_str!("../../sql/scheduler/run_for_update.sql");
const MOVE_RUN_SQL: &str = include_str!("../../sql/scheduler/move_run.sql");

pub use akbench_core::dispatch::store::RunDecision;

/// Locks run `run_id`, decides the event `event_of` makes of its state and whether it has
/// work, and applies a move with `move_run.sql` unless `apply` is false (the caller applies
/// it with its own guarded statement, as the start does). `None`: no such run.
pub async fn decide_run(
    tx: &Tx<'_>,
    run_id: Uuid,
    event_of: impl FnOnce(bool) -> RunEvent,
    apply: bool,
) -> Result<Option<RunDecision>, StoreError> {
    let Some(row) = tx
        .query_opt(&tx.prepare_cached(RUN_FOR_UPDATE_SQL).await?, &[&run_id])
        .await?
    else {
        return Ok(None);
    };
    let from = parsed(&row, "state", RunState::parse)?;
    let has_work: bool = col(&row, "has_work")?;
    let decided = run_on(from, event_of(has_work));
    if let (true, Ok(RunMove::To(to))) = (apply, decided) {
        tx.execute(
            &tx.prepare_cached(MOVE_RUN_SQL).await?,
            &[&run_id, &from.as_str(), &to.as_str()],
        )
        .await?;
    }
    Ok(Some(RunDecision {
        from,
        has_work,
        decided,
    }))
}

/// Ends the runs among `runs` that have nothing ready or leased.
///
/// Most calls settle one trial of a run with many left: a run with a ready or leased item
/// that no other transaction is changing stays open, and that item is share-locked until
/// commit (`runs_still_pending.sql`, never waits), so the transaction that later settles it
/// waits for this one's commit and sees its work. For the other runs the run rows are
/// locked (in a fixed order), so two transactions settling a run's last two trials at once
/// serialize here and the second one, taking a fresh snapshot after the lock, sees the
/// first one's work: a run can never stay `running` with all its items done. Whether and
/// how a locked run ends is core's run machine (`dispatch::machine::run_on`, the idle event) over the run's state and
/// whether it is idle (`finish_runs.sql`), applied by one guarded statement (`end_runs.sql`).
pub async fn finish_runs(tx: &Tx<'_>, runs: &[Uuid]) -> Result<(), StoreError> {
    if runs.is_empty() {
        return Ok(());
    }
    let open = tx
        .query(&tx.prepare_cached(RUNS_STILL_PENDING_SQL).await?, &[&runs])
        .await?;
    let open: Vec<Uuid> = rows::all("runs_still_pending.sql", &open, |r| col(r, "run_id"))?;
    let undecided: Vec<Uuid> = runs.iter().filter(|r| !open.contains(r)).copied().collect();
    if undecided.is_empty() {
        return Ok(());
    }
    tx.query(&tx.prepare_cached(LOCK_RUNS_SQL).await?, &[&undecided])
        .await?;
    let rows = tx
        .query(&tx.prepare_cached(FINISH_RUNS_SQL).await?, &[&undecided])
        .await?;
    let (mut ids, mut from, mut to) = (Vec::new(), Vec::new(), Vec::new());
    for row in &rows {
        let run: Uuid = col(row, "run_id")?;
        let state = crate::rows::parsed(row, "state", RunState::parse)?;
        // Core's run machine decides the end of an idle run (running: finished; cancelling:
        // cancelled); every other state stays.
        let ended = match col::<bool>(row, "idle")?
            .then(|| run_on(state, RunEvent::Idle { all_enqueued: true }))
        {
            Some(Ok(RunMove::To(to))) => Some(to),
            _ => None,
        };
        if let Some(end) = ended {
            ids.push(run);
            from.push(state.as_str());
            to.push(end.as_str());
        }
    }
    if !ids.is_empty() {
        tx.execute(&tx.prepare_cached(END_RUNS_SQL).await?, &[&ids, &from, &to])
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Every statement that writes `runs.state` or `work_items.state` applies a transition
    //! core decided: the new state is a bound parameter (or a column of an `unnest` of
    //! parameters) and the row is guarded by the state it was decided on, never a literal.

    use std::path::{Path, PathBuf};

    /// The files below `dir` whose name ends `.{ext}`.
    fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, ext, out);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }

    /// The text without `--` comments.
    fn code(text: &str) -> String {
        text.lines()
            .map(|l| l.split("--").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Each `UPDATE runs` / `UPDATE work_items` statement: from the keyword to the end of its
    /// CTE (the closing parenthesis at its depth) or of the text.
    fn updates(code: &str) -> Vec<String> {
        let mut out = Vec::new();
        let lower = code
            .to_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for target in ["update runs", "update work_items"] {
            let mut from = 0;
            while let Some(i) = lower[from..].find(target) {
                let start = from + i;
                let mut depth = 0i32;
                let mut end = lower.len();
                for (j, ch) in lower[start..].char_indices() {
                    match ch {
                        '(' => depth += 1,
                        ')' if depth == 0 => {
                            end = start + j;
                            break;
                        }
                        ')' => depth -= 1,
                        _ => {}
                    }
                }
                out.push(lower[start..end].to_string());
                from = start + target.len();
            }
        }
        out
    }

    /// The right-hand sides of `state = X` (not `terminal_state`, `run_state`, ...) in `s`.
    fn state_operands(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let bytes = s.as_bytes();
        let mut from = 0;
        while let Some(i) = s[from..].find("state") {
            let at = from + i;
            from = at + 5;
            let before = at.checked_sub(1).map(|b| bytes[b]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                continue;
            }
            let rest = s[at + 5..].trim_start();
            let Some(rhs) = rest.strip_prefix('=') else {
                continue;
            };
            let rhs: String = rhs
                .trim_start()
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != ',')
                .collect();
            out.push(rhs);
        }
        out
    }

    fn decided(operand: &str) -> bool {
        operand.starts_with('$') || (operand.contains('.') && !operand.contains('\''))
    }

    #[test]
    fn every_statement_writing_a_run_or_item_state_applies_a_decided_guarded_move() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        let mut sql = Vec::new();
        files(&root, "sql", &mut sql);
        sql.sort();
        let mut writers = Vec::new();
        for f in &sql {
            let text = code(&std::fs::read_to_string(f).unwrap());
            for stmt in updates(&text) {
                let (set, guard) = match stmt.find(" where ") {
                    Some(w) => (&stmt[..w], &stmt[w..]),
                    None => (&stmt[..], ""),
                };
                let set_part = set.split(" from ").next().unwrap_or(set);
                let assigned = state_operands(set_part);
                if assigned.is_empty() {
                    continue;
                }
                let name = f.strip_prefix(&root).unwrap().display().to_string();
                writers.push(name.clone());
                for a in &assigned {
                    assert!(
                        decided(a),
                        "{name}: assigns state = {a}, not a decided move"
                    );
                }
                let guards = state_operands(guard);
                assert!(
                    !guards.is_empty() && guards.iter().all(|g| decided(g)),
                    "{name}: writes state without a guard on the state decided on ({guards:?})"
                );
            }
        }
        // The writers, so that a new one is looked at (and this test is seen to read them).
        writers.sort();
        writers.dedup();
        assert_eq!(
            writers,
            [
                "grading/requeue.sql",
                "scheduler/apply_effects.sql",
                "scheduler/budget_cancel.sql",
                "scheduler/cancel_run.sql",
                "scheduler/claim_create.sql",
                "scheduler/end_runs.sql",
                "scheduler/move_run.sql",
                "scheduler/requeue_revoked.sql",
                "scheduler/resume_items.sql",
                "scheduler/start_run.sql",
            ]
        );
        // No Rust outside test support writes a run's or item's state inline.
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut rs = Vec::new();
        files(&src, "rs", &mut rs);
        for f in rs {
            if f.ends_with("test_support.rs") || f.ends_with("machine.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap().to_lowercase();
            for stmt in updates(&text) {
                let set = stmt.split(" where ").next().unwrap_or(&stmt);
                assert!(
                    state_operands(set).is_empty(),
                    "{}: writes a state inline: {stmt}",
                    f.display()
                );
            }
        }
    }
}
