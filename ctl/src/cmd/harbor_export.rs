//! `akbench run export-harbor RUN --out DIR --base-image REF@sha256:..`: a planned run as
//! Harbor input (docs/harbor.md).
//!
//! Each planned trial becomes its own Harbor task folder `DIR/trials/<trial UUID>/`, so the
//! UUID travels in every Harbor result as `config.task.path`. Its environment gives nothing
//! away: the build context is a Dockerfile `FROM` the pinned base image and the task's
//! baseline repository (the pinned tree with the mutation applied, one parentless commit,
//! exactly the objects it reaches: the worker's own baseline, `akbench_worker::baseline`),
//! checked out in `/app` and owned by the unprivileged `agent` user Harbor runs the agent as.
//! No bundle, history, stash or reference fix is in the image. The verifier runs in a
//! separate environment (Harbor's `separate` mode) that receives `/app` as an artifact; the
//! reference solution finds its files through `[solution].env`. One Harbor job
//! configuration per agent condition (`DIR/jobs/<agent label>.json`, `n_attempts: 1`) lists
//! that agent's trials; the manifest `DIR/akbench-harbor.json` lists every trial. Everything
//! is written to a temporary folder beside DIR and renamed into place: an error leaves
//! nothing. A multi-step task or one with sidecar services is written in Harbor's own
//! layout from the task image the plan pinned ([`layout`]).

use crate::cli::ExportHarborArgs;
use crate::cmd::shared::common::{find_run, print_json};
use crate::exit::{self, InputError};
use akbench_core::evidence::EvidenceStore;
use akbench_core::harbor::{ExportManifest, ExportedTrial, EXPORT_MANIFEST, EXPORT_SCHEMA};
use akbench_core::image::ImageRef;
use akbench_core::plan::PlannedTrial;
use akbench_core::task::{load_by_id, Task};
use akbench_worker::baseline::Baseline;
use akbench_worker::mirror::MirrorCache;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod layout;

