//! Command-line definitions.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// akbench runs coding-agent benchmarks.
#[derive(Debug, Parser)]
#[command(name = "akbench", version, about, long_about = None)]
pub struct Cli {
    /// Remote mode: the coordinator to talk to, and the token.
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Global flags of remote mode (see docs/remote.md). With `--coordinator`, `run plan`,
/// `inspect`, `diff`, `reconcile`, `submit`, `start`, `resume`, `cancel`, `status` and
/// `records` talk to the coordinator's Control service instead of the local store.
#[derive(Debug, Clone, Default, Args)]
pub struct RemoteArgs {
    /// The coordinator's gRPC URL (`https://host:7400` for TLS, `http://host:7400`; a bare
    /// `host:port` means http); several replicas comma-separated, tried in order.
    #[arg(long, global = true, env = "AKBENCH_COORDINATOR", value_name = "URL")]
    pub coordinator: Option<String>,
    /// Bearer token for the coordinator (prefer --token-file or AKBENCH_TOKEN: a flag is
    /// visible to other users in the process list).
    #[arg(long, global = true, env = "AKBENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// File holding the bearer token (surrounding whitespace ignored); wins over --token and
    /// AKBENCH_TOKEN.
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// CA certificate (PEM) that signed the coordinator's certificate, for https:// URLs
    /// [default: the system roots].
    #[arg(long, global = true, env = "AKBENCH_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Send the token over plain http:// to a non-loopback address anyway (a private
    /// network); without it such a call is refused before anything is sent.
    #[arg(long, global = true, env = "AKBENCH_ALLOW_PLAINTEXT_TOKEN")]
    pub allow_plaintext_token: bool,
    /// Seconds each call to the coordinator may take until its answer (or a stream's first
    /// message) arrives [default: 60 s; 30 minutes for a plan upload and a whole-run
    /// reconcile]; a coordinator that stays silent longer is given up on (exit 3).
    #[arg(long, global = true, env = "AKBENCH_RPC_TIMEOUT", value_name = "SECONDS",
          value_parser = akbench_core::limits::parse_seconds)]
    pub rpc_timeout: Option<f64>,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan, run and account for runs.
    #[command(subcommand)]
    Run(RunCommand),
    /// Run a whole experiment on this machine: start the embedded default (a private
    /// PostgreSQL, a coordinator, local workers), plan and start the run, follow it live,
    /// print the accounting and a results table, leave the records on disk.
    Sweep(SweepArgs),
    /// Start the embedded default (a private PostgreSQL, a coordinator and local workers),
    /// print its addresses, and serve until Ctrl-C.
    Up(UpArgs),
    /// Write a development CA, a coordinator server certificate and worker client
    /// certificates (PEM) for compose files and local clusters.
    Certs(CertsArgs),
    /// Open a local, read-only web viewer over a folder of run records (a sweep's `out/`,
    /// `run records` exports, `run single` output) or, with --coordinator, over a
    /// coordinator's runs (live): runs, a run's rates and matrix, a trial's attempts, logs,
    /// diff and tests. Prints the URL and serves until Ctrl-C.
    View(ViewArgs),
    /// Validate task folders (either layout): `akbench task check`.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Build and push task images: `akbench image build`.
    #[command(subcommand)]
    Image(ImageCommand),
    /// The agents akbench installs itself: `akbench agent list`, `akbench agent install`.
    #[command(subcommand)]
    Agent(AgentCommand),
}

/// `akbench agent ...`
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// The known agents (adapter, package, pinned version, program) and whether each is
    /// installed in this host's agent cache (AKBENCH_AGENTS_CACHE; default
    /// /var/cache/akbench/agents for root, else ~/.cache/akbench/agents), and where.
    List(AgentListArgs),
    /// Install a known agent (by adapter name) into the agent cache, with its runtime, as a
    /// worker does for a descriptor with `[install]`; nothing to do when it is there.
    /// Exit 0 installed, 2 unknown agent or bad version, 3 the install failed.
    Install(AgentInstallArgs),
}

