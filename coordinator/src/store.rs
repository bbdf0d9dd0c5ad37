//! The coordinator's PostgreSQL store: a connection pool, numbered migrations embedded in the
//! binary, one transaction helper ([`Store::tx`]) and its read-snapshot sibling
//! ([`Store::snapshot`]), and SQLSTATE codes mapped to domain errors.
//!
//! Schema: see `coordinator/migrations/` (numbered, embedded with `include_str!`) and
//! `coordinator/sql/`. Evidence tables (`run_specs`, `plans`, `planned_trials`) are
//! append-only, enforced by a trigger that raises SQLSTATE `AKB01` ([`StoreError::Immutable`]).
//! Operational tables (`runs`, `work_items`, `attempts`, `submissions`, `quarantine`,
//! `workers`) change as work moves; the rows attempts refer to (`work_items`, `workers`) are
//! never deleted and the references never change (the same SQLSTATE, migration 0029).

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use sha2::{Digest as _, Sha256};

/// A transaction handed to the closure of [`Store::tx`].
pub type Tx<'t> = deadpool_postgres::Transaction<'t>;

/// The future a [`Store::tx`] closure returns: boxed, `Send`, borrowing the transaction.
pub type TxFuture<'t, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 't>>;

/// How many times [`Store::tx`] runs a transaction that hits a serialization failure or a
/// deadlock before giving up with [`StoreError::Retryable`].
pub const MAX_TX_ATTEMPTS: u32 = 5;

/// SQLSTATE raised by the triggers that keep rows for good: the evidence tables' append-only
/// trigger and the refusals of migration 0029.
pub const SQLSTATE_IMMUTABLE: &str = "AKB01";

/// The advisory lock key that serialises migrators ("akbench" in ASCII).
const MIGRATION_LOCK: i64 = 0x61_6b62_656e_6368;

/// The bookkeeping table of applied migrations.
const SCHEMA_MIGRATIONS_SQL: &str = include_str!("../sql/schema_migrations.sql");
/// The applied migrations (`version, name, checksum`), in order; `/readyz` reads it too.
pub(crate) const APPLIED_MIGRATIONS_SQL: &str = include_str!("../sql/migrations_book/applied.sql");
const MIGRATION_CHECKSUM_SQL: &str = include_str!("../sql/migrations_book/checksum_of.sql");
const RECORD_MIGRATION_SQL: &str = include_str!("../sql/migrations_book/record.sql");
const LOCK_MIGRATIONS_SQL: &str = include_str!("../sql/migrations_book/lock.sql");

/// Connections the pool keeps at most.
const POOL_SIZE: usize = 16;

/// One numbered schema migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// The number in the file name (`NNNN_name.sql`), from 1, contiguous.
    pub version: i32,
    /// The name in the file name.
    pub name: &'static str,
    /// The SQL, run as one transaction.
    pub sql: &'static str,
}

impl Migration {
    /// sha256 of the SQL, hex: an applied migration must never change.
    pub fn checksum(&self) -> String {
        hex::encode(Sha256::digest(self.sql.as_bytes()))
    }
}

