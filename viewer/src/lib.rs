//! akbench's read-only web viewer: the pages and routes shared by `akbench view` (over a
//! folder of records, or over a coordinator) and by the coordinator's own HTTP listener.
//!
//! [`model`] aggregates trials into what the pages show (one compact row per trial, rates,
//! matrix, progress); [`live`] words a coordinator run's live status (ETA, workers, paused
//! routes); [`pages`] renders HTML on the server ([`html`] holds escaping and the page frame);
//! [`source`] is the data-source trait (folder | coordinator) and the cached coordinator
//! source; [`compare`] is the compare page (two runs paired as `run compare` pairs them);
//! [`transcript`] renders an attempt's ATIF trajectory on the trial page; [`steps`] a
//! multi-step attempt's steps there; [`server`] serves pages, `/api/...` JSON and server-sent progress events over any
//! source. Assets are embedded (`assets/`); nothing is fetched from the network at view time.

pub mod compare;
pub mod html;
pub mod live;
pub mod model;
pub mod pages;
pub mod server;
pub mod source;
pub mod steps;
pub mod transcript;
