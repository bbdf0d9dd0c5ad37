//! Harbor 0.25's multi-step tasks (finite lifecycles): `[[steps]]` and
//! `multi_step_reward_strategy` of `task.toml`, read as Harbor reads them
//! (`harbor/models/task/config.py`: `StepConfig`, `MultiStepRewardStrategy`,
//! `TaskConfig.steps`; `harbor/models/task/step_name.py`), the step folders
//! `steps/<name>/{instruction.md,tests/,solution/,workdir/,workdir/setup.sh}`
//! (`harbor/models/task/paths.py`), and the two rules of a multi-step trial: the
//! `min_reward` gate that stops the remaining steps ([`min_reward_failure`]) and the
//! trial's reward from its steps' ([`trial_rewards`]), both from
//! `harbor/trial/multi_step.py` and `harbor/trial/trial.py`. Every key of a step is applied,
//! refused naming the file, the key and the fix, or kept as ignored (Harbor's models drop
//! unknown keys).

use super::fields::{check_artifacts, Walk};
use super::{TaskError, TaskErrorKind};
use crate::bounded_read::{read_text, Links};
use crate::healthcheck::Healthcheck;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use toml::{Table, Value};
use unicode_normalization::UnicodeNormalization;

/// The folder under the task that holds one folder per step.
pub const STEPS_DIR: &str = "steps";

/// Harbor's `VerifierConfig.timeout_sec` default, which a step's verifier always has: a
/// step is graded within its own `verifier.timeout_sec` or 600 seconds, never the
/// top-level one (`Trial._step_verifier_timeout_sec`, harbor/trial/trial.py).
pub const STEP_VERIFIER_TIMEOUT_SEC: f64 = 600.0;

/// `min_reward`: a number gates the `reward` key, a table each key it names
/// (`StepConfig.min_reward`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MinReward {
    /// The least `reward` that lets the next step run.
    Reward(f64),
    /// The least value of each key.
    Keys(BTreeMap<String, f64>),
}

/// `multi_step_reward_strategy` (`MultiStepRewardStrategy`): `mean` when unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewardStrategy {
    /// Per key, the mean over the steps that were graded; a key a step lacks counts 0.
    #[default]
    Mean,
    /// The last step's rewards as they are.
    Final,
}

impl RewardStrategy {
    /// The name written in `task.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            RewardStrategy::Mean => "mean",
            RewardStrategy::Final => "final",
        }
    }
}

/// One `[[steps]]` entry as written (checked; its folder not yet read).
#[derive(Debug, Clone, PartialEq)]
pub struct StepConfig {
    /// The step's folder name under `steps/`.
    pub name: String,
    /// `agent.timeout_sec`; unset: the task's.
    pub agent_timeout_sec: Option<f64>,
    /// `verifier.timeout_sec`; unset: [`STEP_VERIFIER_TIMEOUT_SEC`].
    pub verifier_timeout_sec: Option<f64>,
    /// `verifier.env`, over the top-level `[verifier] env`.
    pub verifier_env: BTreeMap<String, String>,
    /// `min_reward`.
    pub min_reward: Option<MinReward>,
    /// `healthcheck`, polled after the step's setup and before its agent, besides the
    /// top-level one (polled once, when the environment starts).
    pub healthcheck: Option<Healthcheck>,
    /// `artifacts`: the sources collected after the step's grading, besides the task's.
    pub artifacts: Vec<String>,
}