/// `akbench agent list`
#[derive(Debug, clap::Args)]
pub struct AgentListArgs {
    /// Print one JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `akbench agent install`
#[derive(Debug, clap::Args)]
pub struct AgentInstallArgs {
    /// The agent's adapter name (`akbench agent list` shows them).
    pub name: String,
    /// A version other than the pinned one.
    #[arg(long)]
    pub version: Option<String>,
}

/// `akbench task ...`
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Validate a task folder on this host: its reference solution (solution/solve.sh)
    /// solves under the task's own tests, and its unchanged starting point does not, in the
    /// runtime given (under `container`, in the task's image). The result is cached by the
    /// task's digest (and the image's) under the cache folder's `task-checks/`, and reused
    /// until the task changes. Exit 0 valid, 1 not valid (the problems named), 2 bad input
    /// (the folder is not a loadable task, has no solution/solve.sh, or a flag is wrong),
    /// 3 the check could not run here (no working sandbox, git, the registry).
    Check(TaskCheckArgs),
}

/// `akbench task check`
#[derive(Debug, clap::Args)]
pub struct TaskCheckArgs {
    /// The task folder (holding task.toml); a relative `[source] repo` is resolved against
    /// the folder holding it.
    pub dir: PathBuf,
    /// The runtime the two grading runs use: `sandbox`, `container` (the task's image) or
    /// `direct` (unisolated).
    /// Default: `container` for an image-only task (no `[source]`), else `sandbox`.
    #[arg(long, value_parser = ["sandbox", "container", "direct"])]
    pub runtime: Option<String>,
    /// Run the check again even when a result for this task digest is cached.
    #[arg(long)]
    pub recheck: bool,
    /// Print one JSON object (the check, `cached`, `cache_file`) instead of human output.
    #[arg(long)]
    pub json: bool,
    /// Per-host cache (mirrors, images, task-checks/); default as `run single`.
    #[arg(long, env = "AKBENCH_CACHE")]
    pub cache: Option<PathBuf>,
}

/// `akbench image ...`
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build a task's `environment/Dockerfile` with docker (or podman, or buildah, the
    /// first found on PATH), push it to REGISTRY, and write the pushed digest into the
    /// task's `task.toml` as `environment.image` (or Harbor's `environment.docker_image`
    /// when the task uses that key), `REGISTRY/NAME:TAG@sha256:...`, where plans read it.
    /// The digest is the pushed tag resolved as a plan resolves it (a plain-HTTP registry
    /// must be in AKBENCH_INSECURE_REGISTRIES). Exit 0 built and pushed, 2 bad input (no
    /// Dockerfile, a bad registry, name or tag, a task.toml this cannot edit, no builder),
    /// 3 the build or the push failed (the builder's output is shown).
    Build(ImageBuildArgs),
}

/// `akbench image build`
#[derive(Debug, clap::Args)]
pub struct ImageBuildArgs {
    /// The task folder (holding task.toml, and environment/Dockerfile or sidecar services
    /// written with `build:` in environment/docker-compose.yaml).
    pub dir: PathBuf,
    /// The registry to push to, `host[:port]` (plain HTTP only for loopback, as the
    /// builder allows).
    #[arg(long)]
    pub push: String,
    /// The repository name in the registry (default `akbench/<task id>`).
    #[arg(long)]
    pub name: Option<String>,
    /// The tag (default: the task's version).
    #[arg(long)]
    pub tag: Option<String>,
    /// The builder program: `docker`, `podman` or `buildah` (default: the first on PATH).
    #[arg(long, value_parser = ["docker", "podman", "buildah"])]
    pub builder: Option<String>,
    /// Print one JSON object instead of human output.
    #[arg(long)]
    pub json: bool,
}

