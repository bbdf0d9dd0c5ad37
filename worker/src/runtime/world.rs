//! An interactive world while it runs: the trial's private network ([`super::world_net`])
//! and one [`super::shared::Env`] per sidecar service (its own sandbox over its own image,
//! its own namespaces, cgroup and limits), kept until the task's environment ends
//! ([`super::shared::Env::join_world`]) and then ended, each service's ending written into
//! the attempt's record ([`akbench_core::record::services`]).
//!
//! Which service starts when, and what is waited for, is decided by the orchestrator
//! (`orchestrator::container::world`) from `core::task::world`; this module only holds
//! what runs.

use super::shared::Env;
use super::world_net::Hub;
use akbench_core::record::services::{ended, ServiceFacts};
use std::sync::{Arc, Mutex};

/// A running world.
pub struct Running {
    hub: Hub,
    /// The services started, each with its index in `facts`.
    members: Vec<(String, Env, usize)>,
    /// The attempt's record of the services (shared with the attempt, which reads it when
    /// the record is written, after the world ended).
    facts: Arc<Mutex<Vec<ServiceFacts>>>,
    /// What must stay in use while the world runs (its unpacked images).
    held: Vec<Box<dyn std::any::Any + Send>>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("hub", &self.hub)
            .field(
                "members",
                &self.members.iter().map(|m| &m.0).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Running {
    /// A world with no service yet, on `hub`; its services' facts go to `facts`.
    pub fn new(hub: Hub, facts: Arc<Mutex<Vec<ServiceFacts>>>) -> Running {
        Running {
            hub,
            members: Vec::new(),
            facts,
            held: Vec::new(),
        }
    }

    /// The network every member is linked to.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// Keeps `thing` (an unpacked image in use) until the world ends.
    pub fn hold(&mut self, thing: Box<dyn std::any::Any + Send>) {
        self.held.push(thing);
    }

    /// Adds a started service and its facts.
    pub fn add(&mut self, name: &str, env: Env, facts: ServiceFacts) {
        let i = match self.facts.lock() {
            Ok(mut f) => {
                f.push(facts);
                f.len() - 1
            }
            Err(_) => usize::MAX,
        };
        self.members.push((name.to_string(), env, i));
    }

    /// The running service `name`.
    pub fn service(&mut self, name: &str) -> Option<&mut Env> {
        self.members
            .iter_mut()
            .find(|m| m.0 == name)
            .map(|m| &mut m.1)
    }

    /// Notes that service `name`'s condition was met `ms` after its start.
    pub fn ready(&self, name: &str, ms: u64) {
        let Some(i) = self.members.iter().find(|m| m.0 == name).map(|m| m.2) else {
            return;
        };
        if let Ok(mut f) = self.facts.lock() {
            if let Some(s) = f.get_mut(i) {
                s.ready_ms.get_or_insert(ms);
            }
        }
    }

    /// Ends every service (the last started first) and records how each ended.
    pub fn end(mut self) {
        while let Some((_, mut env, i)) = self.members.pop() {
            let stopped = !env.has_exited();
            if !stopped {
                env.wait_exit();
            }
            let end = env.finish_keeping_end();
            if let (Some(end), Ok(mut f)) = (end, self.facts.lock()) {
                if let Some(s) = f.get_mut(i) {
                    s.ended = Some(ended(end.exit_code, end.signal, stopped));
                }
            }
        }
    }
}

/// What [`start`] needs besides the world and its images.
#[derive(Debug)]
pub struct StartWith<'a> {
    /// A folder of the attempt's for the services' own files (one folder each).
    pub scratch: &'a std::path::Path,
    /// Each service's limits.
    pub limits: super::Limits,
    /// The world's shared group, each service's nested in it (so the services and the
    /// environment together keep the task's limits).
    pub budget: Option<Arc<super::cgroup::Budget>>,
    /// The attempt's tag (each service's is `<tag>-svc-<name>`).
    pub tag: &'a str,
    /// Where the services' facts go.
    pub facts: Arc<Mutex<Vec<ServiceFacts>>>,
    /// The attempt's clock (each service's start time).
    pub clock: &'a dyn akbench_core::clock::Clock,
    /// The longest wait for a dependency to complete (`service_completed_successfully`).
    pub completion_wait: std::time::Duration,
    /// Where the services' output is kept, when it is; else in each service's folder under
    /// `scratch`, which goes with the attempt's work folder.
    pub logs: Option<Logs<'a>>,
}

/// Where a world's services' output is kept (the attempt's output folder):
/// `<dir>/<service>.stdout.log` and `.stderr.log`, written by the process layer as the
/// agent's output is, each cut at `cap` bytes, and named `<rel>/<service>.*.log` in the
/// record ([`ServiceFacts`]).
#[derive(Debug, Clone, Copy)]
pub struct Logs<'a> {
    /// The folder (created when the first service starts).
    pub dir: &'a std::path::Path,
    /// The folder as the record names it (relative to the record's folder).
    pub rel: &'a str,
    /// The most bytes kept of each stream (the attempt's `output_cap`).
    pub cap: u64,
}