/// A loaded step: its settings resolved and its folder read.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Name, settings as written.
    pub config: StepConfig,
    /// `steps/<name>` (absolute).
    pub dir: PathBuf,
    /// `steps/<name>/instruction.md`: what the agent is told in this step.
    pub instruction: String,
    /// `steps/<name>/tests`, when present: copied over the top-level `tests/` for the
    /// step's grading (`Verifier._resolve_tests`, harbor/verifier/verifier.py).
    pub tests_dir: Option<PathBuf>,
    /// `steps/<name>/solution`, when present: the oracle runs its `solve.sh`; absent: the
    /// top-level `solution/` (`OracleAgent._resolve_solution_paths`).
    pub solution_dir: Option<PathBuf>,
    /// `steps/<name>/workdir`, when present: uploaded into the working folder before the
    /// step (`MultiStepTrial._upload_step_workdir`).
    pub workdir_dir: Option<PathBuf>,
    /// `steps/<name>/workdir/setup.sh` exists: run with `bash` in the working folder after
    /// the upload; failing, the step fails before its agent (`_run_step_setup`).
    pub has_setup: bool,
    /// The agent's time limit: the step's `agent.timeout_sec`, else the task's.
    pub agent_timeout_sec: f64,
    /// The grading's time limit: the step's `verifier.timeout_sec`, else 600.
    pub verifier_timeout_sec: f64,
}

/// Which step a step's view ([`super::Task::step_view`]) is, and what its reference
/// environment replays: the reference of step `k` is graded where steps `1..k` ran first
/// (each step's `workdir/` uploaded, its `setup.sh` run, its healthcheck polled, its
/// solution run as the agent), since a later step builds on what the earlier ones left.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOf {
    /// The step's index (0 for the first).
    pub index: usize,
    /// Every step up to and including this one, in order, each with the solution its
    /// oracle runs as `solution_dir` (its own, else the task's top-level `solution/`).
    pub replay: Vec<Step>,
}

/// Harbor's `validate_step_name`: a name usable as one folder on every host OS.
pub fn validate_name(name: &str) -> Result<(), String> {
    let invalid_char = |c: char| "<>:\"/\\|?*".contains(c) || (c as u32) < 0x20 || c == '\x7f';
    let stem = name.split('.').next().unwrap_or("").trim_end_matches(' ');
    let upper = stem.to_ascii_uppercase();
    let device = ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"].contains(&upper.as_str())
        || ((upper.starts_with("COM") || upper.starts_with("LPT"))
            && upper.chars().count() == 4
            && "123456789¹²³".contains(upper.chars().nth(3).unwrap_or(' ')));
    if name.trim().is_empty()
        || name == "."
        || name == ".."
        || name.ends_with('.')
        || name.ends_with(' ')
        || name.chars().any(invalid_char)
        || device
    {
        return Err(format!(
            "`{}` is not a portable folder name (no path separators, control characters, any of <>:\"/\\|?*, device names such as CON, or trailing dots or spaces)",
            crate::limits::elide(name)
        ));
    }
    if name.len() > 255 {
        return Err("is longer than 255 UTF-8 bytes".into());
    }
    Ok(())
}

/// Harbor's `step_name_key`: names that collide on a case-insensitive, Unicode-normalizing
/// file system have the same key (NFC, then case folded; Rust's lowercase stands for
/// Python's `casefold`).
pub fn name_key(name: &str) -> String {
    name.nfc().collect::<String>().to_lowercase()
}

/// `multi_step_reward_strategy`.
pub(super) fn strategy(w: &mut Walk<'_>, v: &Value) -> Result<RewardStrategy, TaskError> {
    let field = "multi_step_reward_strategy";
    let s = w.string(field, v)?;
    let out = match s {
        "mean" => RewardStrategy::Mean,
        "final" => RewardStrategy::Final,
        other => {
            return Err(w.err(
                field,
                format!("is `{}`", crate::limits::elide(other)),
                "write `mean` (per key, the mean over the steps) or `final` (the last step's), or remove it for `mean`",
            ))
        }
    };
    w.apply(
        field,
        "the trial's reward from its steps': `mean` (per key, missing keys as 0; steps not graded left out) or `final` (the last step's)",
    );
    Ok(out)
}