/// `akbench certs`
#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// Folder for the PEM files (an existing ca.pem/ca.key there is reused).
    #[arg(long, default_value = "certs")]
    pub out: PathBuf,
    /// A DNS name or IP address of the coordinator (repeatable): writes server.pem/.key.
    /// Each is checked when the command runs (akbench_core::ranges::server_name), so a long
    /// one is named cut short rather than repeated whole by the flag parser.
    #[arg(long = "server-name", value_name = "NAME")]
    pub server_names: Vec<String>,
    /// A worker's identity (repeatable): writes worker-NAME.pem/.key.
    #[arg(long = "worker", value_name = "NAME")]
    pub workers: Vec<String>,
    /// A certificate shared by a pool of workers whose ids start with PREFIX (repeatable;
    /// an empty PREFIX admits any id): writes worker-pool-PREFIX.pem/.key (worker-pool.pem
    /// for an empty one), named `pool:PREFIX`. For replicas whose ids are made at start
    /// (Kubernetes pod names, compose containers); one id is still held by one live session.
    #[arg(long = "worker-pool", value_name = "PREFIX")]
    pub worker_pools: Vec<String>,
    /// Days the server and worker certificates are valid, 1 to 3650.
    #[arg(long, default_value_t = 90, value_parser = days_flag)]
    pub days: u64,
}

/// `akbench view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// Folder to search for `run_record.json` files (recursively).
    #[arg(default_value = "out")]
    pub dir: PathBuf,
    /// Address to serve on (port 0: any free port). Loopback by default: the viewer shows
    /// agents' logs and diffs, and has no login.
    #[arg(long, default_value = "127.0.0.1:7410")]
    pub listen: std::net::SocketAddr,
    /// The evidence store holding the runs' plans, for progress against the planned count.
    #[arg(long, default_value = "runs", env = "AKBENCH_STORE_ROOT")]
    pub store_root: PathBuf,
    /// How often the folder (or, with --coordinator, the run's status) is re-read for the
    /// live updates, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub poll_ms: u64,
    /// With --coordinator: the workers' artifact folder (`<trial key>/a<n>/...`, as `akbench
    /// up --out` leaves it), for the trial pages' logs and diffs.
    #[arg(long)]
    pub artifacts: Option<PathBuf>,
}

/// `akbench run ...`
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Run one trial locally: prepare, execute, evaluate, record. No server needed.
    Single(SingleArgs),
    /// Run one trial locally without grading it: it ends `not_graded` (grade it later with
    /// `run evaluate`).
    Execute(SingleArgs),
    /// Grade a recorded run directory (from `run single` or `run execute`) and write the
    /// grade back, keeping the record as it was beside it.
    Evaluate(EvaluateArgs),
    /// Rebuild a summary from the run records under a folder: JSON, markdown, JUnit XML.
    Aggregate(AggregateArgs),
    /// Resolve an experiment manifest and store its spec, draft plan and ready plan.
    Plan(PlanArgs),
    /// Show a stored run: its condition, plan summary and state.
    Inspect(InspectArgs),
    /// Compare two stored runs' conditions field by field (exit 0 identical, 1 different).
    Diff(DiffArgs),
    /// Account for a run's outcomes against its plan (exit 1 when the accounting is invalid).
    Reconcile(ReconcileArgs),
    /// Remote: submit a run planned locally (in --store-root) to the coordinator; the same
    /// documents again are an idempotent no-op.
    Submit(InspectArgs),
    /// Remote: start a submitted run (fixes its plan and queues its trials).
    Start(RemoteRunArgs),
    /// Remote: re-queue the trials of a run that have no accepted outcome (with --grade, also
    /// grade what was executed but not graded).
    Resume(ResumeArgs),
    /// Remote: grade the trials of a run that were executed but not graded (a plan with
    /// `evaluation.grade: false`): workers rebuild each agent's workspace from its stored diff
    /// and grade it; no agent runs again. Trials with a verdict, and trials whose agent failed,
    /// timed out or never ran, are left as they are. Same as `run resume --grade`.
    Grade(RemoteRunArgs),
    /// Remote: stop scheduling a run and cancel its live attempts (a finished or cancelled
    /// run is left as it is, and the answer says so).
    Cancel(CancelArgs),
    /// Remote: lift a provider route's pause by hand, once you know the provider is back
    /// (new work on the route starts at once; its failure count starts again).
    ResumeRoute(ResumeRouteArgs),
    /// Remote: a run's progress (exit 0; with --watch, 0 when the run ends with a valid
    /// accounting, 1 otherwise).
    Status(StatusArgs),
    /// Remote: download a run's accepted records into a folder, one per trial key.
    Records(RecordsArgs),
    /// Compare two runs trial by trial (paired by task release, repetition and agent): rates
    /// with intervals, the paired difference, McNemar's test, every flip (docs/compare.md).
    Compare(CompareArgs),
    /// List runs (local store, or the coordinator's with --coordinator): key, experiment,
    /// state, trials, progress, created; newest first.
    List(ListArgs),
    /// Write a planned run as Harbor input: one task folder per planned trial (named by its
    /// UUID) and one Harbor job configuration per agent (docs/harbor.md).
    ExportHarbor(ExportHarborArgs),
    /// Read Harbor's per-trial result.json files into an observations file and reconcile it
    /// against the run's plan (exit 0 valid, 1 invalid or unidentified results).
    ImportHarbor(ImportHarborArgs),
    /// Print an attempt's agent trajectory (ATIF JSON, docs/trajectory.md): the stored
    /// `trajectory.json`, or, for older runs, converted from the agent's stored stdout.
    Trajectory(TrajectoryArgs),
    /// Write one self-contained HTML report of a run (or, with --compare, of two runs
    /// compared): rates with intervals, the task-by-agent matrix, cost and tokens,
    /// infrastructure errors by cause, a timeline of attempts.
    Report(ReportArgs),
}

