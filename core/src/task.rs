//! The task format and its loader.
//!
//! A task is a directory with `task.toml` at its root, laid out like a Harbor /
//! Terminal-Bench 2.0 task (`task.toml`, `instruction.md`, `tests/test.sh`,
//! `solution/solve.sh`) plus a `[source]` section that pins a git repository and commit.
//! See docs/tasks.md for the format. A [`TaskRelease`] is (id, version, digest of the whole
//! directory's canonical content). Every key of `task.toml` is first walked as Harbor 0.25
//! reads it (`fields.rs`: applied, refused with the fix, or kept as ignored); the keys
//! akbench's own code reads are then deserialized into [`TaskFile`].
//!
//! Layer: imports `agent`, `manifest` and `paths` (`absolute` and `inside` are re-exported from
//! `paths`), never `spec`, `plan` or `record`.

use crate::agent::adapters::{list_placeholders, unknown_placeholder};
use crate::bounded_read::{read, read_text, Links};
use crate::digest::Hasher;
use crate::ids::is_valid_name;
pub use crate::paths::{absolute, inside};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Name of the task descriptor file.
pub const TASK_FILE: &str = "task.toml";
/// Name of the instruction file.
pub const INSTRUCTION_FILE: &str = "instruction.md";
/// The largest `task.toml` accepted, in bytes.
pub const MAX_TASK_TOML_BYTES: u64 = crate::bounded_read::ReadKind::Config.cap();
/// The largest file accepted anywhere in a task directory (instruction, patch, tests,
/// solution), in bytes: 64 MiB. Only regular files, directories and symlinks may be in a
/// task; a FIFO, socket or device is refused by name.
pub const MAX_TASK_FILE_BYTES: u64 = crate::bounded_read::ReadKind::TaskFile.cap();
/// The placeholders `verifier.command` may use; the evaluator substitutes them.
pub const VERIFIER_PLACEHOLDERS: &[&str] = &["tests_dir", "workspace", "verifier_dir"];
/// Default agent timeout when a task declares none.
pub const DEFAULT_AGENT_TIMEOUT_SEC: f64 = 600.0;
/// Default evaluation timeout when a task declares none.
pub const DEFAULT_VERIFIER_TIMEOUT_SEC: f64 = 300.0;

/// Execution family of a task. Only `artefact` executes today; the others are planned and
/// accounted with the same identity rules and refused at execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Produces an artefact (a change to a repository) that tests grade.
    Artefact,
    /// An interactive world; not executable yet.
    Interactive,
    /// A finite lifecycle (`[[steps]]`): its steps run in order in one environment.
    Lifecycle,
}

impl Family {
    /// The name used in files and keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Artefact => "artefact",
            Family::Interactive => "interactive",
            Family::Lifecycle => "lifecycle",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The keys of `task.toml` akbench's own code reads, as written on disk (the walk over
/// every Harbor key, `fields.rs`, checked them and hands these over).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFile {
    /// Task id; defaults to the directory name.
    #[serde(default)]
    pub id: Option<String>,
    /// Task version (the top-level `version`; `[task] version` wins, [`TaskRelease`]).
    #[serde(default)]
    pub version: Option<String>,
    /// Execution family; defaults to `artefact`.
    #[serde(default)]
    pub family: Option<Family>,
    /// Free-form metadata (Harbor: author, difficulty, category, tags).
    #[serde(default)]
    pub metadata: BTreeMap<String, toml::Value>,
    /// Agent limits.
    #[serde(default)]
    pub agent: AgentSection,
    /// The evaluation command and its limits.
    #[serde(default)]
    pub verifier: VerifierSection,
    /// Harbor's container environment as written: `image` (an OCI reference) and `workdir`
    /// (where the workspace is inside it) are read here; every key was classified by the
    /// walk ([`HARBOR_FIELDS`]).
    #[serde(default)]
    pub environment: BTreeMap<String, toml::Value>,
    /// Harbor's solution settings (`env`, [`HARBOR_FIELDS`]).
    #[serde(default)]
    pub solution: BTreeMap<String, toml::Value>,
    /// The git repository and pinned commit the workspace is made from.
    pub source: Option<SourceSection>,
    /// The optional patch applied on top of the pinned commit.
    #[serde(default)]
    pub mutation: Option<MutationSection>,
}

