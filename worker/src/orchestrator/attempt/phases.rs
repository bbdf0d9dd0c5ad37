//! The phases of one attempt, one function each, in lifecycle order: each records its steps
//! on the [`Run`] and hands the next phase what it needs, or ends the attempt ([`Phase`]).

use super::{Phase, Run};
use crate::adapters::Adapter;
use crate::evaluator::{evaluate, EvalPlace, EvalResult};
use crate::image::Unpacked;
use crate::orchestrator::rebuild::{Rebuilder, RecordedWork};
use crate::orchestrator::AttemptRequest;
use crate::process::{base_env, spawn, CancelToken, ProcessSpec, Running, SpawnError};
use crate::runtime::container::Image;
use crate::runtime::{self, Exposure, RuntimeKind};
use crate::workspace::{Collected, Workspace, WorkspaceError};
use akbench_core::digest::digest_bytes;
use akbench_core::endpoint::Endpoint;
use akbench_core::lifecycle::Event;
use akbench_core::record::NotCollected;
use akbench_core::record::{Observations, ProcessFacts};
use akbench_core::redact::Redactor;
use akbench_core::task::Family;
use akbench_core::trajectory;
use akbench_core::uncollectable::{Why, MAX_LISTED};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// PREPARING: the attempt's folders; returns its work folder.
pub(super) fn preparing(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
) -> Phase<PathBuf> {
    r.advance(None)?;
    let work = r.orch.work_root.join(req.attempt.id.to_string());
    if let Err(e) = std::fs::create_dir_all(&req.artifacts_dir) {
        return r.end(
            Event::InfrastructureFailed,
            format!("failed to create {}: {e}", req.artifacts_dir.display()),
        );
    }
    r.stop_if_cancelled(cancel)?;
    Ok(work)
}

/// What VALIDATING found.
pub(super) struct Checked {
    adapter: Arc<dyn Adapter>,
    /// The declared credentials and their values (and MCP credential headers').
    secrets: Vec<(String, String)>,
    /// The agent's other variables resolved here (MCP headers that are no credential).
    plain: Vec<(String, String)>,
    /// The network endpoints the agent may reach.
    pub(super) endpoints: Vec<Endpoint>,
}

impl Checked {
    /// Whether the adapter can run `task` (the oracle needs a solution).
    pub(super) fn check_task(&self, task: &akbench_core::task::Task) -> Result<(), String> {
        self.adapter.check_task(task)
    }
}

/// VALIDATING: adapter, family, task fit, credentials, endpoints, runtime.
pub(super) fn validating(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
) -> Phase<Checked> {
    let (task, agent) = (req.task, req.agent);
    r.advance(None)?;
    let adapter = match r.orch.registry.resolve(agent) {
        Ok(a) => a,
        Err(e) => return r.end(Event::Rejected, e),
    };
    r.provenance.adapter = Some(adapter.name().to_string());
    r.provenance.adapter_version = Some(crate::provenance::akbench_version());
    // A multi-step task (family `lifecycle`) runs its steps ([`super::steps`]); an
    // interactive one starts its sidecar services with its environment
    // ([`crate::world_env`]).
    let runs = match task.family {
        Family::Artefact => true,
        Family::Lifecycle => !task.steps.is_empty(),
        Family::Interactive => task.world.is_some(),
    };
    if !runs {
        return r.end(
            Event::Rejected,
            format!(
                "task `{}` is of family `{}` and declares no {}, so there is nothing to run it with; fix: remove `family` from its task.toml",
                task.release.id,
                task.family,
                if task.family == Family::Lifecycle { "`[[steps]]`" } else { "sidecar services (environment/docker-compose.yaml)" },
            ),
        );
    }
    // A multi-step task's steps are each checked as the task their part runs
    // ([`super::steps`]).
    if task.steps.is_empty() {
        if let Err(e) = adapter.check_task(task) {
            return r.end(Event::Rejected, e);
        }
    }
    let mut secrets = Vec::new();
    for name in &agent.descriptor.credentials {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => secrets.push((name.clone(), v)),
            _ => return r.end(
                Event::Rejected,
                format!(
                    "credential `{name}` declared by agent `{}` is not set in the launching environment; export it, or remove it from the descriptor",
                    agent.name
                ),
            ),
        }
    }
    // The task's MCP header values (`akbench_core::task::mcp`), resolved now from this
    // worker's environment, for an agent that is given the servers: a credential header's
    // value is a secret like the agent's own (scrubbed from everything stored, left out of
    // the environment's own processes); the others are plain variables of the agent.
    let mut plain = Vec::new();
    if akbench_core::task::mcp::TAKES_MCP.contains(&adapter.name()) {
        match akbench_core::task::mcp::resolve_headers(&task.mcp_servers, |n| std::env::var(n).ok())
        {
            Ok(headers) => {
                for h in headers {
                    if h.secret { &mut secrets } else { &mut plain }.push((h.var, h.value));
                }
            }
            Err(e) => return r.end(Event::Rejected, format!("task `{}`: {e}", task.release.id)),
        }
    }
    r.redactor = Redactor::new(secrets.iter().cloned());
    r.stop_if_cancelled(cancel)?;

    let mut endpoints = Vec::new();
    for n in &agent.descriptor.network {
        match Endpoint::parse(n) {
            Ok(e) => endpoints.push(e),
            Err(e) => {
                return r.end(
                    Event::Rejected,
                    format!(
                        "failed to load agent descriptor {}: field `network`: {e}",
                        agent.file.display()
                    ),
                )
            }
        }
    }
    if let Err(e) = runtime::check(req.options.runtime) {
        return r.end(Event::Rejected, e.to_string());
    }
    r.stop_if_cancelled(cancel)?;
    Ok(Checked {
        adapter,
        secrets,
        plain,
        endpoints,
    })
}