/// `[[steps]]`: each entry checked and classified; `doc` is the whole file (the artifact
/// check reads `[environment] workdir`).
pub(super) fn walk(w: &mut Walk<'_>, v: &Value, doc: &Table) -> Result<Vec<StepConfig>, TaskError> {
    let Value::Array(items) = v else {
        return Err(w.err(
            "steps",
            format!("is a {}, not a list of tables", v.type_str()),
            "write each step as a `[[steps]]` table with a `name`",
        ));
    };
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for item in items {
        let t = w.table("steps", item)?;
        let name = match t.get("name") {
            Some(v) => w.string("steps.name", v)?.to_string(),
            None => {
                return Err(w.err(
                    "steps.name",
                    format!("is missing in step {}", out.len() + 1),
                    "give every `[[steps]]` a `name` (its folder under steps/)",
                ))
            }
        };
        validate_name(&name).map_err(|why| {
            w.err(
                "steps.name",
                why,
                "name the step as its folder under steps/, e.g. `setup-db`",
            )
        })?;
        // TaskConfig.validate_unique_step_names.
        if !seen.insert(name_key(&name)) {
            return Err(w.err(
                "steps.name",
                format!(
                    "`{}` is used twice (names equal up to case or Unicode normalization collide)",
                    crate::limits::elide(&name)
                ),
                "give every step a different name",
            ));
        }
        out.push(step(w, &name, t, doc)?);
    }
    w.apply(
        "steps",
        "run in order in one environment: per step its workdir and setup.sh, healthcheck, agent with the step's instruction, grading with tests/ and the step's tests/, artifacts; a step below its min_reward stops the rest",
    );
    Ok(out)
}

/// Records `field` once (a key set by several steps is one row).
fn once(w: &mut Walk<'_>, field: &str, applied: bool, why: &str) {
    if w.uses.iter().any(|u| u.field == field) {
        return;
    }
    if applied {
        w.apply(field, why);
    } else {
        w.ignore(field, why);
    }
}

fn step(w: &mut Walk<'_>, name: &str, t: &Table, doc: &Table) -> Result<StepConfig, TaskError> {
    let mut c = StepConfig {
        name: name.to_string(),
        agent_timeout_sec: None,
        verifier_timeout_sec: None,
        verifier_env: BTreeMap::new(),
        min_reward: None,
        healthcheck: None,
        artifacts: Vec::new(),
    };
    for (k, v) in t {
        let field = format!("steps.{k}");
        match k.as_str() {
            "name" => {}
            "agent" => {
                let a = w.table(&field, v)?;
                for (k, v) in a {
                    let field = format!("steps.agent.{k}");
                    match k.as_str() {
                        "timeout_sec" => {
                            c.agent_timeout_sec = Some(w.number(&field, v)?);
                            once(
                                w,
                                &field,
                                true,
                                "the step's agent time limit (else the task's)",
                            );
                        }
                        "user" | "network_mode" | "allowed_hosts" => {
                            return Err(w.err(
                                &field,
                                format!("does not take effect in akbench (step `{name}`)"),
                                refused_fix(k),
                            ))
                        }
                        _ => once(w, &field, false, super::UNKNOWN_KEY),
                    }
                }
            }
            "verifier" => {
                let vt = w.table(&field, v)?;
                for (k, v) in vt {
                    let field = format!("steps.verifier.{k}");
                    match k.as_str() {
                        "timeout_sec" => {
                            c.verifier_timeout_sec = Some(w.number(&field, v)?);
                            once(w, &field, true, "the step's grading time limit (else 600 seconds, Harbor's default for a step)");
                        }
                        "env" => {
                            c.verifier_env = w.string_map(&field, v)?;
                            once(
                                w,
                                &field,
                                true,
                                "the step's grading environment, over `[verifier] env`",
                            );
                        }
                        "environment_mode" if w.string(&field, v)? == "shared" => {
                            once(
                                w,
                                &field,
                                true,
                                "steps are graded in the agent's environment",
                            );
                        }
                        "collect" if v.as_array().is_some_and(Vec::is_empty) => {
                            once(w, &field, false, "empty: no collect hooks");
                        }
                        "environment_mode" | "environment" | "collect" | "user"
                        | "network_mode" | "allowed_hosts" => {
                            return Err(w.err(
                                &field,
                                format!("does not take effect in akbench (step `{name}`)"),
                                refused_fix(k),
                            ))
                        }
                        _ => once(w, &field, false, super::UNKNOWN_KEY),
                    }
                }
            }
            "min_reward" => {
                c.min_reward = Some(min_reward(w, name, v)?);
                once(w, &field, true, "a step below it (a number: the `reward` key; a table: each key; missing: minus infinity) stops the remaining steps");
            }
            "healthcheck" => {
                let h = crate::healthcheck::parse(v).map_err(|why| {
                    w.err(
                        &field,
                        format!("{why} (step `{name}`)"),
                        "write `healthcheck = { command = \"...\" }` with Harbor's optional interval_sec, timeout_sec, start_period_sec, start_interval_sec, retries",
                    )
                })?;
                c.healthcheck = Some(h);
                once(w, &field, true, "polled after the step's setup and before its agent; failing is the infrastructure's");
            }
            "artifacts" => {
                check_artifacts(w, &field, v, doc)?;
                c.artifacts = artifact_sources(v);
                once(
                    w,
                    &field,
                    true,
                    "collected after the step's grading, besides the task's",
                );
            }
            _ => once(w, &field, false, super::UNKNOWN_KEY),
        }
    }
    Ok(c)
}

