//! akbench-core: the domain of akbench, pure and synchronous.
//!
//! Identities, canonical digests, task and agent formats, the attempt lifecycle and the run
//! record schema live here. Nothing in this crate talks to a network or a database; the only
//! I/O is reading task and agent descriptor files from disk in the loaders.
//!
//! [`observe`] holds the `claude-code` and `codex` adapters' pure halves: the argv that
//! launches each agent non-interactively and the parser that reads its JSON Lines output
//! into the record's [`record::Observations`].

pub mod accounting;
pub mod agent;
pub mod artifacts;
pub mod bounded_read;
pub mod buckets;
pub mod budget;
pub mod candidates;
pub mod clock;
pub mod compare;
pub mod connections;
pub mod digest;
pub mod dispatch;
pub mod egress;
pub mod endpoint;
pub mod evidence;
pub mod git_index;
pub mod grading;
pub mod grading_env;
pub mod harbor;
pub mod healthcheck;
pub mod html;
pub mod identity;
pub mod ids;
pub mod image;
pub mod interval;
pub mod lease_timing;
pub mod lifecycle;
pub mod limits;
pub mod manifest;
pub mod observe;
pub mod output;
pub mod paths;
pub mod placement;
pub mod plan;
pub mod ranges;
pub mod rates;
pub mod record;
pub mod redact;
pub mod report;
pub mod report_view;
pub mod route_pause;
pub mod run_list;
pub mod sandbox_needs;
pub mod selection;
pub mod spec;
pub mod spec_diff;
pub mod spend;
pub mod task;
pub mod task_check;
pub mod telemetry;
pub mod test_failure;
pub mod testkit;
pub mod trajectory;
pub mod transport;
pub mod trial_record;
pub mod uncollectable;
pub mod work;
