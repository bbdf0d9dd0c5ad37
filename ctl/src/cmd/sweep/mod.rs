//! `akbench sweep experiment.yaml`: a whole run on this machine, in one command.
//!
//! - [`planned`]: the run planned, checked and stored, and its result shown: shared by both
//!   executors;
//! - [`embedded`]: the default executor: a private PostgreSQL, a coordinator and local
//!   workers (`shared::embedded`), the run submitted and started on them;
//! - [`local`] (`--local`): every trial in this process, dispatched over memory by core's
//!   `dispatch::memory` (core's policy: retries, budget, caps, the run and item machine)
//!   with provider route pauses from [`routes`].

pub mod embedded;
pub mod local;
mod planned;
mod routes;