fn refused_fix(key: &str) -> &'static str {
    match key {
        "user" => "remove it (agents and grading run as the environment's user)",
        "network_mode" | "allowed_hosts" => {
            "set the network once for the task, in the top-level `[agent]` / `[verifier]`, and remove it from the step"
        }
        "collect" => "snapshot the state from the step's tests/test.sh, or remove the hooks",
        _ => "remove it: steps are graded in the agent's environment (`environment_mode = \"shared\"`)",
    }
}

/// The `source` of each (already checked) artifact entry.
fn artifact_sources(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| match i {
            Value::String(s) => Some(s.clone()),
            Value::Table(t) => t.get("source").and_then(Value::as_str).map(str::to_string),
            _ => None,
        })
        .collect()
}

fn min_reward(w: &Walk<'_>, name: &str, v: &Value) -> Result<MinReward, TaskError> {
    let field = "steps.min_reward";
    let fix =
        "write a number (gates `reward`) such as 1.0, or a table of keys such as { tests = 1.0 }";
    let num = |v: &Value| match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) if !f.is_nan() => Some(*f),
        _ => None,
    };
    match v {
        Value::Table(t) => {
            let mut keys = BTreeMap::new();
            for (k, v) in t {
                let x = num(v).ok_or_else(|| {
                    w.err(
                        field,
                        format!("`{k}` is a {}, not a number (step `{name}`)", v.type_str()),
                        fix,
                    )
                })?;
                keys.insert(k.clone(), x);
            }
            Ok(MinReward::Keys(keys))
        }
        other => num(other).map(MinReward::Reward).ok_or_else(|| {
            w.err(
                field,
                format!(
                    "is a {}, not a number or a table (step `{name}`)",
                    other.type_str()
                ),
                fix,
            )
        }),
    }
}

fn io(file: PathBuf, why: impl Into<String>) -> TaskError {
    TaskError {
        file,
        kind: TaskErrorKind::Io(why.into()),
    }
}

