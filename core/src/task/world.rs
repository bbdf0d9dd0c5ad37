//! An interactive world: the sidecar services of `environment/docker-compose.yaml`, as
//! Harbor 0.25 merges a task's compose file over its own (`main` is the task's
//! environment; every other service is a sidecar the agent and the grader reach by its
//! name on a network private to the trial).
//!
//! This module owns the typed model a runtime starts ([`World`], [`Service`]) and the
//! rules that do not need I/O: the start order ([`World::start_order`]: `depends_on`,
//! with each dependency's condition) and the names `/etc/hosts` gives each member of the
//! network ([`World::addresses`]). Reading the compose file, and refusing every key that
//! could not take effect by name, is [`parse`] (a service's `build:` is `build.rs`; its
//! pin, written into task.toml by `akbench image build`, is [`World::pin_built`]); what
//! `akbench task check` shows of it is [`World::summary`].
//!
//! Layer: imports `image`, `healthcheck` and `limits` only.

use crate::healthcheck::Healthcheck;
use crate::image::ImageRef;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// The compose service that is the task's own environment (Harbor's name).
pub const MAIN: &str = "main";

/// The sidecars of one task and what `main` declares about them.
#[derive(Debug, Clone, PartialEq)]
pub struct World {
    /// The sidecar services, in the order the compose file lists them.
    pub services: Vec<Service>,
    /// What the compose file's `main` service declares: the services it waits for.
    pub main_depends_on: Vec<Dependency>,
    /// Variables the compose file's `main` service sets for every program in the task's
    /// environment (`environment:` of `main`).
    pub main_environment: BTreeMap<String, String>,
}

/// One sidecar service.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    /// The compose service name: a DNS label, resolved by every member of the network.
    pub name: String,
    /// Its image, pinned by digest (`registry/repository@sha256:...`): the compose file's
    /// `image:`, or for a service with [`Service::build`] the pin `akbench image build`
    /// wrote into task.toml ([`World::pin_built`]); `None`: built from `build:` and not
    /// built yet (the task does not run until it is).
    pub image: Option<ImageRef>,
    /// `build:` of a service whose image akbench builds (`akbench image build`); `None`
    /// when the compose file pins the image by digest (the pin wins; Harbor still builds
    /// from `build:`) or the service has no `build:`.
    pub build: Option<Build>,
    /// `entrypoint:` as argv (a string is split as compose splits it); `None`: the image's.
    pub entrypoint: Option<Vec<String>>,
    /// `command:` as argv; `None`: the image's `Cmd`.
    pub command: Option<Vec<String>>,
    /// `environment:` (a list of `KEY=VALUE` or a map), on top of the image's.
    pub environment: BTreeMap<String, String>,
    /// `working_dir:`; `None`: the image's.
    pub working_dir: Option<String>,
    /// `user:`; `None`: the image's.
    pub user: Option<String>,
    /// The services it waits for before it starts.
    pub depends_on: Vec<Dependency>,
    /// `healthcheck:` (its test as one shell command); `None`: the image's is not read
    /// and the service counts as healthy once started.
    pub healthcheck: Option<Healthcheck>,
}

/// A service's `build:`, both paths relative to the task's `environment/` folder,
/// normalised (no `.` or `..` component; the folder itself is `.`), never leaving it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Build {
    /// The build context (`build: ./kv` or `build: {context: ./kv}`): `kv`.
    pub context: String,
    /// The Dockerfile (`dockerfile:`, relative to the context; `Dockerfile` when unset):
    /// `kv/Dockerfile`.
    pub dockerfile: String,
}

/// One `depends_on` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    /// The service waited for.
    pub service: String,
    /// What is waited for.
    pub condition: Condition,
}

/// Compose's `depends_on` conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// `service_started` (the default, and the list form).
    ServiceStarted,
    /// `service_healthy`: its healthcheck passed.
    ServiceHealthy,
    /// `service_completed_successfully`: it exited 0.
    ServiceCompletedSuccessfully,
}

/// The subnet of a trial's private network: every trial has its own namespaces, so every
/// trial may use the same addresses.
pub const SUBNET: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 89, 0, 0), 24);

