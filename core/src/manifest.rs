//! The experiment manifest (`experiment.yaml`): what a user asks for.
//!
//! This module owns the on-disk format (see docs/manifest.md), its parsing with
//! `serde_norway` and the checks that need no other file. Unknown fields are errors that
//! name the field and the line. Turning a manifest into exact task releases and agent
//! conditions is [`crate::spec::resolve`]'s job.
//!
//! Layer: below `task`, `spec` and `plan`; imports `agent` (environment-variable names) and
//! leaves. The budget cap ([`Budget`]) and the diff limits live here; `budget` and `spec` re-
//! export them under their old paths.

use crate::agent::is_env_name;
use crate::ids::is_valid_name;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `experiment.yaml` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentManifest {
    /// Experiment name; the first part of the run key.
    pub experiment: String,
    /// One line saying what the experiment measures.
    #[serde(default)]
    pub description: Option<String>,
    /// Which tasks to run.
    pub tasks: TaskSelection,
    /// The agent conditions.
    pub agents: AgentSelection,
    /// Trials per (task, agent) pair; default 1.
    #[serde(default)]
    pub repetitions: Option<u32>,
    /// Resources and limits of one trial.
    #[serde(default)]
    pub compute: ComputeSection,
    /// How trials execute.
    #[serde(default)]
    pub execution: ExecutionSection,
    /// Whether and how trials are graded.
    #[serde(default)]
    pub evaluation: EvaluationSection,
    /// Who may see the results; default `private`.
    #[serde(default)]
    pub visibility: Option<Visibility>,
    /// Environment-variable names the run needs (never values).
    #[serde(default)]
    pub credentials: Vec<String>,
    /// Optional references to external authorities.
    #[serde(default)]
    pub references: References,
}

/// `tasks:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSelection {
    /// Folder holding one folder per task, relative to the manifest; `--tasks-root` wins.
    #[serde(default)]
    pub root: Option<PathBuf>,
    /// Task ids selected explicitly.
    #[serde(default)]
    pub ids: Vec<String>,
    /// Globs (`*`, `?`) over task folder names.
    #[serde(default)]
    pub include: Vec<String>,
    /// Globs removing tasks from the selection (applied last).
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// `agents:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSelection {
    /// Folder holding `<name>.toml` descriptors, relative to the manifest; `--agents-root`
    /// wins.
    #[serde(default)]
    pub root: Option<PathBuf>,
    /// The agent conditions, in the order trials are planned.
    pub conditions: Vec<AgentEntry>,
}

/// One agent condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    /// Descriptor name (`<agents root>/<descriptor>.toml`).
    pub descriptor: String,
    /// Label used in trial keys; defaults to the descriptor name. Needed when one
    /// descriptor appears twice (e.g. with two models).
    #[serde(default)]
    pub name: Option<String>,
    /// Model override; defaults to the descriptor's model.
    #[serde(default)]
    pub model: Option<String>,
    /// Adapter parameters, merged over the descriptor's.
    #[serde(default)]
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// Provider route the agent's calls go through (for concurrency caps).
    #[serde(default)]
    pub provider_route: Option<String>,
}

/// `compute:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeSection {
    /// CPUs per trial; default 1.
    #[serde(default)]
    pub cpus: Option<u32>,
    /// Memory per trial in MiB; default 2048.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// Largest diff an agent may leave, in MiB; default 64, at most 1024
    /// ([`DEFAULT_DIFF_MB`], [`MAX_DIFF_MB`]).
    #[serde(default)]
    pub diff_mb: Option<u64>,
    /// Agent timeout in seconds; default: each task's own.
    #[serde(default)]
    pub agent_timeout_sec: Option<f64>,
    /// Evaluation timeout in seconds; default: each task's own.
    #[serde(default)]
    pub verifier_timeout_sec: Option<f64>,
}