/// A service's image as [`start`] takes it: (service name, view, what to hold in use).
pub type ServiceImage = (
    String,
    super::container::Image,
    Box<dyn std::any::Any + Send>,
);

/// Starts `world`: the hub, then each service in `depends_on` order, each after what it
/// depends on met its condition; then waits for what `main` depends on. The error says
/// which service failed and why (the caller counts it as the infrastructure's: the
/// agent has not started).
pub fn start(
    world: &akbench_core::task::world::World,
    images: Vec<ServiceImage>,
    with: &StartWith<'_>,
    cancel: &crate::process::CancelToken,
) -> Result<Running, String> {
    use super::container::View;
    use super::shared::Start;
    let order = world.start_order()?;
    let mut images: std::collections::BTreeMap<String, _> =
        images.into_iter().map(|(n, i, h)| (n, (i, h))).collect();
    let addresses: std::collections::BTreeMap<String, std::net::Ipv4Addr> =
        world.addresses().into_iter().collect();
    let mut running = Running::new(Hub::new()?, with.facts.clone());
    let mut waits = Waits::default();
    for s in order {
        waits.wait_for(&mut running, world, &s.name, &s.depends_on, with, cancel)?;
        let (image, held) = images
            .remove(&s.name)
            .ok_or_else(|| format!("service `{}`: no image was made ready", s.name))?;
        let scratch = with.scratch.join(&s.name);
        std::fs::create_dir_all(&scratch)
            .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
        let argv = program(s, &image.run);
        let pinned = image.pinned.clone();
        let (out, kept) = match &with.logs {
            Some(l) => {
                std::fs::create_dir_all(l.dir)
                    .map_err(|e| format!("cannot create {}: {e}", l.dir.display()))?;
                let name = |stream: &str| format!("{}.{stream}.log", s.name);
                (
                    [l.dir.join(name("stdout")), l.dir.join(name("stderr"))],
                    Some((
                        [
                            format!("{}/{}", l.rel, name("stdout")),
                            format!("{}/{}", l.rel, name("stderr")),
                        ],
                        l.cap,
                    )),
                )
            }
            None => (
                [
                    scratch.join("environment.stdout.log"),
                    scratch.join("environment.stderr.log"),
                ],
                None,
            ),
        };
        let exposure = super::Exposure {
            scratch: scratch.clone(),
            container: Some(View {
                image,
                mounts: Vec::new(),
                ro_mounts: Vec::new(),
                tools: Vec::new(),
                workspace: false,
            }),
            hosts: addresses.iter().map(|(n, a)| (n.clone(), *a)).collect(),
            budget: with.budget.clone(),
            ..Default::default()
        };
        let spec = crate::process::ProcessSpec {
            argv: Vec::new(),
            cwd: scratch.clone(),
            env: s.environment.clone(),
            stdout_path: out[0].clone(),
            stderr_path: out[1].clone(),
            output_cap: kept.as_ref().map_or(1 << 20, |k| k.1),
            timeout: std::time::Duration::from_secs(7 * 24 * 3600),
            grace: std::time::Duration::from_secs(2),
            tag: format!("{}-svc-{}", with.tag, s.name),
            hooks: Default::default(),
        };
        let addr = addresses[&s.name];
        let hub = running.hub();
        let attach = |fd: &std::os::fd::OwnedFd| hub.attach(fd, addr);
        let started_at = with.clock.now();
        let env = super::shared::Env::start_with(
            spec.clone(),
            &exposure,
            with.limits,
            None,
            Start {
                program: Some(argv),
                attach: Some(&attach),
            },
        )
        .map_err(|e| format!("service `{}` did not start: {e}", s.name))?;
        running.hold(held);
        running.add(
            &s.name,
            env,
            ServiceFacts {
                name: s.name.clone(),
                image: pinned,
                started_at,
                ready_ms: None,
                ended: None,
                stdout_path: kept.as_ref().map(|k| k.0[0].clone()),
                stderr_path: kept.map(|k| k.0[1].clone()),
            },
        );
        waits.started(&s.name, spec);
    }
    waits.wait_for(
        &mut running,
        world,
        akbench_core::task::world::MAIN,
        &world.main_depends_on,
        with,
        cancel,
    )?;
    Ok(running)
}