/// CONFIGURING_RUNTIME: which runtime, what it enforces (set up for real at STARTING_AGENT,
/// once the workspace exists). The `container` runtime's image is pulled and unpacked here
/// (once per image and host) and returned, held in use until the attempt ends.
pub(super) fn configuring_runtime(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    endpoints: &[Endpoint],
    cancel: &CancelToken,
) -> Phase<Option<(Unpacked, Image)>> {
    if req.options.runtime == RuntimeKind::Container {
        r.advance(None)?;
    }
    let image = match crate::orchestrator::container::image(r.orch, req, endpoints) {
        Ok(None) => None,
        Ok(Some((held, image, note))) => {
            r.annotate(note);
            Some((held, image))
        }
        Err((event, cause)) => return r.end(event, cause),
    };
    if image.is_none() {
        r.advance(Some(match req.options.runtime {
        RuntimeKind::Direct => {
            "direct: UNISOLATED (child process group, private HOME; the agent can read the host and reach the network)".into()
        }
        _ => format!(
            "sandbox: bubblewrap (pid, mount, ipc, uts, net namespaces), {}, network: {}",
            req.limits().describe(),
            if endpoints.is_empty() {
                "none".to_string()
            } else {
                endpoints.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            }
        ),
    }))?;
    }
    r.stop_if_cancelled(cancel)?;
    Ok(image)
}

/// Where the workspace put the agent's files.
pub(super) struct WorkspacePaths {
    pub(super) worktree: PathBuf,
    pub(super) home: PathBuf,
    /// The attempt's folder.
    pub(super) root: PathBuf,
}

/// CREATING_WORKSPACE: the worktree at the task's pinned commit (mutation applied), kept in
/// `ws_slot` for the cleanup after the attempt.
pub(super) fn creating_workspace(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    work: &Path,
    ws_slot: &mut Option<Workspace>,
    image: Option<&Image>,
    cancel: &CancelToken,
) -> Phase<WorkspacePaths> {
    r.advance(None)?;
    // Attempt folders in block groups of their own (best effort, [`crate::spread`]).
    crate::spread::spread_children(&r.orch.work_root);
    let ws = match Workspace::create(
        &r.orch.cache,
        req.task,
        work,
        req.options.apply_mutation,
        image,
    ) {
        Ok(w) => w,
        Err(e) => {
            // Remove whatever part was made.
            let _ = std::fs::remove_dir_all(work);
            let event = match e {
                WorkspaceError::MutationDoesNotApply { .. } | WorkspaceError::Refused(_) => {
                    Event::Rejected
                }
                _ => Event::InfrastructureFailed,
            };
            return r.end(event, e.to_string());
        }
    };
    r.workspace.base_commit = Some(ws.base_commit.clone());
    r.workspace.tree_after_mutation = Some(ws.tree_after_mutation.clone());
    let note = format!(
        "base {} tree {}{}",
        ws.base_commit,
        ws.tree_after_mutation,
        if ws.mutation_applied {
            " (mutation applied)"
        } else {
            ""
        }
    );
    let paths = WorkspacePaths {
        worktree: ws.worktree.clone(),
        home: ws.home.clone(),
        root: ws.root.clone(),
    };
    *ws_slot = Some(ws);
    r.annotate(note);
    r.stop_if_cancelled(cancel)?;
    Ok(paths)
}

/// The agent's process, started.
pub(super) struct Started {
    adapter: Arc<dyn Adapter>,
    argv: Vec<String>,
    running: Running,
    guard: runtime::Guard,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    /// The agent's time limit, in seconds.
    timeout: f64,
}

/// STARTING_AGENT: the instruction, the adapter's launch, the environment with the
/// credentials, the runtime around the process, the process started.
pub(super) fn starting_agent(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
    checked: Checked,
    image: Option<&Image>,
    paths: &WorkspacePaths,
    env_slot: &mut Option<crate::runtime::shared::Env>,
) -> Phase<Started> {
    r.advance(None)?;
    let launched = launch(
        r,
        req,
        cancel,
        &checked,
        image,
        paths,
        &StepMounts::default(),
    )?;
    if crate::orchestrator::container::wants_environment(req.task, grading_place(req)) {
        // Graded in the environment the agent leaves: started before the agent (without
        // its credentials), kept until grading ends; the agent runs inside it.
        let env = start_env(r, req, req, cancel, &launched, &paths.root)?;
        *env_slot = Some(env);
    }
    spawn_agent(r, req, launched, env_slot.as_ref())
}