/// Reads each step's folder under `dir`. `agent_timeout_sec` is the task's; `top_test` says
/// whether the top-level tests/test.sh exists (a step without its own grades with it);
/// `own_command`: the task sets `[verifier] command` (no test.sh is required).
pub(super) fn load(
    dir: &Path,
    configs: &[StepConfig],
    agent_timeout_sec: f64,
    top_test: bool,
    own_command: bool,
) -> Result<Vec<Step>, TaskError> {
    let toml_path = dir.join(super::TASK_FILE);
    let mut out = Vec::new();
    for c in configs {
        let sdir = dir.join(STEPS_DIR).join(&c.name);
        if !sdir.is_dir() {
            return Err(io(
                sdir,
                format!(
                    "is missing; step `{}` needs its folder with instruction.md (and tests/, solution/, workdir/ as it uses them)",
                    c.name
                ),
            ));
        }
        let ipath = sdir.join(super::INSTRUCTION_FILE);
        let instruction =
            read_text(&ipath, super::MAX_TASK_FILE_BYTES, Links::Follow).map_err(|e| {
                io(
                    ipath.clone(),
                    format!("{e}; write what the agent is told in step `{}`", c.name),
                )
            })?;
        if instruction.trim().is_empty() {
            return Err(io(
                ipath,
                "is empty; write what the agent is told in this step",
            ));
        }
        let sub = |n: &str| Some(sdir.join(n)).filter(|p| p.is_dir());
        let tests_dir = sub("tests");
        let own_test = tests_dir
            .as_ref()
            .is_some_and(|t| t.join("test.sh").is_file());
        if !own_test && !top_test && !own_command {
            return Err(io(
                sdir.join("tests").join("test.sh"),
                format!(
                    "is missing, and so is tests/test.sh: step `{}` has nothing to grade it; add steps/{}/tests/test.sh or tests/test.sh",
                    c.name, c.name
                ),
            ));
        }
        let solution_dir = sub("solution");
        if let Some(s) = &solution_dir {
            // OracleAgent._resolve_solution_paths: a step's solution folder must hold its
            // solve script.
            if !s.join("solve.sh").is_file() {
                return Err(io(
                    s.join("solve.sh"),
                    format!("is missing: step `{}` has a solution/ folder without solve.sh; add it or remove the folder", c.name),
                ));
            }
        }
        let workdir_dir = sub("workdir");
        let has_setup = workdir_dir
            .as_ref()
            .is_some_and(|w| w.join("setup.sh").is_file());
        let agent_timeout_sec = super::check_timeout(
            &toml_path,
            "steps.agent.timeout_sec",
            c.agent_timeout_sec,
            agent_timeout_sec,
        )?;
        let verifier_timeout_sec = super::check_timeout(
            &toml_path,
            "steps.verifier.timeout_sec",
            c.verifier_timeout_sec,
            STEP_VERIFIER_TIMEOUT_SEC,
        )?;
        out.push(Step {
            config: c.clone(),
            dir: sdir,
            instruction,
            tests_dir,
            solution_dir,
            workdir_dir,
            has_setup,
            agent_timeout_sec,
            verifier_timeout_sec,
        });
    }
    Ok(out)
}

/// The folders whose files make step `step`'s tests, in copy order (a later one's file wins):
/// the task's `tests/` when it exists, then the step's own (`Verifier._resolve_tests`).
pub fn test_sources(task_tests: &Path, step: &Step) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if task_tests.is_dir() {
        out.push(task_tests.to_path_buf());
    }
    out.extend(step.tests_dir.clone());
    out
}

impl super::Task {
    /// Step `index` of this multi-step task as the one-step task its part of the trial runs:
    /// the step's instruction, its solution for the oracle (else the task's), its agent and
    /// grading time limits, `[verifier] env` with the step's over it, graded in the agent's
    /// environment (`shared`, Harbor's default for steps), with `merged_tests` (the
    /// [`test_sources`] copied there by the caller) as its tests. Its release is the task's:
    /// the step is part of the trial, not a task of its own. The step's healthcheck is
    /// [`StepConfig::healthcheck`]; the view has no steps, and knows which step it is
    /// ([`StepOf`]: what its reference environment replays).
    pub fn step_view(&self, index: usize, merged_tests: &Path) -> Result<super::Task, TaskError> {
        let step = self.steps.get(index).ok_or_else(|| {
            io(
                self.dir.join(super::TASK_FILE),
                format!(
                    "has {} step(s), not a step {}; fix: name a step of the task",
                    self.steps.len(),
                    index + 1
                ),
            )
        })?;
        let digest = |d: &Path| super::dir_digest(d).map_err(|e| io(d.to_path_buf(), e));
        let mut t = self.clone();
        t.instruction = step.instruction.clone();
        t.tests_dir = merged_tests.to_path_buf();
        t.tests_digest = digest(merged_tests)?;
        if let Some(d) = &step.solution_dir {
            t.reference = Some((d.clone(), digest(d)?));
        }
        t.agent_timeout_sec = step.agent_timeout_sec;
        t.verifier_timeout_sec = step.verifier_timeout_sec;
        t.file.verifier.env.extend(step.config.verifier_env.clone());
        t.file.verifier.environment_mode = Some("shared".into());
        t.family = super::Family::Artefact;
        // Each replayed step with the solution its oracle runs (its own, else the task's).
        let top = self.reference.as_ref().map(|(d, _)| d.clone());
        let replay = self.steps[..=index]
            .iter()
            .map(|s| Step {
                solution_dir: s.solution_dir.clone().or_else(|| top.clone()),
                ..s.clone()
            })
            .collect();
        t.step_of = Some(StepOf { index, replay });
        t.steps = Vec::new();
        Ok(t)
    }
}

