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
        image: image.clone(),
        mounts,
        ro_mounts: solution
            .map(|s| vec![(s.to_path_buf(), "/solution".to_string())])
            .unwrap_or_default(),
        tools: agent_tools(host_path),
    })
}

/// Whether the agent runs in a long-lived environment of the task ([`crate::runtime::shared`]):
/// the attempt grades in it (`place`, [`akbench_core::grading_env::decide`]) or the task
/// declares a healthcheck.
pub(super) fn wants_environment(
    task: &akbench_core::task::Task,
    place: akbench_core::grading_env::GradeIn,
) -> bool {
    place.shared() || task.file.environment.contains_key("healthcheck")
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

/// Polls `hc` in `env` until it passes ([`akbench_core::healthcheck::next`]): the task's
/// healthcheck, or a step's (`[[steps]] healthcheck`, after the step's setup). The error
/// says why it is unhealthy, with the last try's output.
pub(crate) fn poll(
    env: &crate::runtime::shared::Env,
    hc: &akbench_core::healthcheck::Healthcheck,
    template: &crate::process::ProcessSpec,
    scratch: &Path,
    cancel: &crate::process::CancelToken,
) -> Result<(), String> {
    use akbench_core::healthcheck::{next, Next};
    use std::time::{Duration, Instant};
    let start = Instant::now();
    let mut failures = 0;
    for n in 1u64.. {
        let started_at = start.elapsed().as_secs_f64();
        let mut spec = template.clone();
        spec.argv = vec!["sh".into(), "-c".into(), hc.command.clone()];
        spec.stdout_path = scratch.join("healthcheck.stdout.log");
        spec.stderr_path = scratch.join("healthcheck.stderr.log");
        spec.timeout = Duration::from_secs_f64(hc.timeout_sec);
        spec.grace = Duration::from_secs(1);
        spec.tag = format!("{}-health-{n}", template.tag);
        spec.output_cap = 64 * 1024;
        let prepared = env
            .exec(
                spec.clone(),
                crate::runtime::shared::ExecAs::Grader {
                    mounts: Vec::new(),
                    writable: Vec::new(),
                    limits: crate::runtime::Limits::default(),
                },
                // A probe: the environment's network as it is, no proxy of its own.
                None,
            )
            .map_err(|e| format!("failed to run the healthcheck: {e}"))?;
        let guard = prepared.guard;
        let running = match crate::process::spawn(prepared.spec) {
            Ok(r) => r,
            Err(e) => {
                guard.finish();
                return Err(format!("failed to run the healthcheck: {e}"));
            }
        };
        let end = running.wait(cancel);
        guard.finish();
        if cancel.is_cancelled() {
            return Err("cancelled while the healthcheck ran".into());
        }
        let passed = end.exit_code == Some(0) && !end.timed_out;
        match next(hc, started_at, passed, &mut failures) {
            Next::Healthy => return Ok(()),
            Next::Unhealthy(why) => {
                let said = [&spec.stdout_path, &spec.stderr_path]
                    .iter()
                    .map(|p| {
                        akbench_core::bounded_read::ReadKind::Log
                            .read_text(p, akbench_core::bounded_read::Links::Refuse)
                            .unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join("");
                let last = if end.timed_out {
                    format!("the last try ran out of its {}s", hc.timeout_sec)
                } else if let Some(code) = end.exit_code {
                    format!("the last try exited {code}")
                } else {
                    format!("the last try was killed by signal {:?}", end.signal)
                };
                return Err(format!(
                    "{why}; {last}: {}",
                    akbench_core::limits::elide(said.trim())
                ));
            }
            Next::Retry(secs) => {
                let until = Instant::now() + Duration::from_secs_f64(secs);
                while Instant::now() < until {
                    if cancel.is_cancelled() {
                        return Err("cancelled while the healthcheck ran".into());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
    Ok(())
}