/// What a multi-step attempt adds to its agent's view: the reference solutions of every
/// step, readable at their host paths when the launch grants the step's (the oracle), and
/// the folder bound at `/solution` (refilled with the running step's solution).
#[derive(Default)]
pub(super) struct StepMounts {
    pub(super) solutions: Vec<PathBuf>,
    pub(super) solution_folder: Option<PathBuf>,
}

/// The agent's launch made ready: its process spec, what it is exposed to, who it runs as.
pub(super) struct Launched {
    adapter: Arc<dyn Adapter>,
    argv: Vec<String>,
    spec: ProcessSpec,
    exposure: Exposure,
    agent_ids: Option<(u32, u32)>,
    /// The declared credentials' names (left out of the environment's own processes).
    secret_names: Vec<String>,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    timeout: f64,
}

/// The instruction, the adapter's launch, the environment with the credentials and what the
/// runtime exposes: everything but starting the process (the attempt ended on a failure).
pub(super) fn launch(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
    checked: &Checked,
    image: Option<&Image>,
    paths: &WorkspacePaths,
    step_mounts: &StepMounts,
) -> Phase<Launched> {
    let task = req.task;
    let Checked {
        adapter,
        secrets,
        plain,
        endpoints,
    } = checked;
    let WorkspacePaths {
        worktree,
        home,
        root: work_root,
    } = paths;
    let instruction_file = home.join("instruction.md");
    if let Err(e) = std::fs::write(&instruction_file, &task.instruction) {
        return r.end(
            Event::InfrastructureFailed,
            format!("failed to write the instruction: {e}"),
        );
    }
    // The agent installed by akbench, when it is one: an install that fails here is this
    // worker's problem (retried), never the agent's.
    if let Err(e) = adapter.prepare(req.agent) {
        return r.end(
            Event::InfrastructureFailed,
            format!("failed to install the agent on this worker: {e}"),
        );
    }
    let launch = match adapter.launch(&crate::adapters::LaunchContext {
        task,
        agent: req.agent,
        workspace: worktree,
        home,
        instruction_file: &instruction_file,
    }) {
        Ok(l) => l,
        Err(e) => return r.end(Event::Rejected, e),
    };
    let mut env = base_env(home);
    let env_path = env.get("PATH").cloned().unwrap_or_default();
    env.extend(launch.env.clone());
    for (k, v) in secrets.iter().chain(plain) {
        env.insert(k.clone(), v.clone());
    }
    let timeout = req
        .options
        .agent_timeout_sec
        .unwrap_or(task.agent_timeout_sec);
    let stdout_path = req.artifacts_dir.join("agent.stdout.log");
    let stderr_path = req.artifacts_dir.join("agent.stderr.log");
    if let Some(e) = missing_program(&launch.argv, &env).filter(|_| image.is_none()) {
        return r.end(
            Event::Rejected,
            format!("{e}; install the agent or fix the descriptor's program"),
        );
    }
    if let Some(argv) = adapter.version_argv(&launch) {
        let v = crate::provenance::cli_version(&argv, worktree, &env, work_root, cancel);
        r.provenance.agent_cli_version = r.scrub(Some(v));
    }
    let spec = ProcessSpec {
        argv: launch.argv.clone(),
        cwd: worktree.clone(),
        env,
        stdout_path: stdout_path.clone(),
        stderr_path: stderr_path.clone(),
        output_cap: req.options.output_cap,
        timeout: Duration::from_secs_f64(timeout),
        grace: req.options.grace,
        tag: req.attempt.id.to_string(),
        hooks: Default::default(),
    };
    // A linked worktree's repository (until the workspace is a self-contained repository):
    // its own git folder writable, the repository read-only.
    let (git_rw, git_ro) = runtime::linked_git_dirs(worktree);
    // The reference solution only for an agent its launch grants it (the oracle).
    let granted = req
        .task
        .reference
        .as_ref()
        .map(|(d, _)| d.as_path())
        .filter(|d| launch.readable.iter().any(|r| r == d));
    let container = match image {
        None => None,
        Some(i) => {
            let solution = match (&step_mounts.solution_folder, granted) {
                (Some(f), Some(_)) => Some(f.as_path()),
                (None, g) => g,
                (Some(_), None) => None,
            };
            match crate::orchestrator::container::agent_view(i, work_root, &env_path, solution) {
                Ok(v) => Some(v),
                Err(e) => return r.end(Event::InfrastructureFailed, e),
            }
        }
    };
    let writable = [vec![worktree.clone(), home.clone()], git_rw].concat();
    // The task's network for the agent's phase (docs/network.md).
    let egress = match runtime::egress::Policy::for_phase(req.task.network.agent.clone()) {
        Ok(p) => Some(p),
        Err(e) => return r.end(Event::InfrastructureFailed, e),
    };
    let mut readable = [launch.readable.clone(), git_ro].concat();
    if granted.is_some() {
        readable.extend(step_mounts.solutions.iter().cloned());
    }
    let exposure = Exposure {
        hosts: Vec::new(),
        budget: None,
        egress,
        // Every writable place counts in the disk limit (the linked git folder too).
        disk_roots: writable.clone(),
        writable,
        readable,
        endpoints: endpoints.clone(),
        // The attempt folder itself (the agent sees none of it but its worktree and home).
        scratch: work_root.clone(),
        container,
    };
    // Who the agent and the grader run as (Harbor's `[agent] user`, `[verifier] user`): a
    // user other than the image's only inside the agent's environment, so an attempt graded
    // in a fresh container that asks for one is refused before the agent starts.
    let mut agent_ids = None;
    if let Some(i) = image {
        match crate::runtime::container::phase_users(i, task, grading_place(req).shared()) {
            Ok(u) => agent_ids = Some(u.agent),
            Err(e) => return r.end(Event::Rejected, format!("task `{}`: {e}", task.release.id)),
        }
    }
    Ok(Launched {
        adapter: adapter.clone(),
        argv: launch.argv,
        spec,
        exposure,
        agent_ids,
        secret_names: secrets.iter().map(|(k, _)| k.clone()).collect(),
        stdout_path,
        stderr_path,
        timeout,
    })
}