/// `akbench run trajectory`.
#[derive(Debug, Args)]
pub struct TrajectoryArgs {
    /// The trial: its folder (holding run_record.json) or the record file itself.
    pub trial: PathBuf,
    /// The attempt's number (default: the last attempt whose agent ran).
    #[arg(long)]
    pub attempt: Option<u32>,
    /// Indent the JSON.
    #[arg(long)]
    pub pretty: bool,
}

/// `akbench run report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run: a folder of run records, or a run key or UUID (omit with --compare).
    #[arg(required_unless_present = "compare", conflicts_with = "compare")]
    pub run: Option<String>,
    /// Report the comparison of two runs (given as for `run compare`).
    #[arg(long, num_args = 2, value_names = ["LEFT", "RIGHT"])]
    pub compare: Option<Vec<String>>,
    /// The HTML file to write.
    #[arg(long)]
    pub html: PathBuf,
    /// With --compare: this agent label of the left run ...
    #[arg(long, requires = "right_agent")]
    pub left_agent: Option<String>,
    /// ... against this one of the right run.
    #[arg(long, requires = "left_agent")]
    pub right_agent: Option<String>,
    /// With --compare: compare even when task releases or evaluation differ.
    #[arg(long)]
    pub allow_different: bool,
    /// Where run records are, one folder per run key (for runs named by key).
    #[arg(long, default_value = "out", env = "AKBENCH_OUT")]
    pub out: PathBuf,
    /// Store options (--json prints where the report went as JSON).
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `akbench run export-harbor`.
#[derive(Debug, Args)]
pub struct ExportHarborArgs {
    /// Run key or UUID (a planned run of the local store).
    pub run: String,
    /// The folder to write (must not exist, or be empty).
    #[arg(long)]
    pub out: PathBuf,
    /// Folder holding the tasks (default: the one the run was planned with).
    #[arg(long, env = "AKBENCH_TASKS_ROOT")]
    pub tasks_root: Option<PathBuf>,
    /// The image every exported environment starts FROM: `REF@sha256:DIGEST`, or a tag that
    /// is resolved to its digest through the registry (as plans pin task images). It must
    /// hold bash, git, python3 (or what the tasks' verifiers run) and `useradd`. Needed only
    /// when the run has a task exported from its baseline (a multi-step or sidecar task is
    /// exported from its own pinned image).
    #[arg(long, env = "AKBENCH_HARBOR_BASE_IMAGE")]
    pub base_image: Option<String>,
    /// Per-host cache (the task repositories' mirrors and baselines); default as `run single`.
    #[arg(long, env = "AKBENCH_CACHE")]
    pub cache: Option<PathBuf>,
    /// Store options.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `akbench run import-harbor`.
#[derive(Debug, Args)]
pub struct ImportHarborArgs {
    /// Run key or UUID.
    pub run: String,
    /// Harbor's jobs folder (searched recursively for result.json).
    pub dir: PathBuf,
    /// The export folder (its akbench-harbor.json gives each trial's pass threshold; without
    /// it the threshold is 1.0).
    #[arg(long)]
    pub export: Option<PathBuf>,
    /// Where to write the observations (default: DIR/akbench-observations.jsonl).
    #[arg(long)]
    pub observations: Option<PathBuf>,
    /// Also write each imported trial as a run record, `OUT/<trial key>/run_record.json` (as
    /// `run records --out` does), so `run compare`, `run report` (`--out OUT`) and `view OUT`
    /// open the run.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Store options.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `akbench run list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only runs of this experiment.
    #[arg(long)]
    pub experiment: Option<String>,
    /// Only runs in this state (local: resolved, draft, ready, running, finished, interrupted;
    /// coordinator: planned, running, cancelling, cancelled, finished).
    #[arg(long, value_parser = akbench_core::run_list::parse_state)]
    pub state: Option<String>,
    /// Only runs created since: an RFC 3339 instant, a date (2026-11-30) or an age (24h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Store options.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `akbench run compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline run: a folder of run records (a sweep's `out/<run key>`), or a run key or
    /// UUID (records under `--out/<run key>`; with --coordinator, the coordinator's run).
    pub left: String,
    /// The compared run, given the same way.
    pub right: String,
    /// Compare this agent label of the left run ...
    #[arg(long, requires = "right_agent")]
    pub left_agent: Option<String>,
    /// ... with this agent label of the right run (default: equal labels).
    #[arg(long, requires = "left_agent")]
    pub right_agent: Option<String>,
    /// Compare even when the task releases or the evaluation differ (with a warning).
    #[arg(long)]
    pub allow_different: bool,
    /// Bootstrap seed.
    #[arg(long, default_value_t = akbench_core::compare::stats::DEFAULT_SEED)]
    pub seed: u64,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = akbench_core::compare::stats::DEFAULT_RESAMPLES)]
    pub resamples: u32,
    /// Where run records are, one folder per run key (for runs named by key).
    #[arg(long, default_value = "out", env = "AKBENCH_OUT")]
    pub out: PathBuf,
    /// Store options.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// A remote command naming one run.