/// Every migration this binary knows, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("../migrations/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "scheduler",
        sql: include_str!("../migrations/0002_scheduler.sql"),
    },
    Migration {
        version: 3,
        name: "control",
        sql: include_str!("../migrations/0003_control.sql"),
    },
    Migration {
        version: 4,
        name: "work_documents",
        sql: include_str!("../migrations/0004_work_documents.sql"),
    },
    Migration {
        version: 5,
        name: "status_buckets",
        sql: include_str!("../migrations/0005_status_buckets.sql"),
    },
    Migration {
        version: 6,
        name: "perf_bucket_lookups",
        sql: include_str!("../migrations/0006_perf_bucket_lookups.sql"),
    },
    Migration {
        version: 7,
        name: "worker_disconnects",
        sql: include_str!("../migrations/0007_worker_disconnects.sql"),
    },
    Migration {
        version: 8,
        name: "transitions_statement_checks",
        sql: include_str!("../migrations/0008_transitions_statement_checks.sql"),
    },
    Migration {
        version: 9,
        name: "worker_credentials",
        sql: include_str!("../migrations/0009_worker_credentials.sql"),
    },
    Migration {
        version: 10,
        name: "route_pauses",
        sql: include_str!("../migrations/0010_route_pauses.sql"),
    },
    Migration {
        version: 11,
        name: "dispatch_policy",
        sql: include_str!("../migrations/0011_dispatch_policy.sql"),
    },
    Migration {
        version: 12,
        name: "budget_cancel_reason",
        sql: include_str!("../migrations/0012_budget_cancel_reason.sql"),
    },
    Migration {
        version: 13,
        name: "submission_spend",
        sql: include_str!("../migrations/0013_submission_spend.sql"),
    },
    Migration {
        version: 14,
        name: "run_agents",
        sql: include_str!("../migrations/0014_run_agents.sql"),
    },
    Migration {
        version: 15,
        name: "run_counts",
        sql: include_str!("../migrations/0015_run_counts.sql"),
    },
    Migration {
        version: 16,
        name: "dispatch_triggers",
        sql: include_str!("../migrations/0016_dispatch_triggers.sql"),
    },
    Migration {
        version: 17,
        name: "empty_causes",
        sql: include_str!("../migrations/0017_empty_causes.sql"),
    },
    Migration {
        version: 18,
        name: "settle_buckets",
        sql: include_str!("../migrations/0018_settle_buckets.sql"),
    },
    Migration {
        version: 19,
        name: "records_statement",
        sql: include_str!("../migrations/0019_records_statement.sql"),
    },
    Migration {
        version: 20,
        name: "dispatch_effects",
        sql: include_str!("../migrations/0020_dispatch_effects.sql"),
    },
    Migration {
        version: 21,
        name: "grade_flags",
        sql: include_str!("../migrations/0021_grade_flags.sql"),
    },
    Migration {
        version: 22,
        name: "replicas",
        sql: include_str!("../migrations/0022_replicas.sql"),
    },
    Migration {
        version: 23,
        name: "rules_in_rust",
        sql: include_str!("../migrations/0023_rules_in_rust.sql"),
    },
    Migration {
        version: 24,
        name: "replica_ttl",
        sql: include_str!("../migrations/0024_replica_ttl.sql"),
    },
    Migration {
        version: 25,
        name: "start_without_row_work",
        sql: include_str!("../migrations/0025_start_without_row_work.sql"),
    },
    Migration {
        version: 26,
        name: "submit_without_capture",
        sql: include_str!("../migrations/0026_submit_without_capture.sql"),
    },
    Migration {
        version: 27,
        name: "done_by_ordinal",
        sql: include_str!("../migrations/0027_done_by_ordinal.sql"),
    },
    Migration {
        version: 28,
        name: "transitions_in_attempts",
        sql: include_str!("../migrations/0028_transitions_in_attempts.sql"),
    },
    Migration {
        version: 29,
        name: "attempt_refs_by_statement",
        sql: include_str!("../migrations/0029_attempt_refs_by_statement.sql"),
    },
    Migration {
        version: 30,
        name: "no_live_attempts_by_worker",
        sql: include_str!("../migrations/0030_no_live_attempts_by_worker.sql"),
    },
    Migration {
        version: 31,
        name: "planned_trial_text",
        sql: include_str!("../migrations/0031_planned_trial_text.sql"),
    },
    Migration {
        version: 32,
        name: "grade_unguarded",
        sql: include_str!("../migrations/0032_grade_unguarded.sql"),
    },
    // 0033 is another change's number (issue 48's state machine).
    Migration {
        version: 34,
        name: "claim_from_runs",
        sql: include_str!("../migrations/0034_claim_from_runs.sql"),
    },
    Migration {
        version: 35,
        name: "network_counts",
        sql: include_str!("../migrations/0035_network_counts.sql"),
    },
    Migration {
        version: 36,
        name: "state_enums",
        sql: include_str!("../migrations/0036_state_enums.sql"),
    },
    Migration {
        version: 37,
        name: "submission_steps",
        sql: include_str!("../migrations/0037_submission_steps.sql"),
    },
    Migration {
        version: 38,
        name: "deciding_attempts",
        sql: include_str!("../migrations/0038_deciding_attempts.sql"),
    },
];

