//! The `container` runtime's part of an attempt: the task's image made ready at
//! CONFIGURING_RUNTIME, the agent's view of it (Harbor's `/logs/agent` and
//! `/logs/artifacts`, the worker's agent CLIs read-only), and the healthcheck polled in the
//! task's environment before the agent starts.

pub(crate) mod stage;

use super::{AttemptRequest, Orchestrator};
use crate::image::{for_task, Store, TaskImageError, Unpacked};
use crate::runtime::container::{agent_tools, Image, View};
use crate::runtime::RuntimeKind;
use akbench_core::endpoint::Endpoint;
use akbench_core::lifecycle::Event;
use std::path::Path;

/// For a `container` attempt: the task's image, held in use, and the note of the
/// CONFIGURING_RUNTIME transition; `None` under any other runtime.
#[allow(clippy::type_complexity)]
pub(super) fn image(
    orch: &Orchestrator,
    req: &AttemptRequest<'_>,
    endpoints: &[Endpoint],
) -> Result<Option<(Unpacked, Image, String)>, (Event, String)> {
    if req.options.runtime != RuntimeKind::Container {
        return Ok(None);
    }
    let store = Store::from_env(orch.images.clone()).map_err(|e| (Event::Rejected, e))?;
    let (held, image) = match for_task(&store, req.task) {
        Ok(x) => x,
        Err(TaskImageError::Refused(e)) => return Err((Event::Rejected, e)),
        Err(e @ TaskImageError::Pull(_)) => {
            return Err((Event::InfrastructureFailed, e.to_string()))
        }
    };
    let note = format!(
        "container: {} ({}), workspace at {}, bubblewrap (pid, mount, ipc, uts, net namespaces) over a copy-on-write view, {}, network: {}",
        image.pinned,
        if held.fetched { "pulled and unpacked" } else { "cached" },
        image.workdir,
        req.limits().describe(),
        if endpoints.is_empty() {
            "none".to_string()
        } else {
            endpoints.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        }
    );
    Ok(Some((held, image, note)))
}

/// Harbor's folders under `/logs` the agent writes (each a folder of the attempt's work
/// folder, `logs/<name>`, collected into its artifacts when the attempt ends).
pub const LOGS: [&str; 2] = ["agent", "artifacts"];

/// The agent's view: the image, `/logs/agent` and `/logs/artifacts` (folders of the
/// attempt's work folder `work`, never of its results: they are collected into the
/// artifacts, under `logs/`, once the agent is gone, links left out and capped), the
/// worker's agent CLIs found on `host_path`, and `solution` (the task's reference solution,
/// given only to an agent granted it: the oracle) read-only at Harbor's `/solution`.
pub(super) fn agent_view(
    image: &Image,
    work: &Path,
    host_path: &str,
    solution: Option<&Path>,
) -> Result<View, String> {
    let mut mounts = Vec::new();
    for name in LOGS {
        let host = work.join("logs").join(name);
        std::fs::create_dir_all(&host)
            .map_err(|e| format!("failed to create {}: {e}", host.display()))?;
        mounts.push((host, format!("/logs/{name}")));
    }
    Ok(View {
        workspace: true,
        image: image.clone(),
        mounts,
        ro_mounts: solution
            .map(|s| vec![(s.to_path_buf(), "/solution".to_string())])
            .unwrap_or_default(),
        tools: agent_tools(host_path),
    })
}

/// Whether the agent runs in a long-lived environment of the task ([`crate::runtime::shared`]):
/// the attempt grades in it (`place`, [`akbench_core::grading_env::decide`]), the task
/// declares a healthcheck, or it has sidecar services (they join that environment).
pub(super) fn wants_environment(
    task: &akbench_core::task::Task,
    place: akbench_core::grading_env::GradeIn,
) -> bool {
    place.shared() || task.file.environment.contains_key("healthcheck") || task.world.is_some()
}

/// Polls the task's `[environment] healthcheck` in `env` until it passes
/// ([`akbench_core::healthcheck::next`]); the error says why it is unhealthy, with the last
/// try's output. `template` gives the environment variables, folder and tag of the tries.
pub(crate) fn healthcheck(
    env: &crate::runtime::shared::Env,
    task: &akbench_core::task::Task,
    template: &crate::process::ProcessSpec,
    scratch: &Path,
    cancel: &crate::process::CancelToken,
) -> Result<(), String> {
    let Some(v) = task.file.environment.get("healthcheck") else {
        return Ok(());
    };
    let hc =
        akbench_core::healthcheck::parse(v).map_err(|e| format!("environment.healthcheck {e}"))?;
    poll(env, &hc, template, scratch, cancel)
}

pub(crate) use crate::runtime::health::poll;