#[derive(Debug, Args)]
pub struct RemoteRunArgs {
    /// Run key or UUID.
    pub run: String,
    /// Print one JSON document instead of human output.
    #[arg(long)]
    pub json: bool,
}

/// `akbench run resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run.
    #[command(flatten)]
    pub run: RemoteRunArgs,
    /// Grade the attempts that were executed but not graded instead of running them again.
    #[arg(long)]
    pub grade: bool,
}

/// `akbench run cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run.
    #[command(flatten)]
    pub run: RemoteRunArgs,
    /// Why; recorded as the cause of every cancelled attempt.
    #[arg(long, default_value = "cancelled by the operator")]
    pub reason: String,
}

/// `akbench run resume-route`.
#[derive(Debug, Args)]
pub struct ResumeRouteArgs {
    /// The provider route (`provider_route` of an agent condition; `run status` shows paused
    /// routes).
    pub route: String,
    /// Print one JSON document instead of human output.
    #[arg(long)]
    pub json: bool,
}

/// `akbench run status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The run.
    #[command(flatten)]
    pub run: RemoteRunArgs,
    /// Follow the run until it ends (redrawn in place on a terminal, one line per update
    /// otherwise; with --json one JSON document per line).
    #[arg(long)]
    pub watch: bool,
}

/// `akbench run records`.
#[derive(Debug, Args)]
pub struct RecordsArgs {
    /// The run.
    #[command(flatten)]
    pub run: RemoteRunArgs,
    /// Folder to write `<trial key>/run_record.json` into (created when missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Only these trials (UUIDs or keys); repeatable. Default: every accepted record.
    #[arg(long = "trial")]
    pub trials: Vec<String>,
    /// The workers' artifact folder (`akbench up --out`): each attempt's `trajectory.json`
    /// is copied from it beside the exported record (`<trial key>/<attempt dir>/`).
    #[arg(long)]
    pub artifacts: Option<PathBuf>,
}