/// Why a store operation failed, by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database URL cannot be parsed.
    #[error("failed to parse the database URL: {0}")]
    InvalidUrl(String),
    /// The database cannot be reached or the connection broke (SQLSTATE class 08, 57P0x,
    /// 53300, pool timeouts, I/O errors). Retry later.
    #[error("failed to reach the database: {0}")]
    Unavailable(String),
    /// A unique constraint refused a duplicate (SQLSTATE 23505).
    #[error("failed to write: a row with the same {constraint} already exists ({message})")]
    Conflict {
        /// The unique constraint or index.
        constraint: String,
        /// The server's message.
        message: String,
    },
    /// A referenced row does not exist (SQLSTATE 23503).
    #[error("failed to write: a referenced row does not exist ({constraint}: {message})")]
    ForeignKey {
        /// The foreign-key constraint.
        constraint: String,
        /// The server's message.
        message: String,
    },
    /// A change refused because the rows are kept for good (SQLSTATE AKB01): an UPDATE,
    /// DELETE or TRUNCATE of append-only evidence (`run_specs`, `plans`, `planned_trials`), a
    /// DELETE or TRUNCATE of the rows attempts refer to (`work_items`, `workers`), or a
    /// change of those references. The server's message says which.
    #[error("failed to change {table}: its rows are kept for good ({message})")]
    Immutable {
        /// The table.
        table: String,
        /// The server's message.
        message: String,
    },
    /// A serialization failure or deadlock (SQLSTATE 40001, 40P01) that persisted through
    /// [`MAX_TX_ATTEMPTS`] attempts. Safe to retry the whole operation.
    #[error("failed to commit after retries: {0}")]
    Retryable(String),
    /// Data refused by a check, not-null or type constraint (SQLSTATE class 22, 23502, 23514).
    #[error("failed to store invalid data: {0}")]
    Invalid(String),
    /// The database has a migration this binary does not know: it was migrated by a newer
    /// coordinator.
    #[error(
        "failed to start: the database has migration {version} ({name}) that this coordinator \
         does not know; upgrade the coordinator"
    )]
    UnknownMigration {
        /// The unknown version.
        version: i32,
        /// Its recorded name.
        name: String,
    },
    /// An applied migration differs from the one embedded in this binary.
    #[error(
        "failed to start: migration {version} ({name}) applied to the database differs from \
         this coordinator's copy; the migration file was edited after it was applied"
    )]
    MigrationMismatch {
        /// The version.
        version: i32,
        /// Its name.
        name: String,
    },
    /// A migration's SQL failed.
    #[error("failed to apply migration {version} ({name}): {source}")]
    Migration {
        /// The version.
        version: i32,
        /// Its name.
        name: &'static str,
        /// What went wrong.
        source: Box<StoreError>,
    },
    /// A stored row that does not decode (a NULL where none belongs, an unknown state
    /// name, a damaged document): an error, never a default.
    #[error("failed to read a stored row: {0}")]
    BadRow(#[from] crate::rows::RowError),
    /// Any other database error.
    #[error("failed to query the database: {0}")]
    Database(#[source] tokio_postgres::Error),
}

impl StoreError {
    /// True for serialization failures and deadlocks: rerunning the transaction may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable(_))
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        let Some(db) = error.as_db_error() else {
            let io = std::error::Error::source(&error)
                .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some());
            return if error.is_closed() || io {
                // With its causes: "error performing TLS handshake" alone does not say why.
                let mut text = error.to_string();
                let mut source = std::error::Error::source(&error);
                while let Some(s) = source {
                    let s_text = s.to_string();
                    if !text.contains(&s_text) {
                        text = format!("{text}: {s_text}");
                    }
                    source = s.source();
                }
                Self::Unavailable(text)
            } else {
                Self::Database(error)
            };
        };
        let message = db.message().to_string();
        let constraint = || db.constraint().unwrap_or("constraint").to_string();
        match db.code().code() {
            "23505" => Self::Conflict {
                constraint: constraint(),
                message,
            },
            "23503" => Self::ForeignKey {
                constraint: constraint(),
                message,
            },
            "40001" | "40P01" => Self::Retryable(message),
            SQLSTATE_IMMUTABLE => Self::Immutable {
                table: db.table().unwrap_or("evidence").to_string(),
                message,
            },
            "23502" | "23514" => Self::Invalid(message),
            "57P01" | "57P02" | "57P03" | "53300" => Self::Unavailable(message),
            code if code.starts_with("08") => Self::Unavailable(message),
            code if code.starts_with("22") => Self::Invalid(message),
            _ => Self::Database(error),
        }
    }
}