/// `execution:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSection {
    /// Runtime: `sandbox` (default) or `direct`; `container` is refused at plan time.
    #[serde(default)]
    pub runtime: Option<Runtime>,
    /// Retries after an infrastructure error (never after an agent failure); default 0.
    #[serde(default)]
    pub infrastructure_retries: Option<u32>,
    /// Best-of-N candidates per trial; default 1.
    #[serde(default)]
    pub candidates: Option<u32>,
    /// How a trial's result is chosen among its candidates: `first_solved` (default),
    /// `best_score` or `all`; an unknown rule is refused at plan time.
    #[serde(default)]
    pub selection: Option<String>,
    /// Concurrency caps.
    #[serde(default)]
    pub concurrency: Concurrency,
    /// Spend cap for the whole run; default none.
    #[serde(default)]
    pub budget: Option<Budget>,
    /// Labels a worker must advertise to run this plan's trials (`key` or `key=value`,
    /// see [`crate::placement`]); default none: any worker.
    #[serde(default)]
    pub worker_labels: Vec<String>,
    /// Which runs sharing the workers are served first: higher first; default 0, -1000 to
    /// 1000 ([`crate::dispatch::share`]).
    #[serde(default)]
    pub priority: Option<i64>,
    /// The run's share of the workers among runs of the same priority, in proportion to
    /// the others' weights; default 1, 1 to 1000 ([`crate::dispatch::share`]).
    #[serde(default)]
    pub weight: Option<i64>,
    /// Where grading happens: `task` (default: where each task says; a task in Harbor's
    /// layout grades in the agent's environment) or `separate` (a fresh grading sandbox
    /// for every task, the record saying it was asked; [`crate::grading_env`]).
    #[serde(default)]
    pub grading_environment: Option<crate::grading_env::GradingEnvironment>,
}

/// `execution.concurrency:`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Concurrency {
    /// Cap on trials running at once for the whole run; default none.
    #[serde(default)]
    pub max_trials: Option<u32>,
    /// Caps per agent label.
    #[serde(default)]
    pub per_agent: BTreeMap<String, u32>,
    /// Caps per provider route.
    #[serde(default)]
    pub per_provider_route: BTreeMap<String, u32>,
}

impl Concurrency {
    /// The caps these set, in the one form dispatch admits by ([`crate::dispatch::RunCaps`]:
    /// widened to the database's integers).
    pub fn caps(&self) -> crate::dispatch::RunCaps {
        let wide = |m: &std::collections::BTreeMap<String, u32>| {
            m.iter().map(|(k, v)| (k.clone(), i64::from(*v))).collect()
        };
        crate::dispatch::RunCaps {
            per_agent: wide(&self.per_agent),
            per_provider: wide(&self.per_provider_route),
            max_trials: self.max_trials.map(i64::from),
        }
    }
}

/// How the agent process is isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// A child process with a reduced environment.
    Direct,
    /// bubblewrap namespaces.
    Sandbox,
    /// docker / podman.
    Container,
}

impl Runtime {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Direct => "direct",
            Runtime::Sandbox => "sandbox",
            Runtime::Container => "container",
        }
    }
}

/// `evaluation:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluationSection {
    /// Run the hidden tests; default true. `false` ends trials `not_graded`.
    #[serde(default)]
    pub grade: Option<bool>,
    /// Evaluation profile name; default `default`.
    #[serde(default)]
    pub profile: Option<String>,
    /// Optional reviewer (e.g. a model or a person) that reviews graded results.
    #[serde(default)]
    pub reviewer: Option<String>,
}

/// Who may see a run's results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// Only the people who ran it.
    Private,
    /// The organisation.
    Internal,
    /// Anyone.
    Public,
}

impl Visibility {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Private => "private",
            Visibility::Internal => "internal",
            Visibility::Public => "public",
        }
    }
}

/// `references:`: optional names of external authorities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct References {
    /// Who authorised the run (a ticket, an approval id).
    #[serde(default)]
    pub authority: Option<String>,
    /// An external evaluation definition.
    #[serde(default)]
    pub evaluation: Option<String>,
    /// The provider-route table the run uses.
    #[serde(default)]
    pub provider_route: Option<String>,
}

/// A manifest could not be read or is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("failed to read manifest {}: {message}; fix: check the path of the experiment manifest (run plan --config FILE, sweep FILE)", file.display())]
    Io {
        /// The manifest.
        file: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// The YAML did not parse or did not match the format.
    #[error("failed to parse manifest {}{}: {message}; fix: see docs/manifest.md for the format", file.display(), line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    Parse {
        /// The manifest.
        file: PathBuf,
        /// 1-based line of the error, when known.
        line: Option<usize>,
        /// What the parser said (names the unknown field).
        message: String,
    },
    /// A field has a bad value.
    #[error("failed to accept manifest {}: field `{field}`: {problem}; fix: {fix}", file.display())]
    Field {
        /// The manifest.
        file: PathBuf,
        /// Dotted field path.
        field: String,
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: String,
    },
}

