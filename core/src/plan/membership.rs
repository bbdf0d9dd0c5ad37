//! A plan's membership against its spec: the trial set is a function of the spec (tasks x
//! agents x repetitions x candidates, in that order, each with its condition), so a stored or
//! received plan whose trials differ from the spec's expansion (one removed, one added, one
//! altered, even with the plan's self-digest recomputed) is refused. Trial ids are random at
//! planning and are not compared (their form and uniqueness are [`super::PlanChecker`]'s).

use super::{Expansion, PlannedTrial};
use crate::spec::ResolvedRunSpec;
use uuid::Uuid;

/// Compares trials one at a time, in plan order, with the spec's expansion.
pub struct MembershipChecker<'a> {
    expected: Expansion<'a>,
    seen: u64,
}

impl std::fmt::Debug for MembershipChecker<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MembershipChecker")
            .field("seen", &self.seen)
            .finish()
    }
}

/// The trial without its random ids.
fn without_ids(t: &PlannedTrial) -> PlannedTrial {
    let mut t = t.clone();
    t.trial_id = Uuid::nil();
    if let Some(c) = &mut t.candidate {
        c.trial_id = Uuid::nil();
    }
    t
}

/// The first top-level field where `a` and `b` differ, for the message.
fn first_difference(a: &PlannedTrial, b: &PlannedTrial) -> String {
    let (a, b) = (
        serde_json::to_value(a).unwrap_or_default(),
        serde_json::to_value(b).unwrap_or_default(),
    );
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => a
            .keys()
            .chain(b.keys())
            .find(|k| a.get(*k) != b.get(*k))
            .cloned()
            .unwrap_or_default(),
        _ => String::new(),
    }
}

impl<'a> MembershipChecker<'a> {
    /// A checker for the plan of `spec`.
    pub fn new(spec: &'a ResolvedRunSpec) -> Self {
        Self {
            expected: Expansion::with_ids(spec, Box::new(Uuid::nil)),
            seen: 0,
        }
    }

    /// Checks the next trial in plan order.
    pub fn push(&mut self, t: &PlannedTrial) -> Result<(), String> {
        self.seen += 1;
        let Some(want) = self.expected.next() else {
            return Err(format!(
                "trial {} (ordinal {}) is not in the spec: the spec plans {} trials",
                crate::limits::elide(&t.key),
                t.ordinal,
                self.seen - 1
            ));
        };
        let got = without_ids(t);
        if got != want {
            return Err(format!(
                "trial {} (ordinal {}) differs from the spec's trial {} (field `{}`): a trial was removed, added or altered",
                crate::limits::elide(&t.key),
                t.ordinal,
                want.key,
                first_difference(&got, &want)
            ));
        }
        Ok(())
    }

    /// After the last trial: every trial of the spec was seen.
    pub fn finish(mut self) -> Result<(), String> {
        match self.expected.next() {
            None => Ok(()),
            Some(missing) => Err(format!(
                "the plan ends after {} trials but the spec plans more: trial {} (ordinal {}) is missing",
                self.seen, missing.key, missing.ordinal
            )),
        }
    }
}

/// Checks every trial of `trials` against `spec`.
pub fn check_membership<'t>(
    spec: &ResolvedRunSpec,
    trials: impl IntoIterator<Item = &'t PlannedTrial>,
) -> Result<(), String> {
    let mut c = MembershipChecker::new(spec);
    for t in trials {
        c.push(t)?;
    }
    c.finish()
}
