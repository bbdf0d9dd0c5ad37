//! akbench coordinator: owns benchmark plans and leases in PostgreSQL and streams work to
//! workers over gRPC.
//!
//! - [`pgcluster`]: private PostgreSQL clusters from the system binaries (tests, `akbench up`).
//! - [`pg_tls`]: PostgreSQL over TLS (`sslmode` up to `verify-full`, rustls).
//! - [`rows`]: typed rows (decoded by column name; a bad row is an error).
//! - [`store`]: the PostgreSQL store: pool, embedded migrations, transactions, error mapping.
//! - [`scheduler`]: work items, attempts, leases and fencing epochs.
//! - [`workers_service`]: the `Workers.Session` gRPC service.
//! - [`evidence`]: specs, plans and planned trials as immutable evidence in PostgreSQL.
//! - [`status`]: the run progress projection (gRPC, HTTP, web page and TUI show the same).
//! - [`auth`]: bearer tokens and roles (`worker`, `operator`, `viewer`).
//! - [`control_service`]: the gRPC `Control` service; [`work_control`] is the scheduler seam;
//!   [`client_input`]: the checks of the identifiers and text a request carries.
//! - [`http`]: the HTTP API, `/metrics`, health checks and the status page; [`metrics`].
//! - [`devcerts`]: development CA, server and worker certificates (`akbench certs`).
//! - [`tls`]: TLS of the listeners (certificate reload, client certificates);
//!   [`worker_identity`]: worker credentials and the worker-id binding.
//! - [`conn_guard`]: the listeners' connection limits and handshake and idle timeouts.
//! - [`server`]: [`server::Config`] and [`server::serve`], the whole process.

pub mod auth;
pub mod client_input;
pub mod conn_guard;
pub mod control_service;
pub mod convert;
pub mod devcerts;
pub mod error;
pub mod evidence;
pub mod grade_work;
pub mod http;
pub mod metrics;
pub mod pg_tls;
pub mod pgcluster;
pub mod queue_depth;
pub mod reconcile;
pub mod rows;
pub mod run_work;
pub mod scheduler;
pub mod server;
pub mod status;
pub mod status_network;
mod status_rows;
pub mod status_share;
pub mod status_steps;
pub mod store;
pub mod tls;
pub mod trial_records;
pub mod view_source;
pub mod work_control;
pub mod worker_identity;
pub mod workers_service;

pub use error::ControlError;