impl ExperimentManifest {
    /// Reads and checks `file`.
    pub fn load(file: &Path) -> Result<ExperimentManifest, ManifestError> {
        use crate::bounded_read::{read_text, Links};
        let text = read_text(file, MAX_MANIFEST_BYTES as u64, Links::Follow).map_err(|e| {
            ManifestError::Io {
                file: file.to_path_buf(),
                message: e.to_string(),
            }
        })?;
        Self::parse(&text, file)
    }

    /// Parses and checks manifest text; `file` is only used in messages. Text over
    /// [`MAX_MANIFEST_BYTES`] or nested deeper than [`MAX_MANIFEST_DEPTH`] is refused before
    /// parsing (a parser's time on pathological nesting is not bounded).
    pub fn parse(text: &str, file: &Path) -> Result<ExperimentManifest, ManifestError> {
        // A byte-order mark is not content (editors on some systems write one).
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        check_shape(text, file)?;
        let m: ExperimentManifest = serde_norway::from_str(text).map_err(|e| {
            let line = e.location().map(|l| l.line());
            let mut message = e.to_string();
            // The parser appends " at line L column C"; the line is reported separately.
            if let Some(i) = message.find(" at line ") {
                message.truncate(i);
            }
            ManifestError::Parse {
                file: file.to_path_buf(),
                line,
                message: crate::limits::elide_lines(&message),
            }
        })?;
        m.check(file)?;
        Ok(m)
    }