impl World {
    /// The services in an order that starts each after everything it depends on (the
    /// compose file's order among independent ones); an error names a cycle or an unknown
    /// service.
    pub fn start_order(&self) -> Result<Vec<&Service>, String> {
        let mut order: Vec<&Service> = Vec::new();
        let mut state: BTreeMap<&str, u8> = BTreeMap::new(); // 1: visiting, 2: done
        fn visit<'a>(
            w: &'a World,
            s: &'a Service,
            state: &mut BTreeMap<&'a str, u8>,
            order: &mut Vec<&'a Service>,
            path: &mut Vec<&'a str>,
        ) -> Result<(), String> {
            match state.get(s.name.as_str()) {
                Some(2) => return Ok(()),
                Some(_) => {
                    path.push(&s.name);
                    return Err(format!("`depends_on` has a cycle: {}", path.join(" -> ")));
                }
                None => {}
            }
            state.insert(&s.name, 1);
            path.push(&s.name);
            for d in &s.depends_on {
                let Some(dep) = w.service(&d.service) else {
                    return Err(format!(
                        "service `{}` depends on `{}`, which the compose file does not define",
                        s.name, d.service
                    ));
                };
                visit(w, dep, state, order, path)?;
            }
            path.pop();
            state.insert(&s.name, 2);
            order.push(s);
            Ok(())
        }
        for s in &self.services {
            visit(self, s, &mut state, &mut order, &mut Vec::new())?;
        }
        for d in &self.main_depends_on {
            if self.service(&d.service).is_none() {
                return Err(format!(
                    "service `main` depends on `{}`, which the compose file does not define",
                    d.service
                ));
            }
        }
        Ok(order)
    }

    /// The services built from `build:` that have no image yet, in the compose file's order.
    pub fn unbuilt(&self) -> Vec<&str> {
        self.services
            .iter()
            .filter(|s| s.image.is_none())
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Gives each service built by akbench its pin from task.toml
    /// (`[environment.service_images]`, written by `akbench image build`). A pin for a
    /// service the compose file does not define, or does not build (no `build:`, or its
    /// own `image:` pinned by digest, which wins), is refused naming the service.
    pub fn pin_built(&mut self, pins: &BTreeMap<String, ImageRef>) -> Result<(), WorldError> {
        for (name, pin) in pins {
            let Some(s) = self.services.iter_mut().find(|s| &s.name == name) else {
                return Err(parse::err(
                    Some(name),
                    "",
                    "has a pinned image in task.toml (`[environment.service_images]`), but the compose file defines no such sidecar",
                    "remove the line, or run `akbench image build` again after renaming the service",
                ));
            };
            if s.build.is_none() {
                return Err(parse::err(
                    Some(name),
                    "",
                    "has a pinned image in task.toml (`[environment.service_images]`), but akbench does not build it (it has no `build:`, or the compose file pins its `image:` by digest, which wins)",
                    "remove the line from `[environment.service_images]`",
                ));
            }
            if pin.digest.is_none() {
                return Err(parse::err(
                    Some(name),
                    "",
                    format!("has the image `{pin}` in task.toml (`[environment.service_images]`), not pinned by digest"),
                    "run `akbench image build TASK --push REGISTRY`, which writes it pinned",
                ));
            }
            s.image = Some(pin.clone());
        }
        Ok(())
    }

    /// The service named `name`.
    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }

    /// Every member's address on the trial's network: `main` first (10.89.0.2), then each
    /// service in the compose file's order (10.89.0.3, ...).
    pub fn addresses(&self) -> Vec<(String, Ipv4Addr)> {
        std::iter::once(MAIN)
            .chain(self.services.iter().map(|s| s.name.as_str()))
            .enumerate()
            .map(|(i, n)| {
                let o = SUBNET.0.octets();
                (n.to_string(), Ipv4Addr::new(o[0], o[1], o[2], 2 + i as u8))
            })
            .collect()
    }

    /// The lines `/etc/hosts` gets for the world's members (each name at its address).
    pub fn hosts_lines(&self) -> String {
        self.addresses()
            .iter()
            .map(|(n, a)| format!("{a} {n}\n"))
            .collect()
    }
}

mod build;
mod parse;
mod service_keys;
mod summary;
mod values;

pub use build::BUILD_KEYS_REFUSED;
pub use parse::{parse, WorldError, MAX_SIDECARS, REFUSED};
pub use summary::ServiceSummary;

#[cfg(test)]
mod tests;