/// Where runs are stored.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The evidence store: one folder per run key.
    #[arg(long, default_value = "runs", env = "AKBENCH_STORE_ROOT")]
    pub store_root: PathBuf,
    /// Print one JSON document instead of human output.
    #[arg(long)]
    pub json: bool,
}

/// `akbench run plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The experiment manifest (experiment.yaml; see docs/manifest.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Folder holding the tasks (default: the manifest's `tasks.root`).
    #[arg(long, env = "AKBENCH_TASKS_ROOT")]
    pub tasks_root: Option<PathBuf>,
    /// Folder holding the agent descriptors (default: the manifest's `agents.root`).
    #[arg(long, env = "AKBENCH_AGENTS_ROOT")]
    pub agents_root: Option<PathBuf>,
    /// Validate here every task without a cached check on the run's runtime (its reference
    /// solution must solve it, its unchanged start must not; `akbench task check`), before
    /// planning. Without it, only cached checks are recorded. An invalid task refuses the plan.
    #[arg(long)]
    pub check_tasks: bool,
    /// Per-host cache holding the task checks (`task-checks/`); default as `run single`.
    #[arg(long, env = "AKBENCH_CACHE")]
    pub cache: Option<PathBuf>,
    /// Store options.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `akbench run inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Run key or UUID.
    pub run: String,
    /// Store options.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `akbench run diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Left run (key or UUID).
    pub left: String,
    /// Right run (key or UUID).
    pub right: String,
    /// Store options.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `akbench run reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// Run key or UUID.
    pub run: String,
    /// Observations file (JSON Lines; see docs/observations.md). Required locally; in remote
    /// mode it is sent to the coordinator, and without it the coordinator's own records are
    /// reconciled.
    #[arg(long)]
    pub observations: Option<PathBuf>,
    /// List every trial in human output, not only the problems.
    #[arg(long)]
    pub all: bool,
    /// Store options.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `akbench run single`.
#[derive(Debug, Args)]
pub struct SingleArgs {
    /// Task id (a folder under --tasks-root) or a path to a task folder.
    pub task: String,
    /// Agent name (a descriptor `<name>.toml` under --agents-root).
    #[arg(long)]
    pub agent: String,
    /// Folder holding the tasks.
    #[arg(long, default_value = "examples/tasks", env = "AKBENCH_TASKS_ROOT")]
    pub tasks_root: PathBuf,
    /// Folder holding the agent descriptors.
    #[arg(long, default_value = "examples/agents", env = "AKBENCH_AGENTS_ROOT")]
    pub agents_root: PathBuf,
    /// Where run records and artifacts are written.
    #[arg(long, default_value = "out", env = "AKBENCH_OUT", value_parser = absolute_out)]
    pub out: PathBuf,
    /// Print one JSON object instead of human output.
    #[arg(long)]
    pub json: bool,
    /// Do not apply the task's mutation (the pristine repository).
    #[arg(long)]
    pub no_mutation: bool,
    /// Retries for infrastructure errors only (agent failures are never retried), 0 to 10.
    #[arg(long, default_value_t = 0, value_parser = retries_flag)]
    pub infrastructure_retries: u32,
    /// Keep the worktree on disk after the attempt.
    #[arg(long)]
    pub keep_workspace: bool,
    /// Override the task's agent timeout, in seconds (0.001 to 604800, a week).
    #[arg(long, value_parser = akbench_core::limits::parse_seconds)]
    pub agent_timeout: Option<f64>,
    /// How the agent is confined: `sandbox` (bubblewrap), `container` (bubblewrap over the
    /// task's image, `environment.image`) or `direct` (unisolated; the record says so).
    /// Default: `container` for an image-only task (no `[source]`), else `sandbox`.
    #[arg(long, value_parser = ["sandbox", "container", "direct"])]
    pub runtime: Option<String>,
    /// Per-host cache of bare mirrors (default: $XDG_CACHE_HOME/akbench or ~/.cache/akbench).
    #[arg(long, env = "AKBENCH_CACHE")]
    pub cache: Option<PathBuf>,
}