impl From<PoolError> for StoreError {
    fn from(error: PoolError) -> Self {
        match error {
            PoolError::Backend(e) => e.into(),
            other => Self::Unavailable(other.to_string()),
        }
    }
}

/// The coordinator's database: a pool of connections.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("status", &self.pool.status())
            .finish()
    }
}

impl Store {
    /// Opens a pool on `url` (`postgres://user@host:port/db`) and checks that it connects.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let (rest, tls) = crate::pg_tls::split_tls_params(url)
            .map_err(|e| StoreError::InvalidUrl(format!("{e}; fix: correct the database URL")))?;
        let mut config = tokio_postgres::Config::from_str(&rest)
            .map_err(|e| StoreError::InvalidUrl(format!("{rest:?}: {e}")))?;
        config.ssl_mode(tls.mode.negotiation());
        let connector =
            crate::pg_tls::PgTls::new(&tls).map_err(|e| StoreError::InvalidUrl(e.to_string()))?;
        let manager = Manager::from_config(
            config,
            connector,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        drop(pool.get().await?);
        Ok(Self { pool })
    }

    /// The underlying pool (for queries that need no transaction).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A connection from the pool.
    pub async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// Opens a read-only REPEATABLE READ transaction on `conn` (a connection of this store's
    /// pool): every query in it reads one snapshot, so a projection's queries all see one
    /// moment (a trial settled in between is in all of them or in none). The sibling of
    /// [`Store::tx`] for reads: read-only, it takes no row lock and cannot hit a
    /// serialization failure, so nothing is retried; there is nothing to commit either
    /// (dropping the transaction ends it).
    pub async fn snapshot(conn: &mut deadpool_postgres::Object) -> Result<Tx<'_>, StoreError> {
        Ok(conn
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?)
    }

    /// Runs `f` in a transaction and commits it; rolls back when `f` fails.
    ///
    /// Serialization failures and deadlocks (from `f` or from the commit) rerun `f` in a new
    /// transaction, up to [`MAX_TX_ATTEMPTS`] times in all, so `f` must be safe to rerun.
    /// `f` is called once per attempt; capture owned values by reference (`let id = &id;`)
    /// so that each attempt's `async move` block can borrow them.
    ///
    /// ```no_run
    /// # async fn example(store: &akbench_coordinator::store::Store) -> Result<(), akbench_coordinator::store::StoreError> {
    /// let workers: i64 = store
    ///     .tx(|tx| Box::pin(async move {
    ///         let row = tx.query_one("SELECT count(*) AS n FROM workers", &[]).await?;
    ///         Ok(akbench_coordinator::rows::col(&row, "n")?)
    ///     }))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn tx<T, F>(&self, mut f: F) -> Result<T, StoreError>
    where
        F: for<'t> FnMut(&'t Tx<'t>) -> TxFuture<'t, T> + Send,
        T: Send,
    {
        let mut client = self.client().await?;
        let mut attempt = 1;
        loop {
            let tx = client.transaction().await?;
            let result = match f(&tx).await {
                Ok(value) => tx.commit().await.map(|()| value).map_err(StoreError::from),
                Err(error) => {
                    // Dropping the transaction would also roll back; an explicit rollback
                    // keeps the connection clean for the retry.
                    let _ = tx.rollback().await;
                    Err(error)
                }
            };
            match result {
                Err(error) if error.is_retryable() && attempt < MAX_TX_ATTEMPTS => attempt += 1,
                other => return other,
            }
        }
    }

    /// Applies the migrations this binary knows and the database lacks, each in its own
    /// transaction under an advisory lock, so concurrent coordinators migrate once. Returns
    /// the versions applied by this call (empty when the schema was current).
    ///
    /// Refuses a database that has a migration this binary does not know, or whose applied
    /// migration differs from the embedded one.
    pub async fn migrate(&self) -> Result<Vec<i32>, StoreError> {
        let mut client = self.client().await?;

        let tx = client.transaction().await?;
        lock_migrations(&tx).await?;
        tx.batch_execute(SCHEMA_MIGRATIONS_SQL).await?;
        let rows = tx.query(APPLIED_MIGRATIONS_SQL, &[]).await?;
        let applied = crate::rows::all("applied.sql", &rows, |row| {
            use crate::rows::col;
            Ok((
                col(row, "version")?,
                col(row, "name")?,
                col(row, "checksum")?,
            ))
        })?;
        for (version, name, checksum) in applied {
            let checksum: String = checksum;
            match MIGRATIONS.iter().find(|m| m.version == version) {
                None => return Err(StoreError::UnknownMigration { version, name }),
                Some(known) => check_checksum(known, &checksum)?,
            }
        }
        tx.commit().await?;

        let mut applied = Vec::new();
        for migration in MIGRATIONS {
            let tx = client.transaction().await?;
            lock_migrations(&tx).await?;
            let existing = tx
                .query_opt(MIGRATION_CHECKSUM_SQL, &[&migration.version])
                .await?;
            if let Some(row) = existing {
                // Applied earlier, or by a concurrent migrator while this one waited.
                let checksum: &str =
                    crate::rows::one("checksum_of.sql", &row, |r| crate::rows::col(r, "checksum"))?;
                check_checksum(migration, checksum)?;
                continue;
            }
            let failed = |e: tokio_postgres::Error| StoreError::Migration {
                version: migration.version,
                name: migration.name,
                source: Box::new(e.into()),
            };
            tx.batch_execute(migration.sql).await.map_err(failed)?;
            tx.execute(
                RECORD_MIGRATION_SQL,
                &[&migration.version, &migration.name, &migration.checksum()],
            )
            .await?;
            tx.commit().await.map_err(failed)?;
            applied.push(migration.version);
        }
        Ok(applied)
    }
}

async fn lock_migrations(tx: &Tx<'_>) -> Result<(), StoreError> {
    tx.execute(LOCK_MIGRATIONS_SQL, &[&MIGRATION_LOCK]).await?;
    Ok(())
}

fn check_checksum(migration: &Migration, applied: &str) -> Result<(), StoreError> {
    if migration.checksum() == applied {
        Ok(())
    } else {
        Err(StoreError::MigrationMismatch {
            version: migration.version,
            name: migration.name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_in_increasing_order() {
        assert_eq!(MIGRATIONS[0].version, 1);
        for pair in MIGRATIONS.windows(2) {
            assert!(pair[0].version < pair[1].version, "{}", pair[1].name);
        }
        for m in MIGRATIONS {
            assert!(!m.sql.trim().is_empty(), "{}", m.name);
        }
    }

    #[test]
    fn every_migration_file_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        files.sort();
        let embedded: Vec<String> = MIGRATIONS
            .iter()
            .map(|m| format!("{:04}_{}.sql", m.version, m.name))
            .collect();
        assert_eq!(files, embedded);
    }
}
