//! akbench coordinator: owns benchmark plans and leases in PostgreSQL and streams work to
//! workers over gRPC.
//!
//! - [`pgcluster`]: private PostgreSQL clusters from the system binaries (tests, `akbench up`).
//! - [`store`]: the PostgreSQL store: pool, embedded migrations, transactions, error mapping.

pub mod pgcluster;
pub mod store;
