//! A run planned from its manifest on this host: the manifest resolved into a spec, its task
//! images pinned, its tasks checked (cached by digest) and recorded in the spec. `run plan`
//! (local and remote) stores the result; the sweep checks its trials next.

use crate::cli::{PlanArgs, SweepArgs};
use crate::cmd::shared::task_checks::{record_in_spec, PlannedChecks};
use akbench_core::clock::Clock;
use akbench_core::evidence::EvidenceStore;
use akbench_core::manifest::ExperimentManifest;
use akbench_core::plan::RunPlan;
use akbench_core::spec::{resolve, roots, ResolveInputs, ResolvedRunSpec};
use std::path::{Path, PathBuf};

/// A manifest resolved, pinned and checked; nothing stored.
#[derive(Debug)]
pub struct Resolved {
    /// The spec, with its images pinned and its task checks recorded.
    pub spec: ResolvedRunSpec,
    /// The task checks.
    pub checks: PlannedChecks,
    /// The tasks root the manifest resolved to.
    pub tasks_root: PathBuf,
    /// The agents root the manifest resolved to.
    pub agents_root: PathBuf,
}

/// Where a manifest's inputs come from: the flags `run plan` and `sweep` share.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The manifest.
    pub config: &'a Path,
    /// `--tasks-root`.
    pub tasks_root: Option<&'a Path>,
    /// `--agents-root`.
    pub agents_root: Option<&'a Path>,
    /// `--cache`.
    pub cache: Option<&'a Path>,
    /// `--check-tasks`.
    pub check_tasks: bool,
}

/// Loads and resolves the manifest, pins its images and checks its tasks. Bad input fails
/// here (exit 2); nothing is written but the task-check cache.
pub fn resolve_checked(inputs: Inputs<'_>, clock: &dyn Clock) -> anyhow::Result<Resolved> {
    let manifest = ExperimentManifest::load(inputs.config)?;
    let resolve_inputs = ResolveInputs {
        manifest_path: Some(inputs.config.to_path_buf()),
        tasks_root: inputs.tasks_root.map(Path::to_path_buf),
        agents_root: inputs.agents_root.map(Path::to_path_buf),
    };
    let (tasks_root, agents_root) = roots(&manifest, &resolve_inputs)?;
    let spec = resolve(&manifest, &resolve_inputs, clock)?;
    let spec = super::inputs::pin_spec(spec, clock)?;
    let cache = super::inputs::cache_root(inputs.cache);
    let (spec, checks) = record_in_spec(spec, &cache, inputs.check_tasks)?;
    Ok(Resolved {
        spec,
        checks,
        tasks_root,
        agents_root,
    })
}

/// Resolves the manifest, plans, and stores spec, draft and ready plan in the local store;
/// returns the spec, the ready plan's head (`trials` empty: the trials are expanded straight
/// into the plan files, one at a time) and the run's folder (remote mode submits them next).
pub fn plan_and_store(
    args: &PlanArgs,
) -> anyhow::Result<(ResolvedRunSpec, RunPlan, PathBuf, PlannedChecks)> {
    let clock = crate::cmd::shared::common::planning_clock()?;
    let clock = clock.as_ref();
    let Resolved { spec, checks, .. } = resolve_checked(Inputs::of_plan(args), clock)?;
    let store = EvidenceStore::new(&args.store.store_root);
    let spec = store.create_run(spec)?;
    let ready = store.plan_streamed(&spec, clock.now())?;
    let dir = args.store.store_root.join(spec.run_key());
    Ok((spec, ready, dir, checks))
}

impl<'a> Inputs<'a> {
    /// `run plan`'s inputs.
    pub fn of_plan(args: &'a PlanArgs) -> Self {
        Self {
            config: &args.config,
            tasks_root: args.tasks_root.as_deref(),
            agents_root: args.agents_root.as_deref(),
            cache: args.cache.as_deref(),
            check_tasks: args.check_tasks,
        }
    }

    /// `sweep`'s inputs.
    pub fn of_sweep(args: &'a SweepArgs) -> Self {
        Self {
            config: &args.config,
            tasks_root: args.tasks_root.as_deref(),
            agents_root: args.agents_root.as_deref(),
            cache: args.cache.as_deref(),
            check_tasks: args.check_tasks,
        }
    }
}
