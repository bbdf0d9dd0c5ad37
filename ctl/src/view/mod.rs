//! `akbench view`: the read-only web UI of [`akbench_viewer`] over a folder of run records
//! ([`index`], [`server`]: the folder source) or over a coordinator ([`coordinator`]: its gRPC
//! `Control` API as a [`akbench_viewer::source::Backend`]). The pages, routes and assets
//! are the viewer crate's, the same that the coordinator's HTTP listener serves.

pub mod coordinator;
pub mod index;
pub mod server;

pub use akbench_viewer::{html, live, model, pages, source};