/// A service's program: compose's `entrypoint` (else the image's), then `command` (else the
/// image's `Cmd`, which an `entrypoint` of the compose file drops, as Docker does).
pub fn program(
    s: &akbench_core::task::world::Service,
    run: &akbench_core::image::manifest::RunConfig,
) -> Vec<String> {
    let entry = s
        .entrypoint
        .clone()
        .unwrap_or_else(|| run.entrypoint.clone());
    let cmd = match (&s.command, &s.entrypoint) {
        (Some(c), _) => c.clone(),
        (None, Some(_)) => Vec::new(),
        (None, None) => run.cmd.clone(),
    };
    entry.into_iter().chain(cmd).collect()
}

/// What [`start`] knows of the services' conditions so far.
#[derive(Default)]
struct Waits {
    /// Each started service's start and its process template (for its healthcheck).
    started: std::collections::BTreeMap<String, (std::time::Instant, crate::process::ProcessSpec)>,
    /// Services whose healthcheck passed.
    healthy: std::collections::BTreeSet<String>,
}

impl Waits {
    fn started(&mut self, name: &str, template: crate::process::ProcessSpec) {
        self.started
            .insert(name.to_string(), (std::time::Instant::now(), template));
    }

    /// Waits until every dependency of `who` met its condition.
    fn wait_for(
        &mut self,
        running: &mut Running,
        world: &akbench_core::task::world::World,
        who: &str,
        deps: &[akbench_core::task::world::Dependency],
        with: &StartWith<'_>,
        cancel: &crate::process::CancelToken,
    ) -> Result<(), String> {
        use akbench_core::task::world::Condition;
        for d in deps {
            let Some((at, template)) = self.started.get(&d.service).cloned() else {
                return Err(format!(
                    "`{who}` depends on `{}`, which has not started",
                    d.service
                ));
            };
            match d.condition {
                Condition::ServiceStarted => {}
                Condition::ServiceHealthy => {
                    if self.healthy.contains(&d.service) {
                        continue;
                    }
                    let hc = world
                        .service(&d.service)
                        .and_then(|s| s.healthcheck.clone())
                        .ok_or_else(|| {
                            format!(
                                "`{who}` waits for `{}` to be healthy, and `{}` has no healthcheck; fix: give it one in the compose file, or depend on `service_started`",
                                d.service, d.service
                            )
                        })?;
                    let env = running
                        .service(&d.service)
                        .ok_or_else(|| format!("service `{}` is not running", d.service))?;
                    let scratch = with.scratch.join(&d.service);
                    if env.has_exited() {
                        let code = env.wait_exit().and_then(|e| e.exit_code);
                        return Err(format!(
                            "service `{}` ended ({}) before it became healthy (`{who}` waits for it): {}",
                            d.service,
                            code.map_or("without an exit code".to_string(), |c| format!("exit code {c}")),
                            said(&template.stderr_path)
                        ));
                    }
                    super::health::poll(env, &hc, &template, &scratch, cancel).map_err(|e| {
                        format!(
                            "service `{}` did not become healthy (`{who}` waits for it): {e}",
                            d.service
                        )
                    })?;
                    self.healthy.insert(d.service.clone());
                    running.ready(&d.service, at.elapsed().as_millis() as u64);
                }
                Condition::ServiceCompletedSuccessfully => {
                    let until = std::time::Instant::now() + with.completion_wait;
                    let env = running
                        .service(&d.service)
                        .ok_or_else(|| format!("service `{}` is not running", d.service))?;
                    while !env.has_exited() {
                        if cancel.is_cancelled() {
                            return Err(format!(
                                "cancelled while `{who}` waited for `{}` to complete",
                                d.service
                            ));
                        }
                        if std::time::Instant::now() > until {
                            return Err(format!(
                                "service `{}` did not complete within {} s (`{who}` waits for it to complete successfully)",
                                d.service,
                                with.completion_wait.as_secs()
                            ));
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    let code = env.wait_exit().and_then(|e| e.exit_code);
                    if code != Some(0) {
                        let said = said(&template.stderr_path);
                        return Err(format!(
                            "service `{}` ended {} and `{who}` waits for it to complete successfully: {}",
                            d.service,
                            code.map_or("without an exit code".to_string(), |c| format!("with exit code {c}")),
                            said
                        ));
                    }
                    running.ready(&d.service, at.elapsed().as_millis() as u64);
                }
            }
        }
        Ok(())
    }
}

/// The end of what a service's program wrote to its stderr (`path`).
fn said(path: &std::path::Path) -> String {
    let text = akbench_core::bounded_read::ReadKind::Log
        .read_text(path, akbench_core::bounded_read::Links::Refuse)
        .unwrap_or_default();
    akbench_core::limits::elide(text.trim())
}
