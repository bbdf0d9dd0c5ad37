//! The best-of-N selection rule ([`Selection`]) and a plan entry's place among its planned
//! trial's candidates ([`CandidateOf`]): the vocabulary a manifest, a spec, a plan and a run
//! record share. A leaf layer: it imports nothing from the crate; `candidates` (the rule
//! applied, pass@k, the candidate accounting) re-exports both under their old paths.

use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// How a planned trial's result is chosen among its candidates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    /// The lowest-numbered solved candidate; when none solved, the lowest-numbered graded
    /// one, else the lowest-numbered agent failure or timeout (the trial is unsolved). The
    /// default.
    #[default]
    FirstSolved,
    /// The graded candidate with the highest score (ties: the lowest number); decided only
    /// once every candidate is.
    BestScore,
    /// No single candidate is the trial's result: every candidate is reported (pass@k); the
    /// trial counts as solved when any candidate solved, as under `first_solved`.
    All,
}

/// The rules, as the manifest spells them.
pub const SELECTION_RULES: [&str; 3] = ["first_solved", "best_score", "all"];

impl Selection {
    /// The manifest's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Selection::FirstSolved => "first_solved",
            Selection::BestScore => "best_score",
            Selection::All => "all",
        }
    }

    /// Parses a manifest name.
    pub fn parse(s: &str) -> Option<Selection> {
        match s {
            "first_solved" => Some(Selection::FirstSolved),
            "best_score" => Some(Selection::BestScore),
            "all" => Some(Selection::All),
            _ => None,
        }
    }

    /// True for the default (left out of a spec's JSON so older digests stay).
    pub fn is_default(&self) -> bool {
        *self == Selection::default()
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// On a plan entry that is one candidate of a planned trial: which trial, which candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateOf {
    /// The planned trial's UUIDv7 (shared by its candidates).
    pub trial_id: Uuid,
    /// The planned trial's key, `<run key>/<task>/<agent>/r<rep>`.
    pub trial_key: String,
    /// This candidate's number, from 1.
    pub index: u32,
    /// How many candidates the trial has.
    pub of: u32,
    /// The trial's selection rule.
    pub selection: Selection,
}