impl Launched {
    /// The launch's process spec without the credentials (the environment's own
    /// processes: its keeper, probes, setup scripts).
    pub(super) fn without_secrets(&self) -> ProcessSpec {
        let mut spec = self.spec.clone();
        for k in &self.secret_names {
            spec.env.remove(k);
        }
        spec
    }
}

/// The task's environment (the agent's launch `launched` gives its view, limits and
/// network), started and its `[environment] healthcheck` passed: only under `runtime:
/// container`; failing to start or to get healthy is the infrastructure's.
///
/// `attempt` is the attempt's own request (a step's `req` has its artifacts under
/// `steps/NAME/`; the services' output is the attempt's, in its `services/`).
pub(super) fn start_env(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    attempt: &AttemptRequest<'_>,
    cancel: &CancelToken,
    launched: &Launched,
    work_root: &Path,
) -> Phase<crate::runtime::shared::Env> {
    let task = req.task;
    if req.options.runtime != RuntimeKind::Container {
        return r.end(
            Event::Rejected,
            format!(
                "task `{}` runs in an environment of its own (`[verifier] environment_mode = \"shared\"`, `[environment] healthcheck` or `[[steps]]`), which only `runtime: container` provides; fix: run it with `--runtime container`, or remove them",
                task.release.id
            ),
        );
    }
    let keeper = launched.without_secrets();
    // The authorities programs of a later phase trust (grading's network may differ
    // from the agent's), written into the environment now.
    let trust = match crate::runtime::shared::phases_trust(
        launched.exposure.egress.as_ref(),
        req.task.network.verifier.clone(),
    ) {
        Ok(t) => t,
        Err(e) => return r.end(Event::InfrastructureFailed, e),
    };
    // With sidecar services, they start first and the environment joins their network;
    // their output is kept beside the agent's (`services/NAME.*.log`).
    let logs_dir = attempt.artifacts_dir.join("services");
    let logs_rel = format!("{}/services", attempt.artifacts_rel);
    let ctx = crate::world_env::WorldCtx {
        images: &r.orch.images,
        scratch: &work_root.join("world"),
        facts: r.services.clone(),
        clock: &*r.orch.clock,
        logs: Some(crate::runtime::world::Logs {
            dir: &logs_dir,
            rel: &logs_rel,
            cap: attempt.options.output_cap,
        }),
    };
    let started = crate::world_env::start(
        keeper,
        &launched.exposure,
        req.limits(),
        trust,
        task.world.as_ref(),
        &ctx,
        cancel,
    );
    let env = match started {
        Ok(e) => e,
        Err(crate::world_env::WorldEnvError::Refused(e)) => {
            return r.end(Event::Rejected, format!("task `{}`: {e}", task.release.id))
        }
        Err(crate::world_env::WorldEnvError::Failed(e)) => {
            return r.end(Event::InfrastructureFailed, e)
        }
    };
    // Docker's healthcheck, polled before the agent starts: failing is the
    // infrastructure's, never the agent's.
    let probe = launched.without_secrets();
    let healthy =
        crate::orchestrator::container::healthcheck(&env, task, &probe, work_root, cancel);
    if let Err(why) = healthy {
        env.finish();
        return r.end(Event::InfrastructureFailed, why);
    }
    Ok(env)
}

