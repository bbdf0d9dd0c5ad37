//! The seam between the control service and the scheduler: [`WorkControl`] starts, resumes
//! and cancels runs. The scheduler implements it; this crate holds no implementation, and a
//! coordinator built without one answers those three calls with `UNAVAILABLE`.

use std::future::Future;
use std::pin::Pin;

use akbench_core::route_pause::Lift;
use uuid::Uuid;

use crate::error::ControlError;

/// A boxed, `Send` future returned by [`WorkControl`].
pub type WorkFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ControlError>> + Send + 'a>>;

/// What resuming a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resumed {
    /// Work items put back in the queue by expiring stale leases (or created by starting a
    /// planned run).
    pub requeued: u64,
    /// Trials queued for grading (executed, not graded; only with `grade`).
    pub grading: u64,
    /// Trials owed a grade that could not be queued (their stored work item or record is
    /// unusable); they keep their `not_graded` outcome.
    pub not_gradable: u64,
}

/// What cancelling a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cancelled {
    /// Live attempts asked to stop.
    pub live: u64,
    /// Why the run did not move, when it did not (an ended run's outcomes stand).
    pub unchanged: Option<String>,
}

/// Starts, resumes and cancels runs (the scheduler's side of `StartRun`, `ResumeRun` and
/// `CancelRun`). Each call names a run that exists (the control service has looked it up).
pub trait WorkControl: Send + Sync + std::fmt::Debug {
    /// Fixes the run's ready plan and creates its work items; returns how many this call
    /// created (0 when the run was already started).
    fn start(&self, run_id: Uuid) -> WorkFuture<'_, u64>;
    /// Re-queues the trials without an accepted outcome and, when `grade`, queues grading for
    /// the trials that were executed but not graded (never running their agent again).
    fn resume(&self, run_id: Uuid, grade: bool) -> WorkFuture<'_, Resumed>;
    /// Stops scheduling the run and cancels its live attempts with `reason`; says how many
    /// live attempts were asked to stop, or why the run did not move (it had ended).
    fn cancel(&self, run_id: Uuid, reason: String) -> WorkFuture<'_, Cancelled>;
    /// Lifts the pause of provider route `route` by hand; its state before, `None` when no
    /// attempt ever ran on it.
    fn lift_route(&self, route: String) -> WorkFuture<'_, Option<Lift>>;
}

/// The [`WorkControl`] of a coordinator with no scheduler wired in: every call is refused as
/// unavailable.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoScheduler;

impl NoScheduler {
    fn refuse<T: Send + 'static>(action: &'static str) -> WorkFuture<'static, T> {
        Box::pin(async move {
            Err(ControlError::Unavailable {
                action,
                problem: "this coordinator has no scheduler wired in".into(),
            })
        })
    }
}

impl WorkControl for NoScheduler {
    fn start(&self, _run_id: Uuid) -> WorkFuture<'_, u64> {
        Self::refuse("start run")
    }

    fn resume(&self, _run_id: Uuid, _grade: bool) -> WorkFuture<'_, Resumed> {
        Self::refuse("resume run")
    }

    fn cancel(&self, _run_id: Uuid, _reason: String) -> WorkFuture<'_, Cancelled> {
        Self::refuse("cancel run")
    }

    fn lift_route(&self, _route: String) -> WorkFuture<'_, Option<Lift>> {
        Self::refuse("resume route")
    }
}