/// `[agent]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// Seconds the agent may run before it is stopped (`timeout`).
    pub timeout_sec: Option<f64>,
    /// Harbor's `user`: who the agent (and the reference solution) runs as inside the task's
    /// image (a name or uid of its /etc/passwd, `name:group`, `uid:gid`). A user other than
    /// the image's `USER` runs only in the agent's environment (`worker::runtime::shared`);
    /// an attempt graded in a fresh container that names one is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// `[verifier]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifierSection {
    /// Seconds the evaluation may run before it counts as `evaluation_error`.
    pub timeout_sec: Option<f64>,
    /// The evaluation command as argv; placeholders `{tests_dir}`, `{workspace}`,
    /// `{verifier_dir}`. Defaults to `["bash", "{tests_dir}/test.sh"]`.
    pub command: Option<Vec<String>>,
    /// Minimum reward that counts as solved when a reward file is written (default 1.0).
    pub pass_threshold: Option<f64>,
    /// Extra environment for the evaluation command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The tripwire (docs/tasks.md, "Tripwire"); absent: placed by the framework defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripwire: Option<TripwireSection>,
    /// Paths of the repository that steer the grader and are never taken from the agent's
    /// diff for grading, besides the defaults (docs/tasks.md, "Clean-room grading").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_paths: Vec<String>,
    /// Harbor's `environment_mode`: `separate` (absent: a fresh sandbox) or `shared` (the
    /// agent's environment, under `container`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_mode: Option<String>,
    /// Harbor's `user`: who grading runs as inside the task's image (as
    /// [`AgentSection::user`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// `[verifier.tripwire]`: a test that must fail, added to the grader's copy of the tests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TripwireSection {
    /// `false`: no tripwire for this task (its record says so). Default true.
    pub enabled: Option<bool>,
    /// The file of `tests/` the code is appended to (relative to `tests/`).
    pub file: Option<String>,
    /// The code appended; `{name}` is replaced by the tripwire's random name, which the
    /// runner must report failing (in junit.xml, or in its output).
    pub code: Option<String>,
}

/// `[source]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSection {
    /// A git URL (https, ssh, file) or a path relative to the tasks root.
    pub repo: String,
    /// The pinned commit: a full 40-hex commit hash.
    pub commit: String,
}

/// `[mutation]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MutationSection {
    /// Path of the patch, relative to the task directory.
    pub patch: String,
}

/// Where a task's repository lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "location", rename_all = "snake_case")]
pub enum RepoLocation {
    /// A remote URL with an allowed transport (https, ssh, file).
    Url(String),
    /// A local path (a repository or a git bundle), absolute after loading.
    Path(PathBuf),
}

impl RepoLocation {
    /// The string git is given.
    pub fn as_git_arg(&self) -> String {
        match self {
            RepoLocation::Url(u) => u.clone(),
            RepoLocation::Path(p) => p.display().to_string(),
        }
    }
}

/// The identity of a task: id, version and the digest of its directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskRelease {
    /// Task id.
    pub id: String,
    /// Task version.
    pub version: String,
    /// `sha256:` digest of the directory's canonical content.
    pub digest: String,
}

/// A loaded, validated task.
#[derive(Debug, Clone)]
pub struct Task {
    /// The task directory (absolute).
    pub dir: PathBuf,
    /// The parsed `task.toml`.
    pub file: TaskFile,
    /// id, version, digest.
    pub release: TaskRelease,
    /// Execution family.
    pub family: Family,
    /// What the agent is told.
    pub instruction: String,
    /// The repository; `None` for an image-only task (no `[source]`): its workspace is the
    /// image's working folder ([`Task::image_workdir`]), and it runs under `container` only.
    pub repo: Option<RepoLocation>,
    /// The pinned commit (40 or 64 lowercase hex); empty for an image-only task (its start
    /// is named by the pinned image).
    pub commit: String,
    /// The mutation patch (absolute path) and its digest.
    pub mutation: Option<(PathBuf, String)>,
    /// The hidden tests folder (absolute).
    pub tests_dir: PathBuf,
    /// Digest of the tests folder.
    pub tests_digest: String,
    /// The reference solution folder (absolute) and its digest, when present.
    pub reference: Option<(PathBuf, String)>,
    /// Agent timeout in seconds.
    pub agent_timeout_sec: f64,
    /// Evaluation timeout in seconds.
    pub verifier_timeout_sec: f64,
    /// Evaluation argv (placeholders not yet substituted).
    pub verifier_command: Vec<String>,
    /// Reward at or above which the task counts as solved.
    pub pass_threshold: f64,
    /// The image the task runs in (`environment.image`) under the `container` runtime; its
    /// digest is set when written, or once a plan resolved its tag ([`Task::pin_image`]).
    pub image: Option<crate::image::ImageRef>,
    /// What the task asks of the run (`[environment] cpus`, `memory_mb`, `storage_mb`),
    /// checked when a run is planned ([`requirements::check`]).
    pub requirements: requirements::Requirements,
    /// The environment `solution/solve.sh` gets on top of akbench's (`[solution] env`).
    pub solution_env: BTreeMap<String, String>,
    /// Where the workspace is inside the image (`environment.workdir`, an absolute path);
    /// `None`: the image's working directory, or [`DEFAULT_IMAGE_WORKDIR`].
    pub image_workdir: Option<String>,
    /// Every Harbor key the task sets and what akbench does with it (applied or ignored;
    /// a refused key does not load), shown by `akbench task check`.
    pub fields: Vec<FieldUse>,
    /// Harbor's `[task] name` (`org/name`), when written.
    pub harbor_name: Option<String>,
    /// The network of each phase (`network_mode`, `allowed_hosts`, `allow_internet`;
    /// Harbor's default `public`), applied by the worker's egress proxy.
    pub network: crate::egress::PhaseNetworks,
    /// `[environment] env`: the environment of every process of the task, its `${VAR}`
    /// references resolved on the worker ([`resolve_env`]).
    pub environment_env: BTreeMap<String, EnvValue>,
    /// `[environment] skills_dir`: given to the agent as `AKBENCH_SKILLS_DIR`.
    pub skills_dir: Option<String>,
    /// An image-only task whose image is still to be built from environment/Dockerfile
    /// (no `image` / `docker_image` yet): `akbench image build` builds it; nothing runs it
    /// before.
    pub image_unbuilt: bool,
    /// `[[steps]]`, loaded (empty: a one-step task); a task with steps is a `lifecycle`.
    pub steps: Vec<steps::Step>,
    /// `multi_step_reward_strategy` (`mean` when unset).
    pub reward_strategy: steps::RewardStrategy,
    /// A step's view ([`Task::step_view`]): which step it is, and the steps its reference
    /// environment replays (every step up to it); `None` for a task.
    pub step_of: Option<steps::StepOf>,
    /// The sidecar services of `environment/docker-compose.yaml` ([`world::parse`]); a task
    /// with them is `interactive`, and runs only under `container`, graded in the agent's
    /// environment ([`Task::check_runtime`]).
    pub world: Option<world::World>,
    /// `[[environment.mcp_servers]]` ([`mcp::parse`]): handed to the agent as tools.
    pub mcp_servers: Vec<mcp::McpServer>,
}

