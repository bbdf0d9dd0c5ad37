//! akbench coordinator: owns benchmark plans and leases in PostgreSQL and streams work to
//! workers over gRPC.
//!
//! - [`pgcluster`]: private PostgreSQL clusters from the system binaries (tests, `akbench up`).
//! - [`store`]: the PostgreSQL store: pool, embedded migrations, transactions, error mapping.
//! - [`scheduler`]: work items, attempts, leases and fencing epochs.
//! - [`workers_service`]: the `Workers.Session` gRPC service.

pub mod pgcluster;
pub mod scheduler;
pub mod store;
pub mod workers_service;