/// `akbench run evaluate`.
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// The run directory: the folder holding `run_record.json` (with --all: a folder of them,
    /// such as a sweep's `out/<run key>`).
    pub run_dir: PathBuf,
    /// Grade every run directory below RUN_DIR whose trial was executed but not graded
    /// (others are left alone); exit 0 when every one got a grade, 1 when any was refused.
    #[arg(long)]
    pub all: bool,
    /// Folder holding the tasks (the task must be the exact release the run used).
    #[arg(long, default_value = "examples/tasks", env = "AKBENCH_TASKS_ROOT")]
    pub tasks_root: PathBuf,
    /// Grade a copy rebuilt from the record (pinned commit + mutation + the agent's diff),
    /// leaving the run's preserved workspace untouched.
    #[arg(long, conflicts_with = "in_place")]
    pub copy: bool,
    /// Grade the preserved workspace in place (refused when the run kept none). The default
    /// is a copy (the clean room: grading never runs in the agent's own folder unless asked).
    #[arg(long)]
    pub in_place: bool,
    /// Print one JSON object instead of human output.
    #[arg(long)]
    pub json: bool,
    /// Per-host cache of bare mirrors.
    #[arg(long, env = "AKBENCH_CACHE")]
    pub cache: Option<PathBuf>,
}

/// `akbench run aggregate`.
#[derive(Debug, Args)]
pub struct AggregateArgs {
    /// Folder to search for `run_record.json` files (recursively).
    pub dir: PathBuf,
    /// Print the summary as JSON instead of a markdown table.
    #[arg(long)]
    pub json: bool,
    /// Also write the markdown table to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Also write a JUnit XML report to this file (not-graded trials are `skipped`).
    #[arg(long)]
    pub junit: Option<PathBuf>,
}

/// `akbench sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The experiment manifest (see docs/manifest.md).
    pub config: PathBuf,
    /// Folder holding the tasks (default: the manifest's `tasks.root`).
    #[arg(long, env = "AKBENCH_TASKS_ROOT")]
    pub tasks_root: Option<PathBuf>,
    /// Folder holding the agent descriptors (default: the manifest's `agents.root`).
    #[arg(long, env = "AKBENCH_AGENTS_ROOT")]
    pub agents_root: Option<PathBuf>,
    /// The evidence store (spec and plans).
    #[arg(long, default_value = "runs", env = "AKBENCH_STORE_ROOT")]
    pub store_root: PathBuf,
    /// Where run records and artifacts are written (one folder per trial key).
    #[arg(long, default_value = "out", env = "AKBENCH_OUT", value_parser = absolute_out)]
    pub out: PathBuf,
    /// Trials run at once, 1 or more (default: the number of CPUs), further limited by the
    /// plan's concurrency caps.
    #[arg(long, value_parser = jobs_flag)]
    pub jobs: Option<usize>,
    /// Per-host cache of bare mirrors.
    #[arg(long, env = "AKBENCH_CACHE")]
    pub cache: Option<PathBuf>,
    /// Print one JSON document (accounting and summary) instead of human output.
    #[arg(long)]
    pub json: bool,
    /// Validate every task without a cached check before the sweep (as `run plan
    /// --check-tasks`); an invalid task refuses the sweep before anything runs.
    #[arg(long)]
    pub check_tasks: bool,
    /// Run every trial in this process, with no database or coordinator.
    #[arg(long)]
    pub local: bool,
    /// The embedded system's options (ignored with --local).
    #[command(flatten)]
    pub embedded: EmbeddedArgs,
}