/// Exports a planned run.
pub fn run(args: ExportHarborArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let r = find_run(&store, &args.run)?;
    let key = r.spec.run_key().to_string();
    let Some(plan) = r.ready.as_ref() else {
        return Err(InputError(format!(
            "failed to export run {key}: it has no ready plan; fix: plan it with `akbench run plan`"
        ))
        .into());
    };
    if args.out.exists() && std::fs::read_dir(&args.out).map_or(true, |mut d| d.next().is_some()) {
        return Err(InputError(format!(
            "failed to export run {key} to {}: it exists and is not empty; fix: give a new folder",
            args.out.display()
        ))
        .into());
    }
    let tasks_root = match (&args.tasks_root, &r.spec.provenance.tasks_root) {
        (Some(t), _) => t.clone(),
        (None, Some(t)) => PathBuf::from(t),
        (None, None) => {
            return Err(InputError(format!(
                "failed to export run {key}: its spec does not say where its tasks are; fix: pass --tasks-root"
            ))
            .into())
        }
    };
    // Every task, loaded and checked against the exact release the plan holds.
    let mut tasks: BTreeMap<String, Task> = BTreeMap::new();
    let mut layout_images: BTreeMap<String, String> = BTreeMap::new();
    for t in &plan.trials {
        if tasks.contains_key(&t.task.id) {
            continue;
        }
        let task = load_by_id(&tasks_root, &t.task.id)?;
        if task.release != t.task {
            return Err(InputError(format!(
                "failed to export run {key}: task {} under {} is version {} ({}), the plan has version {} ({}); fix: point --tasks-root at the release the run planned",
                t.task.id, tasks_root.display(), task.release.version, task.release.digest, t.task.version, t.task.digest
            ))
            .into());
        }
        // A multi-step task or one with sidecars is written in Harbor's own layout, from
        // the image the plan pinned (`layout`); what cannot be written faithfully is refused.
        if layout::applies(&task) {
            layout_images.insert(t.task.id.clone(), layout::check(&key, &task, t)?);
        }
        tasks.insert(t.task.id.clone(), task);
    }
    // The base image is for tasks exported from their baseline; a run of only multi-step
    // or sidecar tasks (each from its own pinned image) needs none.
    let from_baseline: Vec<&String> = tasks
        .keys()
        .filter(|id| !layout_images.contains_key(*id))
        .collect();
    let base_image = match (&args.base_image, from_baseline.is_empty()) {
        (Some(given), _) => Some(pinned_base_image(given)?),
        (None, true) => None,
        (None, false) => {
            return Err(InputError(format!(
                "failed to export run {key}: task(s) {} are exported from their baseline onto a base image, and none was given; fix: pass --base-image REF@sha256:DIGEST (or set AKBENCH_HARBOR_BASE_IMAGE): an image with bash, git, python3 and useradd",
                akbench_core::limits::elide(
                    &from_baseline.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                )
            ))
            .into())
        }
    };
    // Each task's baseline, built (or reused) in the per-host cache as a worker builds it.
    let mirrors = MirrorCache::new(
        crate::cmd::shared::inputs::cache_root(args.cache.as_deref()).join("mirrors"),
    );
    let mut baselines: BTreeMap<String, Baseline> = BTreeMap::new();
    for (id, task) in tasks
        .iter()
        .filter(|(id, _)| !layout_images.contains_key(*id))
    {
        let b = mirrors.baseline(task, true).map_err(|e| -> anyhow::Error {
            let message = format!("failed to export run {key}: task {id}: {e}");
            match e {
                // The task is broken (bad input); the rest is the host's trouble.
                akbench_worker::baseline::BaselineError::MutationDoesNotApply { .. } => {
                    InputError(message).into()
                }
                _ => anyhow::anyhow!(message),
            }
        })?;
        baselines.insert(id.clone(), b);
    }
    let parent = args
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let staging = tempfile::Builder::new()
        .prefix(".akbench-harbor-")
        .tempdir_in(parent)?;
    let dir = staging.path();
    let mut trials = Vec::with_capacity(plan.trials.len());
    let mut jobs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &plan.trials {
        let task = &tasks[&t.task.id];
        let path = format!("trials/{}", t.trial_id);
        match layout_images.get(&t.task.id) {
            Some(image) => layout::write_task(&dir.join(&path), task, t, &key, image)?,
            None => {
                let env = Environment {
                    base_image: base_image
                        .as_deref()
                        .expect("a base image when a task is exported from its baseline"),
                    baseline: &baselines[&t.task.id],
                };
                write_task(&dir.join(&path), task, t, &key, &env)?;
            }
        }
        let job = format!("jobs/{}.json", t.agent.label);
        jobs.entry(t.agent.label.clone())
            .or_default()
            .push(path.clone());
        trials.push(ExportedTrial {
            trial_id: t.trial_id,
            key: t.key.clone(),
            ordinal: t.ordinal,
            task: t.task.id.clone(),
            agent: t.agent.label.clone(),
            repetition: t.repetition,
            pass_threshold: task.pass_threshold,
            path,
            job,
            steps: task.steps.iter().map(|s| s.config.name.clone()).collect(),
        });
    }
    std::fs::create_dir_all(dir.join("jobs"))?;
    for (label, paths) in &jobs {
        let agent = &plan
            .trials
            .iter()
            .find(|t| &t.agent.label == label)
            .expect("a job has trials")
            .agent;
        let config = json!({
            "job_name": format!("{key}-{label}"),
            "jobs_dir": "jobs-out",
            "n_attempts": 1,
            "agents": [{"name": harbor_agent(&agent.adapter, &agent.descriptor), "model_name": agent.model}],
            "tasks": paths.iter().map(|p| json!({"path": p})).collect::<Vec<_>>(),
        });
        std::fs::write(
            dir.join(format!("jobs/{label}.json")),
            serde_json::to_string_pretty(&config)?,
        )?;
    }
    let manifest = ExportManifest {
        schema: EXPORT_SCHEMA.into(),
        base_image: base_image.clone(),
        run_key: key.clone(),
        run_id: plan.run_id,
        plan_digest: plan.digest.clone(),
        trials,
    };
    std::fs::write(
        dir.join(EXPORT_MANIFEST),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    let staged = staging.keep();
    if args.out.exists() {
        std::fs::remove_dir(&args.out)?;
    }
    std::fs::rename(&staged, &args.out)?;
    if args.store.json {
        print_json(&json!({
            "run_key": key, "out": args.out, "trials": manifest.trials.len(),
            "jobs": jobs.keys().map(|l| format!("jobs/{l}.json")).collect::<Vec<_>>(),
        }))?;
    } else {
        outln!(
            "exported {} trials of run {key} to {}",
            manifest.trials.len(),
            args.out.display()
        );
        for label in jobs.keys() {
            outln!(
                "  cd {} && harbor run -c jobs/{label}.json",
                args.out.display()
            );
        }
        outln!(
            "then: akbench run import-harbor {key} {}/jobs-out --export {}",
            args.out.display(),
            args.out.display()
        );
    }
    Ok(exit::OK)
}

/// Harbor's agent name for an akbench adapter (scripted agents have no Harbor twin: their
/// descriptor name is written, to be replaced or given with --agent-import-path).
fn harbor_agent(adapter: &str, descriptor: &str) -> String {
    match adapter {
        "claude-code" | "codex" | "oracle" => adapter.to_string(),
        _ => descriptor.to_string(),
    }
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// What every exported environment is built from.
struct Environment<'a> {
    /// `REF@sha256:DIGEST`.
    base_image: &'a str,
    /// The task's baseline repository.
    baseline: &'a Baseline,
}

/// The unprivileged user Harbor runs the agent as (`[agent].user`), made in the image.
pub const AGENT_USER: &str = "agent";
/// The workspace in the image.
pub const WORKSPACE: &str = "/app";
/// Where the baseline repository sits in the build context.
pub const BASELINE_IN_CONTEXT: &str = "baseline.git";

/// The base image pinned: `REF@sha256:DIGEST` as given, a tag resolved to its manifest's
/// digest through the registry as plans pin task images.
fn pinned_base_image(given: &str) -> anyhow::Result<String> {
    let r = ImageRef::parse(given).map_err(|e| {
        InputError(format!(
            "failed to read --base-image: {e}; fix: give REF@sha256:DIGEST or a tag the registry resolves"
        ))
    })?;
    if r.digest.is_some() {
        return Ok(given.to_string());
    }
    let store =
        akbench_worker::image::Store::from_env(std::env::temp_dir().join("akbench-resolve"))
            .map_err(InputError)?;
    let digest = store.resolve(&r).map_err(|e| {
        InputError(format!(
            "failed to pin --base-image {given} to a digest: {e}; fix: give REF@sha256:DIGEST (a plain-HTTP registry must be listed in AKBENCH_INSECURE_REGISTRIES)"
        ))
    })?;
    Ok(format!("{given}@{digest}"))
}

/// The environment's Dockerfile: the baseline checked out in the workspace, owned by the
/// agent's user; git trusts the workspace for the verifier (root) too.
pub fn dockerfile(base_image: &str) -> String {
    format!(
        "# Written by akbench run export-harbor: the task's baseline (one parentless commit, the\n\
         # mutation applied) in {WORKSPACE}, nothing else of its repository.\n\
         FROM {base_image}\n\
         RUN useradd --create-home --shell /bin/bash {AGENT_USER} \\\n    && git config --system --add safe.directory {WORKSPACE}\n\
         COPY {BASELINE_IN_CONTEXT} {WORKSPACE}/.git\n\
         RUN git -C {WORKSPACE} reset --quiet --hard \\\n    && chown -R {AGENT_USER}:{AGENT_USER} {WORKSPACE}\n\
         WORKDIR {WORKSPACE}\n"
    )
}

/// Writes one trial's Harbor task folder.
fn write_task(
    dir: &Path,
    task: &Task,
    t: &PlannedTrial,
    run_key: &str,
    env: &Environment,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir.join("environment"))?;
    std::fs::write(dir.join("instruction.md"), &task.instruction)?;
    // The agent runs unprivileged; the verifier in a fresh environment of its own (Harbor's
    // `separate` mode, `harbor lint`'s default) that receives the agent's workspace as an
    // artifact; the reference solution (Harbor's `oracle`) finds its files as akbench's
    // oracle does.
    let toml = format!(
        "schema_version = \"1.4\"\nartifacts = [\"{WORKSPACE}\"]\n\n[task]\nname = {}\nversion = {}\n\n[metadata]\nakbench_run_key = {}\nakbench_trial_id = \"{}\"\nakbench_trial_key = {}\nakbench_task_digest = {}\nakbench_repetition = {}\n\n[agent]\ntimeout_sec = {:?}\nuser = \"{AGENT_USER}\"\n\n[verifier]\ntimeout_sec = {:?}\nenvironment_mode = \"separate\"\n\n[solution.env]\nAKBENCH_SOLUTION_DIR = \"/solution\"\nAKBENCH_WORKSPACE = \"{WORKSPACE}\"\n\n[environment]\ncpus = {}\nmemory_mb = {}\n",
        toml_str(&format!("akbench/{}", t.task.id)),
        toml_str(&t.task.version),
        toml_str(run_key),
        t.trial_id,
        toml_str(&t.key),
        toml_str(&t.task.digest),
        t.repetition,
        t.compute.agent_timeout_sec,
        t.compute.verifier_timeout_sec,
        t.compute.cpus,
        t.compute.memory_mb,
    );
    std::fs::write(dir.join("task.toml"), toml)?;
    copy_dir(
        &env.baseline.repo,
        &dir.join("environment").join(BASELINE_IN_CONTEXT),
    )?;
    std::fs::write(
        dir.join("environment/Dockerfile"),
        dockerfile(env.base_image),
    )?;
    // The tests: akbench's, under tests/akbench, run by a tests/test.sh that Harbor calls.
    copy_dir(&task.tests_dir, &dir.join("tests/akbench"))?;
    let argv: Vec<String> = task
        .verifier_command
        .iter()
        .map(|a| {
            let a = a
                .replace("{tests_dir}", "/tests/akbench")
                .replace("{workspace}", WORKSPACE)
                .replace("{verifier_dir}", "/logs/verifier");
            format!("'{}'", a.replace('\'', "'\\''"))
        })
        .collect();
    let env: String = task
        .file
        .verifier
        .env
        .iter()
        .map(|(k, v)| format!("export {k}='{}'\n", v.replace('\'', "'\\''")))
        .collect();
    let test = format!(
        "#!/usr/bin/env bash\n# Written by akbench run export-harbor: runs the task's akbench evaluation, which leaves\n# reward.txt in /logs/verifier (Harbor reads it; the exit code is ignored).\nexport AKBENCH_TESTS_DIR=/tests/akbench AKBENCH_VERIFIER_DIR=/logs/verifier AKBENCH_WORKSPACE={WORKSPACE}\n{env}mkdir -p /logs/verifier\ncd {WORKSPACE}\nexec {}\n",
        argv.join(" ")
    );
    write_exec(&dir.join("tests/test.sh"), &test)?;
    let solution = task.dir.join("solution");
    if solution.is_dir() {
        copy_dir(&solution, &dir.join("solution"))?;
    }
    Ok(())
}

fn write_exec(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// Copies a folder's regular files and folders (symlinks are refused).
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let ft = e.file_type()?;
        let target = to.join(e.file_name());
        if ft.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else if ft.is_file() {
            std::fs::copy(e.path(), &target)?;
        } else {
            anyhow::bail!(
                "failed to export {}: not a regular file or folder",
                e.path().display()
            );
        }
    }
    Ok(())
}