    fn check(&self, file: &Path) -> Result<(), ManifestError> {
        let bad = |field: &str, problem: String, fix: &str| ManifestError::Field {
            file: file.to_path_buf(),
            field: field.to_string(),
            problem,
            fix: fix.to_string(),
        };
        if !is_valid_name(&self.experiment) {
            return Err(bad(
                "experiment",
                format!(
                    "`{}` is not a valid name",
                    crate::limits::elide(&self.experiment)
                ),
                "use letters, digits, `.`, `_` and `-` only",
            ));
        }
        let sel = &self.tasks;
        if sel.ids.is_empty() && sel.include.is_empty() {
            return Err(bad(
                "tasks",
                "selects no task".into(),
                "list task ids under `ids` or globs under `include`",
            ));
        }
        for id in &sel.ids {
            if !is_valid_name(id) {
                return Err(bad(
                    "tasks.ids",
                    format!("`{}` is not a valid task id", crate::limits::elide(id)),
                    "use letters, digits, `.`, `_` and `-` only",
                ));
            }
        }
        for g in sel.include.iter().chain(&sel.exclude) {
            if g.is_empty() || g.contains('/') {
                return Err(bad(
                    "tasks.include/exclude",
                    format!(
                        "`{}` is not a glob over task folder names",
                        crate::limits::elide(g)
                    ),
                    "use `*` and `?` over names, e.g. `wordcount-*`",
                ));
            }
        }
        if self.agents.conditions.is_empty() {
            return Err(bad(
                "agents.conditions",
                "is empty".into(),
                "list at least one `- descriptor: <name>`",
            ));
        }
        let mut labels = std::collections::BTreeSet::new();
        for a in &self.agents.conditions {
            let label = a.label();
            if !is_valid_name(&a.descriptor) || !is_valid_name(label) {
                return Err(bad(
                    "agents.conditions",
                    format!(
                        "`{}` is not a valid agent name",
                        crate::limits::elide(label)
                    ),
                    "use letters, digits, `.`, `_` and `-` only",
                ));
            }
            if !labels.insert(label.to_string()) {
                return Err(bad(
                    "agents.conditions",
                    format!("the label `{label}` appears twice"),
                    "give each condition of the same descriptor its own `name`",
                ));
            }
            // Labels are used as written in trial keys, which are folder names: two that
            // differ only in case would be one folder on a case-insensitive file system.
            if let Some(other) = labels
                .iter()
                .find(|l| *l != label && l.eq_ignore_ascii_case(label))
            {
                return Err(bad(
                    "agents.conditions",
                    format!("the labels `{other}` and `{label}` differ only in case"),
                    "give the conditions labels that differ in more than case (they name folders)",
                ));
            }
        }
        for k in self.execution.concurrency.per_agent.keys() {
            if !labels.contains(k) {
                return Err(bad(
                    "execution.concurrency.per_agent",
                    format!(
                        "`{}` is not one of the agent conditions",
                        crate::limits::elide(k)
                    ),
                    "use the agent labels listed under `agents.conditions`",
                ));
            }
        }
        if let Some(r) = self.execution.infrastructure_retries {
            crate::limits::retries(u64::from(r)).map_err(|why| {
                bad(
                    "execution.infrastructure_retries",
                    why,
                    "retry an infrastructure error at most 10 times (agent failures are never retried)",
                )
            })?;
        }
        if self.repetitions.is_some_and(|r| r > MAX_REPETITIONS) {
            return Err(bad(
                "repetitions",
                format!(
                    "{} is more than the maximum {MAX_REPETITIONS}",
                    self.repetitions.unwrap_or_default()
                ),
                "use fewer repetitions (a plan holds at most 1,000,000 trials)",
            ));
        }
        if self.repetitions == Some(0) {
            return Err(bad(
                "repetitions",
                "is 0".into(),
                "use 1 or more (or drop it for 1)",
            ));
        }
        if self.execution.candidates == Some(0) {
            return Err(bad(
                "execution.candidates",
                "is 0".into(),
                "use 1 or more (or drop it for 1)",
            ));
        }
        for l in &self.execution.worker_labels {
            if let Err(why) = crate::placement::check(l) {
                return Err(bad(
                    "execution.worker_labels",
                    why,
                    "list labels as `name` or `name=value`, as workers advertise them with `--label name=value`",
                ));
            }
        }
        if let Some(p) = self.execution.priority {
            crate::dispatch::share::check_priority(p).map_err(|why| {
                bad(
                    "execution.priority",
                    why,
                    "give a whole number from -1000 to 1000 (higher runs are served first) or drop it for the default 0",
                )
            })?;
        }
        if let Some(w) = self.execution.weight {
            crate::dispatch::share::check_weight(w).map_err(|why| {
                bad(
                    "execution.weight",
                    why,
                    "give a whole number from 1 to 1000 (the run's share among runs of its priority) or drop it for the default 1",
                )
            })?;
        }
        if let Some(b) = &self.execution.budget {
            if let Err(why) = b.check() {
                return Err(bad(
                    "execution.budget",
                    why,
                    "give `usd` as a positive number of dollars and/or `tokens` as a positive count (input + output tokens)",
                ));
            }
        }
        if let Some(c) = self.compute.cpus {
            crate::limits::cpus(u64::from(c)).map_err(|why| {
                bad(
                    "compute.cpus",
                    why,
                    "give a whole number of CPUs per trial or drop it for the default 1",
                )
            })?;
        }
        if let Some(m) = self.compute.memory_mb {
            crate::limits::memory_mb(m).map_err(|why| {
                bad(
                    "compute.memory_mb",
                    why,
                    "give the memory per trial in MiB or drop it for the default 2048",
                )
            })?;
        }
        let caps = &self.execution.concurrency;
        let named = |section: &str, k: &String, v: &u32| (format!("{section}.{k}"), *v);
        for (field, v) in self
            .execution
            .concurrency
            .max_trials
            .map(|v| ("execution.concurrency.max_trials".to_string(), v))
            .into_iter()
            .chain(
                caps.per_agent
                    .iter()
                    .map(|(k, v)| named("execution.concurrency.per_agent", k, v)),
            )
            .chain(
                caps.per_provider_route
                    .iter()
                    .map(|(k, v)| named("execution.concurrency.per_provider_route", k, v)),
            )
        {
            crate::limits::concurrency(u64::from(v)).map_err(|why| {
                bad(
                    &field,
                    why,
                    "give 1 or more trials at once, or drop the cap for none",
                )
            })?;
        }
        if let Some(d) = self.compute.diff_mb {
            if d == 0 || d > MAX_DIFF_MB {
                return Err(bad(
                    "compute.diff_mb",
                    format!("{d} MiB is not a usable diff limit"),
                    &format!(
                        "give a whole number of MiB from 1 to {} or drop it for the default {}",
                        MAX_DIFF_MB, DEFAULT_DIFF_MB
                    ),
                ));
            }
        }
        for (field, t) in [
            ("compute.agent_timeout_sec", self.compute.agent_timeout_sec),
            (
                "compute.verifier_timeout_sec",
                self.compute.verifier_timeout_sec,
            ),
        ] {
            if let Some(t) = t {
                crate::limits::timeout_sec(t).map_err(|why| {
                    bad(
                        field,
                        why,
                        "give a positive number of seconds, or drop it for each task's own",
                    )
                })?;
            }
        }
        for c in &self.credentials {
            if !is_env_name(c) {
                return Err(bad(
                    "credentials",
                    format!(
                        "`{}` is not an environment-variable name",
                        crate::limits::elide(c)
                    ),
                    "list variable names such as ANTHROPIC_API_KEY, never values",
                ));
            }
        }
        Ok(())
    }
}