/// Why a step's rewards stop the remaining steps, or `None` when they pass its gate
/// (`MultiStepTrial._min_reward_failure`, harbor/trial/multi_step.py): a number gates the
/// `reward` key, a table each of its keys; a missing key, or no rewards at all (the
/// grading crashed), is minus infinity.
pub fn min_reward_failure(
    rewards: Option<&BTreeMap<String, f64>>,
    min: &MinReward,
) -> Option<String> {
    let thresholds = match min {
        MinReward::Reward(x) => BTreeMap::from([("reward".to_string(), *x)]),
        MinReward::Keys(k) => k.clone(),
    };
    for (key, threshold) in thresholds {
        let actual = rewards
            .and_then(|r| r.get(&key).copied())
            .unwrap_or(f64::NEG_INFINITY);
        if actual < threshold {
            return Some(format!("{key}={actual} below min_reward {threshold}"));
        }
    }
    None
}

/// Whether the trial stops after a step (`MultiStepTrial._should_stop_after_step`): a step
/// that failed without a grade stops it; else its `min_reward` gate decides. `grading`:
/// verification is on (Harbor skips the gate when it is globally disabled).
pub fn stops_after(
    failed: bool,
    rewards: Option<&BTreeMap<String, f64>>,
    min: Option<&MinReward>,
    grading: bool,
) -> Option<String> {
    if failed && rewards.is_none() {
        return Some("the step failed before it was graded".into());
    }
    match min {
        Some(m) if grading => min_reward_failure(rewards, m),
        _ => None,
    }
}

/// The trial's rewards from its steps' (`Trial._select_multi_step_reward` and
/// `_aggregate_step_rewards`, harbor/trial/trial.py): `final` is the last step's (none when
/// it was not graded); `mean` is, per key any graded step has, the mean over the graded
/// steps with a missing key as 0 (steps not graded are left out; none graded, or no key:
/// none).
pub fn trial_rewards(
    strategy: RewardStrategy,
    steps: &[Option<BTreeMap<String, f64>>],
) -> Option<BTreeMap<String, f64>> {
    match strategy {
        RewardStrategy::Final => steps.last().cloned().flatten(),
        RewardStrategy::Mean => {
            let graded: Vec<&BTreeMap<String, f64>> = steps.iter().flatten().collect();
            let keys: BTreeSet<&String> = graded.iter().flat_map(|r| r.keys()).collect();
            if graded.is_empty() || keys.is_empty() {
                return None;
            }
            let n = graded.len() as f64;
            Some(
                keys.into_iter()
                    .map(|k| {
                        let sum: f64 = graded
                            .iter()
                            .map(|r| r.get(k).copied().unwrap_or(0.0))
                            .sum();
                        (k.clone(), sum / n)
                    })
                    .collect(),
            )
        }
    }
}

#[cfg(test)]
#[path = "steps_tests.rs"]
mod tests;