/// Starts the launch's process: inside `env` when the attempt has one, else in the run's
/// runtime.
pub(super) fn spawn_agent(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    launched: Launched,
    env: Option<&crate::runtime::shared::Env>,
) -> Phase<Started> {
    let Launched {
        adapter,
        argv,
        spec,
        exposure,
        agent_ids,
        stdout_path,
        stderr_path,
        timeout,
        ..
    } = launched;
    let prepared = match env {
        Some(env) => env.exec_as(
            spec,
            crate::runtime::shared::ExecAs::Agent,
            exposure.egress.clone(),
            agent_ids,
            &exposure.written(),
        ),
        None => runtime::prepare(req.options.runtime, spec, &exposure, req.limits()),
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => return r.end(Event::InfrastructureFailed, e.to_string()),
    };
    let guard = prepared.guard;
    let running = match spawn(prepared.spec) {
        Ok(p) => p,
        Err(e) => {
            guard.finish();
            return match e {
                SpawnError::NotFound { .. } => r.end(
                    Event::Rejected,
                    format!("{e}; install the agent or fix the descriptor's program"),
                ),
                SpawnError::Other { .. } => r.end(Event::InfrastructureFailed, e.to_string()),
            };
        }
    };
    Ok(Started {
        adapter,
        argv,
        running,
        guard,
        stdout_path,
        stderr_path,
        timeout,
    })
}

/// EXECUTING: waits for the agent's process (watching its model provider) and records what it
/// did; returns how its run ends the attempt, `None` when its work goes on to be collected.
/// Every process of the attempt is gone when it returns, also when it ends the attempt.
pub(super) fn executing(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
    started: Started,
) -> Phase<Option<(Event, String)>> {
    let advanced = r.advance(Some(format!("pid {}", started.running.pid())));
    let agent_event = wait_agent(r, req, cancel, started);
    advanced?;
    Ok(agent_event)
}

/// Waits for the agent's process (watching its model provider) and records what it did
/// (`r.process`, `r.observations`, its trajectory); returns how its run ends the attempt,
/// `None` when its work goes on. Every process of the launch is gone when it returns.
pub(super) fn wait_agent(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
    started: Started,
) -> Option<(Event, String)> {
    let Started {
        adapter,
        argv,
        running,
        guard,
        stdout_path,
        stderr_path,
        timeout,
    } = started;
    let span = tracing::info_span!(
        "agent.process",
        process.pid = running.pid(),
        process.executable.name = argv.first().map_or("", String::as_str),
        process.exit.code = tracing::field::Empty,
    );
    let (end, provider_stop) = span.in_scope(|| {
        let (end, stop) = crate::orchestrator::provider_watch::wait_watching(
            running,
            cancel,
            adapter.as_ref(),
            &stdout_path,
            req.options.provider_grace,
        );
        tracing::Span::current().record("process.exit.code", end.exit_code.unwrap_or(-1));
        (end, stop)
    });
    // Every process of the attempt is gone once this returns.
    let finished = guard.finish();
    for p in [&stdout_path, &stderr_path] {
        r.scrub_file(p);
    }
    let stdout = akbench_core::bounded_read::ReadKind::Log
        .read_text(&stdout_path, akbench_core::bounded_read::Links::Refuse)
        .unwrap_or_default();
    let stderr = akbench_core::bounded_read::ReadKind::Log
        .read_text(&stderr_path, akbench_core::bounded_read::Links::Refuse)
        .unwrap_or_default();
    r.observations = adapter.observe(&stdout, &stderr);
    // A CLI that reports no cost: computed from its tokens at the descriptor's price, marked.
    akbench_core::agent::price::apply(&mut r.observations, req.agent.descriptor.price.as_ref());
    r.write_trajectory(
        &req.artifacts_dir.join(trajectory::FILE_NAME),
        adapter.name(),
        &stdout,
        &req.task.instruction,
    );
    let rel = |name: &str| format!("{}/{name}", req.artifacts_rel);
    r.process = Some(ProcessFacts {
        argv,
        exit_code: end.exit_code,
        signal: end.signal,
        timed_out: end.timed_out,
        cancelled: end.cancelled && !provider_stop,
        duration_ms: u64::try_from(end.duration.as_millis()).unwrap_or(u64::MAX),
        stdout_path: Some(rel("agent.stdout.log")),
        stderr_path: Some(rel("agent.stderr.log")),
        stdout_bytes: end.stdout_bytes,
        stderr_bytes: end.stderr_bytes,
        output_truncated: end.truncated,
        stragglers_killed: end.stragglers_killed + finished.killed_after_end,
        runtime: Some({
            // Hosts the task did not declare for the agent, marked for reports.
            let mut facts = finished.facts.clone();
            akbench_core::egress::declared::mark_undeclared(
                &req.task.network.agent,
                &mut facts.egress,
            );
            facts
        }),
    });
    let mut agent_event = agent_verdict(
        &end,
        finished.limit_cause.clone(),
        provider_stop,
        &r.observations,
        timeout,
        req.options.provider_grace,
        || adapter.refused_to_start(&stdout, &stderr),
    );
    // Ended by the host (an out-of-memory kill outside the run's limits) or by a launcher
    // that failed before the agent started: not the agent's doing (core::grading::blame).
    if let (false, false, Some(by)) = (end.cancelled, end.timed_out, finished.ended_by) {
        use akbench_core::grading::blame::EndedBy;
        if matches!(by, EndedBy::Host | EndedBy::Launcher) {
            let mut detail = finished
                .limit_cause
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            // The launcher's own words (bubblewrap writes why it failed to its stderr, which
            // is the agent's): the record says what went wrong, not only that it did.
            if by == EndedBy::Launcher {
                if let Some(said) = launcher_said(&stderr) {
                    detail.push_str(&format!(": {said}"));
                }
            }
            agent_event = Some((
                Event::InfrastructureFailed,
                format!("{} while the agent ran{detail}", by.describe()),
            ));
        }
    }
    // Stopped by its own worker (a drain whose grace ran out), not by a cancel: the host's
    // doing (core::dispatch::Stop).
    if let (Some((Event::Cancel, _)), Some(stop)) = (&agent_event, cancel.stop()) {
        agent_event = Some(stop.end("while the agent ran"));
    }
    agent_event
}