/// The largest manifest accepted, in bytes.
pub const MAX_MANIFEST_BYTES: usize = crate::bounded_read::ReadKind::Config.cap() as usize;
/// The deepest nesting of flow collections (`[`, `{`) accepted in a manifest.
pub const MAX_MANIFEST_DEPTH: usize = 64;
/// The most repetitions a manifest may ask for.
pub const MAX_REPETITIONS: u32 = 10_000;

/// Refuses text too large or nested too deep to be a manifest, before any parsing: a scan
/// of flow brackets outside quotes and comments, linear in the text.
fn check_shape(text: &str, file: &Path) -> Result<(), ManifestError> {
    let bad = |problem: String, fix: &str| ManifestError::Field {
        file: file.to_path_buf(),
        field: "(document)".into(),
        problem,
        fix: fix.to_string(),
    };
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(bad(
            format!(
                "is {} bytes, more than the maximum {MAX_MANIFEST_BYTES}",
                text.len()
            ),
            "a manifest selects tasks by id or glob; it should be a few kilobytes",
        ));
    }
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = '\n';
    for c in text.chars() {
        match (quote, c) {
            _ if comment => comment = c != '\n',
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') if prev.is_whitespace() => comment = true,
            (None, '[' | '{') => {
                depth += 1;
                max = max.max(depth);
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        if c == '\n' {
            // Quotes do not span lines in a manifest; an apostrophe in plain text must not
            // hide the rest of the document from this scan.
            quote = None;
        }
        prev = c;
        if max > MAX_MANIFEST_DEPTH {
            return Err(bad(
                format!("nests `[`/`{{` more than {MAX_MANIFEST_DEPTH} deep"),
                "write lists and maps with at most a few levels of nesting",
            ));
        }
    }
    Ok(())
}

impl AgentEntry {
    /// The label used in keys: `name`, else the descriptor name.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.descriptor)
    }
}

/// Matches `name` against a glob with `*` (any run) and `?` (one character).
pub fn glob_match(glob: &str, name: &str) -> bool {
    let (g, n): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    let (mut gi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == n[ni]) {
            gi += 1;
            ni += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some(gi);
            mark = ni;
            gi += 1;
        } else if let Some(s) = star {
            gi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

/// Default largest diff an agent may leave, MiB (`compute.diff_mb`).
pub const DEFAULT_DIFF_MB: u64 = 64;
/// Largest `compute.diff_mb` a manifest may ask for, MiB.
pub const MAX_DIFF_MB: u64 = 1024;

/// `execution.budget:` (both optional, at least one given, both positive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Cap on the run's cost in US dollars, as the agents report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Cap on input + output tokens (uncached input plus output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

impl Budget {
    /// Why this budget is unusable, if it is.
    pub fn check(&self) -> Result<(), String> {
        if self.usd.is_none() && self.tokens.is_none() {
            return Err("gives neither `usd` nor `tokens`".into());
        }
        if let Some(u) = self.usd {
            if !(u.is_finite() && u > 0.0) {
                return Err(format!("usd {u} is not a positive amount"));
            }
        }
        if self.tokens == Some(0) {
            return Err("tokens is 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
