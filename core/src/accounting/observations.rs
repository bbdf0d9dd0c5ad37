//! The observations file: one typed trial outcome per line (JSON Lines), documented in
//! docs/observations.md. A malformed line refuses the whole file, naming its line. A line may
//! also carry what the trial spent (`spend`: tokens and cost, e.g. from a Harbor import);
//! the accounting reads the outcome only.

use crate::lifecycle::State;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// One typed trial outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// The planned trial's UUID.
    pub trial_id: Uuid,
    /// The terminal state, snake_case (`completed`, `failed`, ...).
    #[serde(with = "state_name")]
    pub state: State,
    /// For `completed`: whether the task was solved. `null` otherwise.
    #[serde(deserialize_with = "present")]
    pub ok: Option<bool>,
    /// Score, when graded.
    #[serde(deserialize_with = "present")]
    pub score: Option<f64>,
    /// The attempt that produced the outcome.
    #[serde(deserialize_with = "present")]
    pub attempt_id: Option<Uuid>,
    /// Where the outcome came from (a harness, a file).
    #[serde(deserialize_with = "present")]
    pub source: Option<String>,
}

/// One line of the file as read: the outcome, and what the trial spent when the line says.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    trial_id: Uuid,
    #[serde(with = "state_name")]
    state: State,
    #[serde(deserialize_with = "present")]
    ok: Option<bool>,
    #[serde(deserialize_with = "present")]
    score: Option<f64>,
    #[serde(deserialize_with = "present")]
    attempt_id: Option<Uuid>,
    #[serde(deserialize_with = "present")]
    source: Option<String>,
    #[serde(default)]
    spend: Option<crate::spend::Spend>,
}

/// An observation with what its trial spent, as one line of the file is written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservedLine {
    /// The outcome.
    #[serde(flatten)]
    pub observation: Observation,
    /// Tokens and cost, when reported (the field is left out otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend: Option<crate::spend::Spend>,
}

/// An `Option` field that must be present (`null` allowed): serde would otherwise read a
/// missing `Option` field as `None`, and the format requires every field.
fn present<'de, D, T>(de: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(de)
}

mod state_name {
    use crate::lifecycle::State;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: &State, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<State, D::Error> {
        let s = String::deserialize(de)?;
        match State::parse(&s) {
            Some(st) if st.is_terminal() => Ok(st),
            Some(_) => Err(serde::de::Error::custom(format!(
                "state `{s}` is not terminal (expected completed, failed, timeout, cancelled, infrastructure_error, invalid_configuration, evaluation_error or not_graded)"
            ))),
            None => Err(serde::de::Error::custom(format!("unknown state `{s}`"))),
        }
    }
}

/// The observations file could not be read or is malformed; nothing was accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to read observations {}{}: {problem}; fix: see docs/observations.md (one JSON object per line)", file.display(), line.map(|l| format!(" at line {l}")).unwrap_or_default())]
pub struct ObservationsError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line of the first error, when the file was readable.
    pub line: Option<usize>,
    /// What is wrong.
    pub problem: String,
}

impl Observation {
    /// Checks the fields against each other.
    pub fn check(&self) -> Result<(), String> {
        match (self.state, self.ok) {
            (State::Completed, None) => {
                return Err("`completed` needs `ok`: true or false".into());
            }
            (State::Completed, Some(_)) => {}
            (s, Some(true)) => return Err(format!("`{s}` cannot have `ok: true`")),
            _ => {}
        }
        if let Some(x) = self.score {
            if !x.is_finite() {
                return Err("`score` is not a finite number".into());
            }
            if self.state == State::NotGraded {
                return Err("`not_graded` cannot have a score (it was never measured)".into());
            }
        }
        Ok(())
    }
}

/// Parses observations text (JSON Lines; blank lines are skipped). `file` names the input in
/// errors.
pub fn parse_observations(text: &str, file: &Path) -> Result<Vec<Observation>, ObservationsError> {
    Ok(parse_lines(text, file)?
        .into_iter()
        .map(|l| l.observation)
        .collect())
}