/// Options of the embedded default.
#[derive(Debug, Clone, Args)]
pub struct EmbeddedArgs {
    /// Local workers, 1 to 256.
    #[arg(long, default_value_t = 2, value_parser = workers_flag)]
    pub workers: usize,
    /// Slots per worker, 1 or more (default: CPUs / workers, at least 1).
    #[arg(long, value_parser = slots_flag)]
    pub slots: Option<u32>,
    /// PostgreSQL data folder, kept between runs (default: $AKBENCH_DATA/postgres, or
    /// /var/lib/akbench/postgres as root, else ~/.local/share/akbench/postgres).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Lease TTL in milliseconds (a silent worker's attempt is rescued after it); 1000 to
    /// 86400000 (docs/limits.md, "Value ranges").
    #[arg(
        long,
        default_value_t = akbench_core::lease_timing::DEFAULT_EMBEDDED_LEASE_TTL_MS,
        value_parser = akbench_core::lease_timing::parse_lease_ttl_ms
    )]
    pub lease_ttl_ms: u64,
}

/// `akbench up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Folder holding the tasks the local workers run.
    #[arg(long, default_value = "examples/tasks", env = "AKBENCH_TASKS_ROOT")]
    pub tasks_root: PathBuf,
    /// Folder holding the agent descriptors.
    #[arg(long, default_value = "examples/agents", env = "AKBENCH_AGENTS_ROOT")]
    pub agents_root: PathBuf,
    /// Where the local workers write attempt artifacts.
    #[arg(long, default_value = "out", env = "AKBENCH_OUT")]
    pub out: PathBuf,
    /// gRPC address of the coordinator.
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub grpc_listen: std::net::SocketAddr,
    /// HTTP address (status API, metrics, status page).
    #[arg(long, default_value = "127.0.0.1:7401")]
    pub http_listen: std::net::SocketAddr,
    /// Per-host cache of bare mirrors.
    #[arg(long, env = "AKBENCH_CACHE")]
    pub cache: Option<PathBuf>,
    /// The embedded system's options.
    #[command(flatten)]
    pub embedded: EmbeddedArgs,
}

/// `--infrastructure-retries`: the manifest's range ([`akbench_core::limits::retries`]).
fn retries_flag(text: &str) -> Result<u32, String> {
    akbench_core::limits::retries(akbench_core::limits::parse_whole(text)?)
}

/// `--jobs`: a concurrency cap, 1 or more ([`akbench_core::limits::concurrency`]).
fn jobs_flag(text: &str) -> Result<usize, String> {
    akbench_core::limits::concurrency(akbench_core::limits::parse_whole(text)?).map(|n| n as usize)
}

/// `--slots`: trials at once on one worker, the same range as `--jobs`.
fn slots_flag(text: &str) -> Result<u32, String> {
    akbench_core::limits::concurrency(akbench_core::limits::parse_whole(text)?).map(|n| n as u32)
}

/// `--workers`: 1 to [`akbench_core::limits::MAX_WORKERS`] (0 is refused, never made 1).
fn workers_flag(text: &str) -> Result<usize, String> {
    akbench_core::limits::workers(akbench_core::limits::parse_whole(text)?)
}

/// `certs --days`: [`akbench_core::ranges::CERT_DAYS`].
fn days_flag(text: &str) -> Result<u64, String> {
    akbench_core::ranges::CERT_DAYS
        .parse_whole(text)
        .map_err(|e| e.to_string())
}

/// `--out` made absolute against the current folder where it is read, so every process
/// given a path under it (the sandbox's bind mounts among them) gets the same folder
/// whatever its own working folder (a relative `out`, the default, failed every trial
/// under `container`).
fn absolute_out(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("is empty; fix: give a folder for --out".into());
    }
    Ok(akbench_core::task::absolute(std::path::Path::new(s)))
}