/// The last lines the sandbox launcher wrote (`bwrap: ...`) in a stderr, at most 512
/// bytes, when it wrote any.
fn launcher_said(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("bwrap:") || l.contains("bwrap"))
        .collect();
    let said = lines
        .iter()
        .rev()
        .take(3)
        .rev()
        .copied()
        .collect::<Vec<_>>()
        .join("; ");
    (!said.trim().is_empty()).then(|| akbench_core::limits::elide(&said))
}

/// COLLECTING: the agent's work (tree, diff, files changed) put on record; also done, best
/// effort, for an agent that failed or timed out (`agent_event`), so its diff is on record,
/// and then the attempt ends with that event.
pub(super) fn collecting(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    ws: &Workspace,
    mut agent_event: Option<(Event, String)>,
) -> Phase<Collected> {
    if agent_event.is_none() {
        r.advance(None)?;
    }
    let diff_mb = req.options.limits.diff_mb;
    let collected = ws.collect(diff_mb.saturating_mul(1024 * 1024));
    if let Ok(c) = &collected {
        record_not_collected(r, &c.not_collected, agent_event.is_none());
    }
    match &collected {
        Ok(c) if c.too_large.is_some() => {
            // Over the plan's diff limit: the agent's doing; nothing of the diff is stored.
            r.workspace.tree_after_agent = Some(c.tree_after_agent.clone());
            r.workspace.files_changed = Some(c.files_changed);
            if let Some(rt) = r.process.as_mut().and_then(|p| p.runtime.as_mut()) {
                rt.limit_hit.get_or_insert_with(|| "diff_mb".to_string());
            }
            if agent_event.is_none() {
                agent_event = Some((
                    Event::AgentFailed,
                    diff_too_large_cause(diff_mb, c.too_large.unwrap_or(0), c.files_changed),
                ));
            }
        }
        Ok(c) => {
            let diff_path = req.artifacts_dir.join("agent.diff");
            // The stored diff (and its digest) never holds a credential value; a diff that
            // had one no longer reproduces `tree_after_agent` (docs/record.md).
            let diff = r
                .redactor
                .bytes(&c.diff, &mut r.redacted)
                .unwrap_or_else(|| c.diff.clone());
            if let Err(e) = akbench_core::output::write(&diff_path, &diff) {
                if agent_event.is_none() {
                    return r.end(
                        Event::InfrastructureFailed,
                        format!("failed to save the agent's diff: {e}"),
                    );
                }
            }
            r.workspace.tree_after_agent = Some(c.tree_after_agent.clone());
            r.workspace.diff_path = Some(format!("{}/agent.diff", req.artifacts_rel));
            r.workspace.diff_digest = Some(digest_bytes(&diff));
            r.workspace.files_changed = Some(c.files_changed);
        }
        // What the agent left stops collecting (nothing the worker may read or move, or a
        // state git refuses that it records on the baseline): the agent's doing.
        Err(WorkspaceError::AgentLeft(cause)) if agent_event.is_none() => {
            return r.end(Event::AgentFailed, format!("uncollectable: {cause}"));
        }
        Err(e) if agent_event.is_none() => {
            return r.end(
                Event::InfrastructureFailed,
                format!("failed to collect the agent's work: {e}"),
            );
        }
        Err(_) => {}
    }
    if let Some((event, cause)) = agent_event {
        return r.end(event, cause);
    }
    match collected {
        Ok(c) => Ok(c),
        Err(e) => r.end(
            Event::InfrastructureFailed,
            format!("failed to collect the agent's work: {e}"),
        ),
    }
}

/// What COLLECTING set aside, on the record (`workspace.not_collected`) and, when `note`, in
/// the COLLECTING step's note.
fn record_not_collected(r: &mut Run<'_>, entries: &[(Vec<u8>, Why)], note: bool) {
    if entries.is_empty() {
        return;
    }
    let (listed, more) = crate::workspace::set_aside::listed(entries, MAX_LISTED);
    r.workspace.not_collected = listed
        .into_iter()
        .map(|(path, why)| NotCollected { path, why })
        .collect();
    r.redactor
        .value(&mut r.workspace.not_collected, &mut r.redacted);
    r.workspace.not_collected_more = (more > 0).then_some(more);
    if note {
        let first = &r.workspace.not_collected[0];
        let n = entries.len();
        r.annotate(format!(
            "{n} {} not collected (workspace.not_collected), e.g. `{}`: {}",
            if n == 1 { "entry" } else { "entries" },
            first.path,
            first.why
        ));
    }
}