/// Where the workspace is inside an image whose task and configuration name no folder.
pub const DEFAULT_IMAGE_WORKDIR: &str = "/app";

impl Task {
    /// What a grade of this task is about, for what the worker learns once per process (the
    /// reference solution solves, a tripwire twin is ineffective, the reference's reward
    /// disagrees with its runner): the release digest, and for a step's view the step too
    /// (each step has its own tests and reference, so what one step showed says nothing
    /// of another).
    pub fn grading_key(&self) -> String {
        match &self.step_of {
            None => self.release.digest.clone(),
            Some(s) => format!("{}#step-{}", self.release.digest, s.index + 1),
        }
    }
}

/// What was wrong with a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskErrorKind {
    /// The file could not be read.
    Io(String),
    /// The TOML did not parse or did not match the schema.
    Parse(String),
    /// A refusal akbench wrote whole (the compose file's: service, key, problem and fix),
    /// each value it quotes already cut short: shown as it is, never cut, so its fix stays.
    Refused(String),
    /// A field has a bad value.
    Field {
        /// Dotted field path, e.g. `source.commit`.
        field: String,
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: String,
    },
}

/// A task failed to load; names the file and, where it applies, the field and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to load task {}: {}", file.display(), render_kind(kind))]
pub struct TaskError {
    /// The file (or directory) at fault.
    pub file: PathBuf,
    /// What was wrong.
    pub kind: TaskErrorKind,
}

fn render_kind(kind: &TaskErrorKind) -> String {
    match kind {
        TaskErrorKind::Io(e) => e.clone(),
        TaskErrorKind::Parse(e) => crate::limits::elide_lines(e.trim_end()),
        // Whole, so the fix stays; cut as a parse error is only if a value it quotes was
        // not (it never is past this bound).
        TaskErrorKind::Refused(e) if e.len() <= 2000 => e.clone(),
        TaskErrorKind::Refused(e) => crate::limits::elide_lines(e),
        TaskErrorKind::Field {
            field,
            problem,
            fix,
        } => format!("field `{field}`: {problem}; fix: {fix}"),
    }
}

impl TaskError {
    fn field(file: &Path, field: &str, problem: impl Into<String>, fix: impl Into<String>) -> Self {
        TaskError {
            file: file.to_path_buf(),
            kind: TaskErrorKind::Field {
                field: field.to_string(),
                problem: problem.into(),
                fix: fix.into(),
            },
        }
    }
}

