//! [`SchedulerError`]: why a scheduler operation failed, by what the caller (usually a
//! worker session) should do about it.

use uuid::Uuid;

use crate::store::StoreError;

/// Why a scheduler operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The epoch is not the attempt's current lease epoch, or the lease was taken back
    /// (reaped): the sender lost the attempt and must stop it.
    #[error(
        "failed to accept a message about attempt {attempt_id}: epoch {epoch} is stale \
         (the lease was lost or taken back); stop the attempt"
    )]
    StaleEpoch {
        /// The attempt.
        attempt_id: Uuid,
        /// The epoch the message carried.
        epoch: i64,
    },
    /// A transition (or a terminal state) the lifecycle does not allow, or a re-sent `seq`
    /// whose content differs from the stored one.
    #[error("failed to record transition {seq} of attempt {attempt_id}: {reason}")]
    InvalidTransition {
        /// The attempt.
        attempt_id: Uuid,
        /// The first refused seq (0 for a finish that the lifecycle refuses).
        seq: u32,
        /// What is wrong.
        reason: String,
    },
    /// A different record was already accepted for the attempt; this one was quarantined.
    #[error(
        "failed to accept the record of attempt {attempt_id}: a different record ({accepted}) \
         was already accepted; this one ({digest}) was quarantined"
    )]
    RecordConflict {
        /// The attempt.
        attempt_id: Uuid,
        /// Digest of the accepted record.
        accepted: String,
        /// Digest of the refused one.
        digest: String,
    },
    /// The digest sent with a record does not match its canonical JSON.
    #[error(
        "failed to accept the record of attempt {attempt_id}: digest {claimed} does not match \
         the content, whose digest is {actual}"
    )]
    DigestMismatch {
        /// The attempt.
        attempt_id: Uuid,
        /// The digest sent.
        claimed: String,
        /// The digest of the canonical JSON.
        actual: String,
    },
    /// No such attempt, run or worker.
    #[error("failed to find {0}")]
    NotFound(String),
    /// Input that cannot be understood (bad JSON, a record for another attempt, a seq gap).
    #[error("failed to accept {what}: {reason}")]
    Malformed {
        /// What was refused.
        what: String,
        /// Why.
        reason: String,
        /// For transitions, the first refused seq; otherwise 0.
        seq: u32,
    },
    /// The database failed.
    #[error("failed to use the store: {0}")]
    Store(#[from] StoreError),
}

impl SchedulerError {
    /// A [`SchedulerError::Malformed`] about `what`.
    pub fn malformed(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Malformed {
            what: what.into(),
            reason: reason.into(),
            seq: 0,
        }
    }

    /// The seq this error is about, for transitions; otherwise 0.
    pub fn seq(&self) -> u32 {
        match self {
            Self::InvalidTransition { seq, .. } | Self::Malformed { seq, .. } => *seq,
            _ => 0,
        }
    }
}

impl From<tokio_postgres::Error> for SchedulerError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Store(error.into())
    }
}