/// Parses observations text keeping each line's `spend`.
pub fn parse_lines(text: &str, file: &Path) -> Result<Vec<ObservedLine>, ObservationsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        let err = |problem: String| ObservationsError {
            file: file.to_path_buf(),
            line: Some(i + 1),
            problem,
        };
        let line: Line = serde_json::from_str(l).map_err(|e| {
            let mut m = e.to_string();
            // serde_json appends " at line 1 column C": the line is the file's, reported above.
            if let Some(i) = m.rfind(" at line ") {
                m.truncate(i);
            }
            err(format!("{m} (column {})", e.column()))
        })?;
        let o = Observation {
            trial_id: line.trial_id,
            state: line.state,
            ok: line.ok,
            score: line.score,
            attempt_id: line.attempt_id,
            source: line.source,
        };
        o.check().map_err(err)?;
        if let Some(c) = line.spend.and_then(|s| s.cost_usd) {
            if !c.is_finite() || c < 0.0 {
                return Err(err(format!(
                    "`spend.cost_usd` is {}: a cost is a finite number of dollars, 0 or more",
                    crate::limits::show_f64(c)
                )));
            }
        }
        out.push(ObservedLine {
            observation: o,
            spend: line.spend,
        });
    }
    Ok(out)
}

/// The largest observations file read, in bytes (one JSON line per trial of the largest
/// plan fits).
pub const MAX_OBSERVATIONS_BYTES: u64 = crate::bounded_read::ReadKind::Observations.cap();

/// Reads and parses an observations file.
pub fn load_observations(file: &Path) -> Result<Vec<Observation>, ObservationsError> {
    Ok(load_lines(file)?
        .into_iter()
        .map(|l| l.observation)
        .collect())
}

/// Reads and parses an observations file keeping each line's `spend`.
pub fn load_lines(file: &Path) -> Result<Vec<ObservedLine>, ObservationsError> {
    let text = crate::bounded_read::read_text(
        file,
        MAX_OBSERVATIONS_BYTES,
        crate::bounded_read::Links::Follow,
    )
    .map_err(|e| ObservationsError {
        file: file.to_path_buf(),
        line: None,
        problem: e.to_string(),
    })?;
    parse_lines(&text, file)
}

/// What the observation lines say the planned trials spent (tokens and cost).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ObservedSpend {
    /// The sum over the lines counted (a count no line reported stays `null`).
    #[serde(flatten)]
    pub spend: crate::spend::Spend,
    /// Lines counted: those of planned trials, a line repeated exactly counted once.
    pub lines: u64,
    /// Of those, lines that carry no `spend`.
    pub lines_without_spend: u64,
}

/// Sums the `spend` of the lines whose trial is planned (`planned`). A line repeated exactly
/// (the same outcome and the same spend: one result read twice) is counted once, as the
/// accounting counts an identical duplicate once; lines of one trial that differ (conflicting
/// results, quarantined by the accounting) each count, since each was spent. Lines of trials
/// the plan does not hold are left out (the accounting reports them as unexpected).
pub fn observed_spend(
    planned: &std::collections::HashSet<Uuid>,
    lines: &[ObservedLine],
) -> ObservedSpend {
    let mut by_trial: std::collections::BTreeMap<Uuid, Vec<&ObservedLine>> = Default::default();
    for l in lines {
        if planned.contains(&l.observation.trial_id) {
            let seen = by_trial.entry(l.observation.trial_id).or_default();
            if !seen.contains(&l) {
                seen.push(l);
            }
        }
    }
    let mut out = ObservedSpend::default();
    for l in by_trial.values().flatten() {
        out.lines += 1;
        match &l.spend {
            Some(s) => out.spend = out.spend.plus(s),
            None => out.lines_without_spend += 1,
        }
    }
    out
}
