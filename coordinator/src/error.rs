//! The control plane's domain error, [`ControlError`], and its one conversion to a gRPC
//! [`tonic::Status`]. Every message is lowercase, starts with "failed to ...", names the input
//! and says what to do.

use crate::store::StoreError;

/// Why a control-plane operation failed, by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No run with that UUID or key.
    #[error("failed to find run `{}`: no run on this coordinator has that UUID or key; fix: pass the run key or UUID that `akbench run plan` or `akbench sweep` printed", akbench_core::limits::elide(.0))]
    RunNotFound(String),
    /// The request is malformed (bad JSON, a digest mismatch, an empty field, ...).
    #[error("failed to {action}: {field}: {problem}")]
    Invalid {
        /// What was being done (`submit plan`, `list runs`, ...).
        action: &'static str,
        /// The field of the request at fault.
        field: &'static str,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// Different documents are already stored under the same run id or key.
    #[error("failed to submit plan: {0}; fix: plan a new run instead of rewriting this one (evidence is immutable)")]
    Conflict(String),
    /// The run is not in a state that allows the operation.
    #[error("failed to {action} run `{run}`: {problem}")]
    Precondition {
        /// The operation.
        action: &'static str,
        /// The run.
        run: String,
        /// Why not, and what to do.
        problem: String,
    },
    /// A dependency (the database, the scheduler) cannot serve now; retry later.
    #[error("failed to {action}: {problem}; fix: retry later")]
    Unavailable {
        /// The operation.
        action: &'static str,
        /// What is unavailable.
        problem: String,
    },
    /// Stored evidence is damaged or inconsistent.
    #[error("failed to read stored evidence of run `{run}`: {problem}; fix: the database was altered, restore it from a backup")]
    Corrupt {
        /// The run.
        run: String,
        /// What is wrong.
        problem: String,
    },
    /// Any other database error.
    #[error("failed to {action}: {source}")]
    Store {
        /// The operation.
        action: &'static str,
        /// The store error.
        #[source]
        source: StoreError,
    },
}

impl ControlError {
    /// Wraps a store error with the operation it interrupted.
    pub fn store(action: &'static str) -> impl FnOnce(StoreError) -> ControlError {
        move |source| match source {
            StoreError::Unavailable(problem) | StoreError::Retryable(problem) => {
                ControlError::Unavailable { action, problem }
            }
            source => ControlError::Store { action, source },
        }
    }

    /// A malformed request field.
    pub fn invalid(action: &'static str, field: &'static str, problem: impl Into<String>) -> Self {
        ControlError::Invalid {
            action,
            field,
            problem: problem.into(),
        }
    }
}

impl From<ControlError> for tonic::Status {
    fn from(error: ControlError) -> Self {
        let message = error.to_string();
        match error {
            ControlError::RunNotFound(_) => tonic::Status::not_found(message),
            ControlError::Invalid { .. } => tonic::Status::invalid_argument(message),
            ControlError::Conflict(_) => tonic::Status::already_exists(message),
            ControlError::Precondition { .. } => tonic::Status::failed_precondition(message),
            ControlError::Unavailable { .. } => tonic::Status::unavailable(message),
            ControlError::Corrupt { .. } | ControlError::Store { .. } => {
                tracing::error!(%message, "internal error");
                tonic::Status::internal(message)
            }
        }
    }
}