/// Where EVALUATING grades: the task's image (`container`), and the agent's environment
/// when the task grades in it.
pub(super) struct GradeIn<'a> {
    pub(super) image: Option<&'a Image>,
    pub(super) env: Option<&'a crate::runtime::shared::Env>,
}

/// EVALUATING: the hidden tests, in the clean room (a fresh copy of the baseline plus the
/// agent's diff, the unredacted one it left, grader-steering paths withheld), never in the
/// agent's live worktree; or noted as not requested.
pub(super) fn evaluating(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
    ws: &Workspace,
    c: &Collected,
    work_root: &Path,
    grade_in: GradeIn<'_>,
) -> Phase {
    let GradeIn { image, env } = grade_in;
    // An environment started for a healthcheck alone, or kept for a task the run grades
    // in a fresh sandbox, is not graded in.
    let place = grading_place(req);
    let env = env.filter(|_| place.shared());
    if !req.options.grade {
        return r.advance(Some(crate::orchestrator::rebuild::NOT_REQUESTED.into()));
    }
    let task = req.task;
    r.advance(None)?;
    let eval_root = work_root.join("eval");
    let rebuilder = Rebuilder {
        orch: r.orch,
        task,
        mutation_applied: req.options.apply_mutation,
        work: RecordedWork {
            tree_after_mutation: &ws.tree_after_mutation,
            tree_after_agent: &c.tree_after_agent,
            diff: &c.diff,
        },
        runtime: req.options.runtime,
        image,
    };
    let evaluated =
        tracing::info_span!("evaluator", akbench.task.id = %task.release.id).in_scope(|| {
            if let Some(env) = env {
                // In the agent's environment, its live workspace: no clean room; the
                // tripwire twin runs after the graded run in the same environment, the
                // reference solution in a fresh one (evaluator::tripwire).
                return evaluate(
                    task,
                    &EvalPlace {
                        workspace: &ws.worktree,
                        eval_root: &eval_root,
                        artifacts_dir: &req.artifacts_dir,
                        log_prefix: "",
                        runtime: req.options.runtime,
                        workspaces: Some(&rebuilder),
                        withheld: &[],
                        image,
                        shared: Some(env),
                    },
                    r.orch.clock.as_ref(),
                    cancel,
                );
            }
            match rebuilder.clean_room(&work_root.join("clean")) {
                Err(e) => EvalResult::Broken {
                    cause: format!("failed to make the grading workspace: {e}"),
                    report: String::new(),
                },
                Ok(w) => evaluate(
                    task,
                    &EvalPlace {
                        workspace: &w.path,
                        eval_root: &eval_root,
                        artifacts_dir: &req.artifacts_dir,
                        log_prefix: "",
                        runtime: req.options.runtime,
                        workspaces: Some(&rebuilder),
                        withheld: &w.withheld,
                        image,
                        shared: None,
                    },
                    r.orch.clock.as_ref(),
                    cancel,
                ),
            }
        });
    match evaluated {
        EvalResult::Graded(mut g) => {
            g.environment = place.recorded().map(String::from);
            r.redactor.value(&mut g, &mut r.redacted);
            let note = crate::orchestrator::rebuild::verdict_note(&g);
            r.cause = g.cause.clone();
            r.grade = Some(g);
            r.annotate(note);
            Ok(())
        }
        EvalResult::Broken { cause, report } => {
            let report_path = req.artifacts_dir.join("evaluator.report.txt");
            let report = r
                .redactor
                .bytes(report.as_bytes(), &mut r.redacted)
                .unwrap_or_else(|| report.into_bytes());
            let _ = akbench_core::output::write(&report_path, &report);
            r.end(Event::EvaluationFailed, cause)
        }
        // The grading run's fetch failed (core::egress::grading_fetch_failure): retried.
        EvalResult::FetchFailed { cause, report } => {
            let report_path = req.artifacts_dir.join("evaluator.report.txt");
            let report = r
                .redactor
                .bytes(report.as_bytes(), &mut r.redacted)
                .unwrap_or_else(|| report.into_bytes());
            let _ = akbench_core::output::write(&report_path, &report);
            r.end(Event::InfrastructureFailed, cause)
        }
        EvalResult::Cancelled => {
            let (event, cause) = cancel
                .stop()
                .unwrap_or(akbench_core::dispatch::Stop::Cancelled)
                .end("while evaluating");
            r.end(event, cause)
        }
    }
}

/// Where the attempt is graded: the task's `[verifier] environment_mode` (absent: Harbor's
/// `shared` for a task in Harbor's layout, `separate` for one with a `[source]`) under the
/// run's `grading_environment` ([`akbench_core::grading_env::decide`]).
pub(super) fn grading_place(req: &AttemptRequest<'_>) -> akbench_core::grading_env::GradeIn {
    akbench_core::grading_env::decide(
        req.task.file.verifier.environment_mode.as_deref(),
        req.task.file.source.is_some(),
        req.options.grading_environment,
    )
}

