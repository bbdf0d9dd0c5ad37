//! `akbench view`: a local, read-only web UI over a folder of run records.
//!
//! [`index`] finds and aggregates the records (one compact row per trial, per-run summaries
//! and matrices computed here); [`pages`] renders HTML on the server ([`html`] holds escaping
//! and the page frame); [`server`] serves pages, `/api/...` JSON and server-sent progress
//! events. Assets are embedded (`assets/`); nothing is fetched from the network at view time.

pub mod html;
pub mod index;
pub mod pages;
pub mod server;
