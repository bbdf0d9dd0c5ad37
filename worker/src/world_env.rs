//! The task's environment of an attempt with an interactive world (`Task::world`): its
//! sidecar services' images made ready ([`crate::image::for_services`]), the world started
//! ([`crate::runtime::world::start`]), then the environment started as a member of the
//! world's network, with every member's name in its `/etc/hosts` and the compose file's
//! `main` variables as its own (every program started in it sees them, as in a container
//! Docker started with them). The services and the environment share one cgroup budget with
//! the task's limits ([`crate::runtime::cgroup::Budget`]): a world of n services uses at most
//! the trial's compute, not n + 1 times it. The world ends with the environment. A task without a world
//! gets [`Env::start`] unchanged. One function for the trial's environment and for the
//! fresh environment a reference solution is graded in (`regrade`).

use crate::process::{CancelToken, ProcessSpec};
use crate::runtime::shared::{Env, Start};
use crate::runtime::{trust, Exposure, Limits};
use akbench_core::clock::Clock;
use akbench_core::record::services::ServiceFacts;
use akbench_core::task::world::World;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why the environment did not start.
#[derive(Debug)]
pub enum WorldEnvError {
    /// The task is wrong (a service's image or user it does not have): not retried.
    Refused(String),
    /// Anything else (a pull, a service that did not start or get healthy): the
    /// infrastructure's, never the agent's.
    Failed(String),
}

/// Where a world's services keep their files, their facts and the clock of their starts.
#[derive(Debug)]
pub struct WorldCtx<'a> {
    /// The worker's image store.
    pub images: &'a Path,
    /// A folder of the attempt's for the services (one folder each below it).
    pub scratch: &'a Path,
    /// The attempt's record of its services.
    pub facts: Arc<Mutex<Vec<ServiceFacts>>>,
    /// The attempt's clock.
    pub clock: &'a dyn Clock,
    /// Where the services' output is kept (the attempt's output folder), when it is.
    pub logs: Option<crate::runtime::world::Logs<'a>>,
}

/// How long a service may take to complete when another waits for that
/// (`service_completed_successfully`).
pub const COMPLETION_WAIT: Duration = Duration::from_secs(600);

/// [`Env::start`] of `keeper` in `exposure`, inside `world` when the task has one.
pub fn start(
    keeper: ProcessSpec,
    exposure: &Exposure,
    limits: Limits,
    trust: Option<trust::Extra>,
    world: Option<&World>,
    ctx: &WorldCtx<'_>,
    cancel: &CancelToken,
) -> Result<Env, WorldEnvError> {
    let Some(world) = world else {
        return Env::start(keeper, exposure, limits, trust)
            .map_err(|e| WorldEnvError::Failed(e.to_string()));
    };
    let store =
        crate::image::Store::from_env(ctx.images.to_path_buf()).map_err(WorldEnvError::Refused)?;
    let images = crate::image::for_services(&store, world).map_err(|e| match e {
        crate::image::TaskImageError::Refused(m) => WorldEnvError::Refused(m),
        e => WorldEnvError::Failed(format!("sidecar services: {e}")),
    })?;
    let images = images
        .into_iter()
        .map(|(n, i, u)| (n, i, Box::new(u) as Box<dyn std::any::Any + Send>))
        .collect();
    // One budget for the whole world: the services and the environment (with the agent and
    // what it leaves running) share the task's limits, as one trial's compute.
    let budget = crate::runtime::cgroup::Budget::create(&format!("{}-world", keeper.tag), &limits)
        .map_err(|e| WorldEnvError::Failed(format!("the world's cgroup: {e}")))?;
    let running = crate::runtime::world::start(
        world,
        images,
        &crate::runtime::world::StartWith {
            scratch: ctx.scratch,
            limits,
            budget: Some(budget.clone()),
            tag: &keeper.tag,
            facts: ctx.facts.clone(),
            clock: ctx.clock,
            completion_wait: COMPLETION_WAIT,
            logs: ctx.logs,
        },
        cancel,
    )
    .map_err(|e| WorldEnvError::Failed(format!("sidecar services: {e}")))?;
    let mut exposure = exposure.clone();
    exposure.budget = Some(budget);
    exposure.hosts.extend(world.addresses());
    if let Some(view) = exposure.container.as_mut() {
        view.image.run.env.extend(
            world
                .main_environment
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
    }
    let main = world.addresses()[0].1;
    let hub = running.hub();
    let attach = |fd: &std::os::fd::OwnedFd| hub.attach(fd, main);
    let mut env = Env::start_with(
        keeper,
        &exposure,
        limits,
        trust,
        Start {
            program: None,
            attach: Some(&attach),
        },
    )
    .map_err(|e| WorldEnvError::Failed(e.to_string()))?;
    env.join_world(running);
    Ok(env)
}