/// FINALIZING: COMPLETED with a grade, else NOT_GRADED.
pub(super) fn finalizing(r: &mut Run<'_>) -> Phase {
    r.advance(None)?;
    let event = if r.grade.is_some() {
        Event::Complete
    } else {
        Event::FinishUngraded
    };
    r.step(event, None)
}

/// How the agent's run ends the attempt, or `None` when it goes on to be collected and
/// graded. A model provider failure the agent did not recover from is never the agent's
/// failure: a refused credential is the configuration's (`invalid_configuration`), an
/// outage, 5xx or 429 the infrastructure's (`infrastructure_error`, cause `provider: ...`).
fn agent_verdict(
    end: &crate::process::ProcessEnd,
    limit_cause: Option<String>,
    provider_stop: bool,
    obs: &Observations,
    timeout: f64,
    provider_grace: Duration,
    refused_to_start: impl FnOnce() -> Option<String>,
) -> Option<(Event, String)> {
    if end.cancelled && !provider_stop {
        return Some((Event::Cancel, "cancelled while the agent ran".to_string()));
    }
    // Running over a limit of the plan is the agent's doing, whatever else it met.
    if let Some(cause) = limit_cause {
        return Some((Event::AgentFailed, cause));
    }
    let failed = provider_stop
        || end.timed_out
        || end.exit_code != Some(0)
        || obs.reported_error == Some(true);
    if failed {
        let stopped = if provider_stop {
            format!(
                "; the agent was stopped after {}s of provider failures",
                provider_grace.as_secs_f64()
            )
        } else {
            String::new()
        };
        match &obs.provider_error {
            Some(p) if p.kind.is_configuration() => {
                return Some((
                    Event::Rejected,
                    format!(
                        "provider: the model provider refused the agent's credential: {p}{stopped}; fix: check the credential the descriptor declares and the provider's base URL"
                    ),
                ))
            }
            Some(p) => {
                return Some((Event::InfrastructureFailed, format!("provider: {p}{stopped}")))
            }
            None if provider_stop => {
                return Some((
                    Event::InfrastructureFailed,
                    format!("provider: the model provider kept failing{stopped}"),
                ))
            }
            None => {}
        }
    }
    if end.timed_out {
        return Some((
            Event::AgentTimedOut,
            format!("the agent ran out of time after {timeout}s and was stopped"),
        ));
    }
    if end.exit_code != Some(0) {
        if end.exit_code.is_some() {
            if let Some(why) = refused_to_start() {
                return Some((
                    Event::Rejected,
                    format!(
                        "the agent refused to start: {why}; fix: check the descriptor's program, extra_args and env (and IS_SANDBOX for claude-code as root)"
                    ),
                ));
            }
        }
        return Some((
            Event::AgentFailed,
            match (end.exit_code, end.signal) {
                (Some(c), _) => format!("the agent exited with code {c}"),
                (None, Some(s)) => format!("the agent was killed by signal {s}"),
                _ => "the agent ended without an exit status".to_string(),
            },
        ));
    }
    if obs.reported_error == Some(true) {
        return Some((
            Event::AgentFailed,
            "the agent reported an error".to_string(),
        ));
    }
    None
}

/// The cause of an attempt whose agent left a diff over `compute.diff_mb`.
fn diff_too_large_cause(diff_mb: u64, read: u64, files: u32) -> String {
    format!(
        "diff_too_large: the agent left a diff over its limit (diff_mb = {diff_mb}): at least {read} bytes across {files} files; it was not stored; fix: raise compute.diff_mb (at most {}) if such diffs are expected",
        akbench_core::spec::MAX_DIFF_MB
    )
}

/// The launch's program when it cannot be found (bare names are looked up on the child's
/// PATH): inside a sandbox, bwrap would only report it as the agent's failure.
fn missing_program(argv: &[String], env: &BTreeMap<String, String>) -> Option<String> {
    let program = argv.first()?;
    let found = if program.contains('/') {
        std::path::Path::new(program).is_file()
    } else {
        env.get("PATH")
            .map(|p| {
                p.split(':')
                    .any(|d| !d.is_empty() && std::path::Path::new(d).join(program).is_file())
            })
            .unwrap_or(false)
    };
    (!found).then(|| format!("failed to start `{program}`: not found"))
}

#[cfg(test)]
mod tests {
    use super::launcher_said;

    #[test]
    fn the_launchers_own_words_are_kept_and_nothing_else() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                "bwrap: Can't find source path out/x/logs/agent: No such file or directory\n",
                Some("bwrap: Can't find source path out/x/logs/agent: No such file or directory"),
            ),
            ("the agent's own output\nmore of it\n", None),
            ("", None),
            (
                "noise\nbwrap: a\nbwrap: b\nbwrap: c\nbwrap: d\n",
                Some("bwrap: b; bwrap: c; bwrap: d"),
            ),
        ];
        for (stderr, want) in cases {
            assert_eq!(launcher_said(stderr).as_deref(), *want, "{stderr:?}");
        }
    }
}