/// True when `s` is a full 40-hex (sha1) or 64-hex (sha256) commit hash.
pub fn is_full_commit_hash(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// Classifies a `[source] repo` value; refuses transports other than https, ssh and file.
pub fn parse_repo(repo: &str, tasks_root: &Path) -> Result<RepoLocation, String> {
    let repo = repo.trim();
    if repo.is_empty() {
        return Err("is empty".into());
    }
    if let Some((scheme, _)) = repo.split_once("://") {
        return match scheme {
            "https" | "ssh" | "file" => Ok(RepoLocation::Url(repo.to_string())),
            other => Err(format!(
                "uses the `{other}` transport, which is not allowed (only https, ssh and file)"
            )),
        };
    }
    if repo.contains("::") {
        return Err("uses a git remote helper (`::`), which is not allowed".into());
    }
    if repo.starts_with('-') {
        return Err("starts with `-`".into());
    }
    // scp-like ssh: user@host:path
    if let Some((host, _)) = repo.split_once(':') {
        if host.contains('@') && !host.contains('/') {
            return Ok(RepoLocation::Url(repo.to_string()));
        }
    }
    let p = Path::new(repo);
    Ok(RepoLocation::Path(if p.is_absolute() {
        p.to_path_buf()
    } else {
        tasks_root.join(p)
    }))
}

impl Task {
    /// Loads the task in `dir`. `tasks_root` anchors relative repository paths.
    pub fn load(dir: &Path, tasks_root: &Path) -> Result<Task, TaskError> {
        let dir = absolute(dir);
        let tasks_root = absolute(tasks_root);
        match links::first_escaping_link(&dir) {
            Ok(None) => {}
            // A missing directory is reported below, as a missing task.toml.
            Err(_) if !dir.is_dir() => {}
            Ok(Some((link, target))) => {
                return Err(TaskError {
                    file: link,
                    kind: TaskErrorKind::Io(format!(
                        "is a symlink to `{target}`, outside the task directory; copy the file into the task (a task release must contain everything it uses)"
                    )),
                })
            }
            Err(e) => {
                return Err(TaskError {
                    file: dir.clone(),
                    kind: TaskErrorKind::Io(e),
                })
            }
        }
        let toml_path = dir.join(TASK_FILE);
        let text = read_text(&toml_path, MAX_TASK_TOML_BYTES, Links::Follow).map_err(|e| {
            TaskError {
                file: toml_path.clone(),
                kind: TaskErrorKind::Io(format!(
                    "{e}; a task directory needs a task.toml (a regular file, at most {MAX_TASK_TOML_BYTES} bytes) at its root"
                )),
            }
        })?;
        let doc: toml::Table = toml::from_str(&text).map_err(|e| TaskError {
            file: toml_path.clone(),
            kind: TaskErrorKind::Parse(format!(
                "{}\nfix: correct the TOML syntax at the place shown",
                e.to_string().trim_end()
            )),
        })?;
        let walked = fields::walk(&toml_path, &doc)?;
        let mut world = load_checks::world(&dir)?;
        match &mut world {
            Some(w) => w.pin_built(&walked.service_images).map_err(|e| {
                TaskError::field(
                    &toml_path,
                    &format!(
                        "environment.service_images.{}",
                        e.service.as_deref().unwrap_or_default()
                    ),
                    e.problem,
                    e.fix,
                )
            })?,
            None => {
                if let Some(name) = walked.service_images.keys().next() {
                    return Err(TaskError::field(
                        &toml_path,
                        &format!("environment.service_images.{name}"),
                        "names a sidecar service, but the task has no environment/docker-compose.yaml",
                        "remove `[environment.service_images]`, or write the services in environment/docker-compose.yaml",
                    ));
                }
            }
        }
        let file =
            TaskFile::deserialize(toml::Value::Table(walked.serde.clone())).map_err(|e| {
                TaskError {
                    file: toml_path.clone(),
                    kind: TaskErrorKind::Parse(format!(
                        "{}\nfix: see docs/tasks.md for the field's form",
                        e.to_string().trim_end()
                    )),
                }
            })?;
        Self::from_file(&dir, &tasks_root, file, walked, world)
    }

    fn from_file(
        dir: &Path,
        tasks_root: &Path,
        file: TaskFile,
        walked: fields::Walked,
        world: Option<world::World>,
    ) -> Result<Task, TaskError> {
        let toml_path = dir.join(TASK_FILE);
        let dir_name = dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let id = file.id.clone().unwrap_or_else(|| dir_name.clone());
        if !is_valid_name(&id) {
            return Err(TaskError::field(
                &toml_path,
                "id",
                format!("`{id}` is not a valid task id"),
                "use letters, digits, `.`, `_` and `-` only",
            ));
        }
        let version = walked
            .version
            .clone()
            .unwrap_or_else(|| UNVERSIONED.to_string());
        load_checks::version(&toml_path, &version)?;
        let multi_step = !walked.steps.is_empty();
        let instruction_path = dir.join(INSTRUCTION_FILE);
        // A multi-step task's instructions are its steps' (Harbor reads no top-level
        // instruction.md for one: `Task.step_instruction`); the first is the task's.
        let instruction = if multi_step {
            String::new()
        } else {
            read_text(&instruction_path, MAX_TASK_FILE_BYTES, Links::Follow).map_err(|e| {
                TaskError {
                    file: instruction_path.clone(),
                    kind: TaskErrorKind::Io(format!(
                        "{e}; write what the agent is told in instruction.md (a regular UTF-8 file)"
                    )),
                }
            })?
        };
        if instruction.trim().is_empty() && !multi_step {
            return Err(TaskError {
                file: instruction_path,
                kind: TaskErrorKind::Io("is empty; write what the agent is told".into()),
            });
        }
        let tests_dir = dir.join("tests");
        // A multi-step task may grade each step with its own tests only.
        if !tests_dir.is_dir() && !multi_step {
            return Err(TaskError {
                file: tests_dir,
                kind: TaskErrorKind::Io(
                    "is missing; a task needs a tests/ folder with its evaluation (tests/test.sh by default)"
                        .into(),
                ),
            });
        }
        let mutation = match &file.mutation {
            None => None,
            Some(m) => {
                let p = inside(dir, &m.patch).ok_or_else(|| {
                    TaskError::field(
                        &toml_path,
                        "mutation.patch",
                        format!("`{}` leaves the task directory", m.patch),
                        "give a path inside the task directory",
                    )
                })?;
                let bytes = read(&p, MAX_TASK_FILE_BYTES, Links::Follow).map_err(|e| {
                    TaskError::field(
                        &toml_path,
                        "mutation.patch",
                        format!("`{}` {e}", crate::limits::elide(&m.patch)),
                        "point it at an existing patch file (git diff format)",
                    )
                })?;
                Some((p, crate::digest::digest_bytes(&bytes)))
            }
        };
        // An HTTP MCP server named by a bare host name is a sidecar service: one the compose
        // file does not declare would leave the agent with a tool that cannot answer.
        for server in &walked.mcp_servers {
            let Some(host) = server.host() else { continue };
            let bare = !host.contains('.') && !host.contains(':') && host != "localhost";
            let members = world
                .as_ref()
                .map(|w| {
                    w.addresses()
                        .into_iter()
                        .map(|(n, _)| n)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            if bare && !members.iter().any(|n| n == host) {
                return Err(TaskError::field(
                    &toml_path,
                    "environment.mcp_servers",
                    format!(
                        "server `{}`'s url names host `{host}`, which is not a service of environment/docker-compose.yaml{}",
                        server.name,
                        if members.is_empty() { " (the task has none)".to_string() } else { format!(" ({})", members.join(", ")) }
                    ),
                    "declare the server's service in environment/docker-compose.yaml, or point the URL at it",
                ));
            }
        }
        // A multi-step task may have sidecar services too (Harbor runs its steps in one
        // compose project): its family is `lifecycle`, and its services start with its one
        // environment and live through every step (worker's attempt::steps).
        let family =
            match (file.family, multi_step) {
                (None | Some(Family::Interactive), false) if world.is_some() => Family::Interactive,
                (Some(f), false) if world.is_some() => return Err(TaskError::field(
                    &toml_path,
                    "family",
                    format!("is `{f}`, but environment/docker-compose.yaml declares sidecar services, which make the task `interactive`"),
                    "remove `family` (the services make the task interactive), or remove the compose file",
                )),
                (None, false) => Family::Artefact,
                (None, true) | (Some(Family::Lifecycle), true) => Family::Lifecycle,
                (Some(f), false) => f,
                (Some(f), true) => return Err(TaskError::field(
                    &toml_path,
                    "family",
                    format!("is `{f}`, but the task has `[[steps]]`, which make it a `lifecycle`"),
                    "remove `family` (the steps make the task a lifecycle), or remove the steps",
                )),
            };
        let agent_timeout_sec = check_timeout(
            &toml_path,
            "agent.timeout_sec",
            file.agent.timeout_sec,
            DEFAULT_AGENT_TIMEOUT_SEC,
        )?;
        let verifier_timeout_sec = check_timeout(
            &toml_path,
            "verifier.timeout_sec",
            file.verifier.timeout_sec,
            DEFAULT_VERIFIER_TIMEOUT_SEC,
        )?;
        let verifier_command = file
            .verifier
            .command
            .clone()
            .unwrap_or_else(|| vec!["bash".into(), "{tests_dir}/test.sh".into()]);
        if verifier_command.is_empty() || verifier_command[0].trim().is_empty() {
            return Err(TaskError::field(
                &toml_path,
                "verifier.command",
                "is empty",
                "give the evaluation argv, e.g. [\"bash\", \"{tests_dir}/test.sh\"], or remove it",
            ));
        }
        for arg in &verifier_command {
            if let Some(name) = unknown_placeholder(arg, VERIFIER_PLACEHOLDERS) {
                return Err(TaskError::field(
                    &toml_path,
                    "verifier.command",
                    format!(
                        "unknown placeholder `{{{}}}` in `{}`",
                        crate::limits::elide(name),
                        crate::limits::elide(arg)
                    ),
                    format!("use {}", list_placeholders(VERIFIER_PLACEHOLDERS)),
                ));
            }
        }
        for k in file.verifier.env.keys() {
            if !crate::agent::is_env_name(k) {
                return Err(TaskError::field(
                    &toml_path,
                    "verifier.env",
                    format!(
                        "`{}` is not an environment-variable name",
                        crate::limits::elide(k)
                    ),
                    "use names of letters, digits and `_`, not starting with a digit (e.g. PYTHONHASHSEED)",
                ));
            }
        }
        let steps = steps::load(
            dir,
            &walked.steps,
            agent_timeout_sec,
            tests_dir.join("test.sh").is_file(),
            file.verifier.command.is_some(),
        )?;
        let instruction = match steps.first() {
            Some(s) => s.instruction.clone(),
            None => instruction,
        };
        if file.verifier.command.is_none() && !tests_dir.join("test.sh").is_file() && !multi_step {
            return Err(TaskError {
                file: tests_dir.join("test.sh"),
                kind: TaskErrorKind::Io(
                    "is missing; add tests/test.sh or set [verifier] command".into(),
                ),
            });
        }
        load_checks::protected_paths(&toml_path, &file.verifier.protected_paths)?;
        if let Some(f) = file
            .verifier
            .tripwire
            .as_ref()
            .and_then(|t| t.file.as_deref())
        {
            load_checks::tripwire_file(&toml_path, &tests_dir, f)?;
        }
        let pass_threshold = file.verifier.pass_threshold.unwrap_or(1.0);
        if !pass_threshold.is_finite() {
            return Err(TaskError::field(
                &toml_path,
                "verifier.pass_threshold",
                "is not a finite number",
                "use a number such as 1.0",
            ));
        }
        let tests_digest = if tests_dir.is_dir() {
            dir_digest(&tests_dir).map_err(|e| TaskError {
                file: tests_dir.clone(),
                kind: TaskErrorKind::Io(e),
            })?
        } else {
            crate::digest::digest_bytes(b"")
        };
        let solution_dir = dir.join("solution");
        let reference = if solution_dir.is_dir() {
            let d = dir_digest(&solution_dir).map_err(|e| TaskError {
                file: solution_dir.clone(),
                kind: TaskErrorKind::Io(e),
            })?;
            Some((solution_dir, d))
        } else {
            None
        };
        let dockerfile = dir.join("environment").join("Dockerfile").is_file();
        let (image, image_workdir) = environment::image(&toml_path, &file.environment, dockerfile)?;
        let mut uses = walked.uses;
        if image.is_some() && dockerfile {
            uses.push(FieldUse {
                field: "environment/Dockerfile".into(),
                handling: "ignored".into(),
                why: "the task names its image (`docker_image` / `image`), which wins over the Dockerfile, as in Harbor; `akbench image build` builds it".into(),
            });
        }
        if multi_step && instruction_path.exists() {
            uses.push(FieldUse {
                field: INSTRUCTION_FILE.into(),
                handling: "ignored".into(),
                why: "a multi-step task's instructions are its steps' (steps/<name>/instruction.md); Harbor reads none at the top level".into(),
            });
        }
        let requirements = walked.requirements;
        let solution_env = match file.solution.get("env") {
            Some(v) => environment::solution_env(&toml_path, v)?,
            None => BTreeMap::new(),
        };
        let (repo, commit) = match &file.source {
            Some(source) => {
                let (repo, commit) = git_source(&toml_path, source, tasks_root)?;
                (Some(repo), commit)
            }
            None if image.is_some() || dockerfile => {
                if file.mutation.is_some() {
                    return Err(TaskError::field(
                        &toml_path,
                        "mutation.patch",
                        "is set but the task has no [source]: an image-only task's workspace is its image's working folder, which no patch is applied to",
                        "put the bug into the image (environment/Dockerfile), or add a [source] the patch applies to",
                    ));
                }
                (None, String::new())
            }
            None => {
                return Err(TaskError::field(
                    &toml_path,
                    "source",
                    "is missing, and the task names no image either",
                    "add a [source] section with `repo` (URL or path relative to the tasks root) and `commit` (full hash), or name the image whose working folder is the workspace (`[environment] image` or `docker_image`, or write environment/Dockerfile and run `akbench image build`; runs under `runtime: container` only)",
                ))
            }
        };
        let image_is_unbuilt = image.is_none() && repo.is_none();
        let digest = dir_digest(dir).map_err(|e| TaskError {
            file: dir.to_path_buf(),
            kind: TaskErrorKind::Io(e),
        })?;
        Ok(Task {
            dir: dir.to_path_buf(),
            release: TaskRelease {
                id,
                version,
                digest,
            },
            family,
            instruction,
            repo,
            commit,
            mutation,
            tests_dir,
            tests_digest,
            reference,
            agent_timeout_sec,
            verifier_timeout_sec,
            verifier_command,
            pass_threshold,
            image,
            image_workdir,
            solution_env,
            requirements,
            image_unbuilt: image_is_unbuilt,
            steps,
            reward_strategy: walked.strategy.unwrap_or_default(),
            step_of: None,
            world,
            fields: uses,
            harbor_name: walked.harbor_name,
            network: walked.network,
            environment_env: walked.env,
            skills_dir: walked.skills_dir,
            mcp_servers: walked.mcp_servers,
            file,
        })
    }

    /// True for an image-only task: no `[source]`, its workspace is the image's working
    /// folder.
    pub fn image_only(&self) -> bool {
        self.repo.is_none()
    }

    /// Refuses a runtime the task cannot run under: an image-only task needs `container`
    /// (its workspace is in its image); a task with sidecar services needs `container`
    /// (which starts them) and grading in the agent's environment (a fresh sandbox cannot
    /// reach them); `family = "interactive"` without services is refused, and so is a
    /// service built from `build:` whose pin `akbench image build` has not written yet.
    /// The error names the task and the fix.
    pub fn check_runtime(&self, container: bool) -> Result<(), String> {
        let services = self
            .world
            .as_ref()
            .map(|w| w.unbuilt().join(", "))
            .unwrap_or_default();
        if self.image_unbuilt {
            let and = if services.is_empty() {
                String::new()
            } else {
                format!(", nor have its sidecar services built from `build:` ({services})")
            };
            return Err(format!(
                "task `{}` has no image yet: it names none and environment/Dockerfile has not been built{and}; fix: run `akbench image build {} --push REGISTRY`, which builds it and writes the image into task.toml",
                self.release.id,
                self.dir.display()
            ));
        }
        if !services.is_empty() {
            return Err(format!(
                "task `{}` has sidecar services built from `build:` with no image yet ({services}); fix: run `akbench image build {} --push REGISTRY`, which builds them and writes their images into task.toml (`[environment.service_images]`)",
                self.release.id,
                self.dir.display()
            ));
        }
        if self.family == Family::Interactive && self.world.is_none() {
            return Err(format!(
                "task `{}` is `family = \"interactive\"` but declares no sidecar services; fix: write its services in environment/docker-compose.yaml, or remove `family`",
                self.release.id
            ));
        }
        if let Some(w) = &self.world {
            let names = w
                .services
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            if !container {
                return Err(format!(
                    "task `{}` has sidecar services ({names}; environment/docker-compose.yaml), which only the `container` runtime starts; fix: plan it with `runtime: container` (`--runtime container`), or leave it out of this run's tasks",
                    self.release.id
                ));
            }
            let mode = crate::grading_env::task_mode(
                self.file.verifier.environment_mode.as_deref(),
                self.file.source.is_some(),
            );
            if mode != crate::grading_env::EnvironmentMode::Shared {
                return Err(format!(
                    "task `{}` has sidecar services ({names}), which a fresh grading sandbox cannot reach; fix: grade it in the agent's environment (`[verifier] environment_mode = \"shared\"` in task.toml)",
                    self.release.id
                ));
            }
        }
        if self.image_only() && !container {
            return Err(format!(
                "task `{}` has no [source]: its workspace is the working folder of its image ({}), which only the `container` runtime runs; fix: plan it with `runtime: container` (`--runtime container`), or leave it out of this run's tasks",
                self.release.id,
                self.image.as_ref().map_or_else(String::new, ToString::to_string)
            ));
        }
        Ok(())
    }

    /// The image reference pinned to `digest` (a plan resolved the tag); refused when the
    /// task names no image or already pins another digest.
    pub fn pin_image(&mut self, digest: &str) -> Result<(), String> {
        let Some(image) = &self.image else {
            return Err(format!("task `{}` names no image", self.release.id));
        };
        if !crate::image::is_digest(digest) {
            return Err(format!("`{digest}` is not a sha256 digest"));
        }
        match &image.digest {
            Some(d) if d != digest => Err(format!(
                "task `{}` pins {d} in `environment.image`, not {digest}",
                self.release.id
            )),
            _ => {
                self.image = Some(image.with_digest(digest));
                Ok(())
            }
        }
    }
}

/// The runtime a run of `tasks` uses when none was asked: `container` when every task is
/// image-only (no other runtime can run one), else `sandbox`. `asked` always wins (a wrong
/// one is refused by [`Task::check_runtime`]). With the runtime, a sentence saying why it
/// was picked, or `None` when it was asked (or is the plain default).
pub fn pick_runtime<'a>(
    asked: Option<crate::manifest::Runtime>,
    tasks: impl IntoIterator<Item = &'a Task>,
) -> (crate::manifest::Runtime, Option<String>) {
    use crate::manifest::Runtime;
    if let Some(r) = asked {
        return (r, None);
    }
    let mut any = false;
    let mut all_image_only = true;
    for t in tasks {
        any = true;
        all_image_only &= t.image_only();
    }
    if any && all_image_only {
        (
            Runtime::Container,
            Some("runtime container picked: every task is image-only (no [source]; its workspace is in its image), which only `container` runs; set the runtime to choose".into()),
        )
    } else {
        (Runtime::Sandbox, None)
    }
}

/// `[source]`, checked: where the repository is and the pinned commit (lowercase).
fn git_source(
    toml_path: &Path,
    source: &SourceSection,
    tasks_root: &Path,
) -> Result<(RepoLocation, String), TaskError> {
    let repo = parse_repo(&source.repo, tasks_root).map_err(|p| {
        TaskError::field(
            toml_path,
            "source.repo",
            format!("`{}` {p}", source.repo),
            "use an https:// or ssh:// URL, file://, or a path relative to the tasks root",
        )
    })?;
    if !is_full_commit_hash(&source.commit) {
        return Err(TaskError::field(
                toml_path,
                "source.commit",
                format!(
                    "`{}` is not a full commit hash (branch names and short hashes are refused: they move or are ambiguous)",
                    crate::limits::elide(&source.commit)
                ),
                "pin the full 40-character hash, e.g. from `git rev-parse HEAD`",
            ));
    }
    if let Some(len) = hash::hex_len(&repo) {
        if source.commit.len() != len {
            return Err(TaskError::field(
                toml_path,
                "source.commit",
                format!(
                    "`{}` has {} hex digits but the repository `{}` uses {} ({} object ids)",
                    crate::limits::elide(&source.commit),
                    source.commit.len(),
                    crate::limits::elide(&source.repo),
                    len,
                    if len == 40 { "sha1" } else { "sha256" }
                ),
                "pin a commit of that repository, e.g. from `git rev-parse HEAD` in it",
            ));
        }
    }
    load_checks::local_repo(toml_path, &source.repo, &repo)?;
    Ok((repo, source.commit.to_ascii_lowercase()))
}

fn check_timeout(file: &Path, field: &str, v: Option<f64>, default: f64) -> Result<f64, TaskError> {
    match v {
        None => Ok(default),
        Some(t) => crate::limits::timeout_sec(t).map_err(|why| {
            TaskError::field(
                file,
                field,
                why,
                "give a positive number of seconds, or drop it for the default",
            )
        }),
    }
}

/// The digest of a directory's canonical content: every entry in byte order of its relative
/// path, with its kind (file, executable file, symlink), its link target or its content.
/// `.git` folders are skipped.
pub fn dir_digest(dir: &Path) -> Result<String, String> {
    let mut entries = Vec::new();
    collect(dir, dir, &mut entries)?;
    entries.sort();
    let mut h = Hasher::default();
    for rel in entries {
        let p = dir.join(&rel);
        let meta = std::fs::symlink_metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        h.update(rel.as_bytes());
        h.update(&[0]);
        if meta.file_type().is_symlink() {
            let t = std::fs::read_link(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            h.update(b"L");
            h.update(t.to_string_lossy().as_bytes());
        } else {
            use std::os::unix::fs::PermissionsExt;
            let exec = meta.permissions().mode() & 0o111 != 0;
            h.update(if exec { b"X" } else { b"F" });
            // Not a symlink (checked above): refused if the name is swapped for one.
            let bytes = read(&p, MAX_TASK_FILE_BYTES, Links::Refuse).map_err(|e| {
                format!(
                    "{}: {e}; fix: a task holds regular files of at most {MAX_TASK_FILE_BYTES} bytes",
                    p.display()
                )
            })?;
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
        h.update(&[0]);
    }
    Ok(h.finish())
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in rd {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let p = entry.path();
        let ft = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", p.display()))?;
        if ft.is_dir() {
            collect(root, &p, out)?;
        } else {
            let rel = p
                .strip_prefix(root)
                .map_err(|e| e.to_string())?
                .to_string_lossy()
                .into_owned();
            out.push(rel);
        }
    }
    Ok(())
}

/// Loads `<tasks_root>/<id>` (the usual layout: one folder per task).
pub fn load_by_id(tasks_root: &Path, id: &str) -> Result<Task, TaskError> {
    if !is_valid_name(id) {
        return Err(TaskError {
            file: tasks_root.join(id),
            kind: TaskErrorKind::Io(format!(
                "`{id}` is not a valid task id (letters, digits, `.`, `_`, `-`)"
            )),
        });
    }
    let dir = tasks_root.join(id);
    if !dir.is_dir() {
        return Err(TaskError {
            file: dir,
            kind: TaskErrorKind::Io(format!(
                "no task `{id}` under the tasks root; check the id or pass --tasks-root"
            )),
        });
    }
    let task = Task::load(&dir, tasks_root)?;
    if task.release.id != id {
        return Err(TaskError::field(
            &dir.join(TASK_FILE),
            "id",
            format!("says `{}` but the folder is `{id}`", task.release.id),
            "make the folder name and `id` agree, or drop `id`",
        ));
    }
    Ok(task)
}

/// The release version of a task that sets neither `[task] version` nor `version` (a
/// Terminal-Bench 2.1 task): its digest tells its releases apart.
pub const UNVERSIONED: &str = "unversioned";

mod environment;
pub use environment::{build_timeout_sec, handling, Handling, HARBOR_FIELDS, UNKNOWN_KEY};
mod fields;
pub use fields::{resolve_env, size_to_mb, EnvValue, FieldUse, SCHEMA_VERSIONS};
mod hash;
pub mod requirements;
mod write_image;
pub use write_image::{image_key, image_key_of, set_image, set_service_images};
mod links;
mod load_checks;
pub mod mcp;
pub mod steps;
pub mod world;

#[cfg(test)]
mod tests;
