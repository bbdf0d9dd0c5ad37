//! Reads `environment/docker-compose.yaml` into a [`World`]: every key of the file either
//! takes effect, is a no-op akbench says so about (docs/tasks.md, "Sidecar services"), or is
//! refused with a [`WorldError`] naming the service, the key and the fix. `main` is the
//! task's own environment (Harbor merges the task's file over its base, so `main` may carry
//! overrides); every other service is a sidecar. The value syntaxes are `values.rs`;
//! `depends_on` and `healthcheck` are `service_keys.rs`.

use super::service_keys::{depends_on, healthcheck};
use super::values::{interpolate, split_words};
use super::{Condition, Service, World, MAIN};
use crate::image::ImageRef;
use crate::limits::elide;
use serde_norway::{Mapping, Value};
use std::collections::BTreeMap;

/// The most sidecar services a task may declare.
pub const MAX_SIDECARS: usize = 32;

/// A compose file akbench cannot run as written: where (`service`, `key`), what is wrong
/// and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct WorldError {
    /// The service at fault; `None` for the file or its top-level keys.
    pub service: Option<String>,
    /// The key at fault (`volumes`, `healthcheck.interval`); empty for the whole file.
    pub key: String,
    /// What is wrong.
    pub problem: String,
    /// What to do.
    pub fix: String,
}

impl WorldError {
    fn render(&self) -> String {
        let at = match (&self.service, self.key.is_empty()) {
            (Some(s), false) => format!("service `{s}`: `{}` ", self.key),
            (Some(s), true) => format!("service `{s}` "),
            (None, false) => format!("`{}` ", self.key),
            (None, true) => String::new(),
        };
        format!("{at}{}; fix: {}", self.problem, self.fix)
    }
}

pub(super) fn err(
    service: Option<&str>,
    key: &str,
    problem: impl Into<String>,
    fix: impl Into<String>,
) -> WorldError {
    WorldError {
        service: service.map(str::to_string),
        key: key.to_string(),
        problem: problem.into(),
        fix: fix.into(),
    }
}

const SEE_DOCS: &str =
    "remove it (docs/tasks.md, \"Sidecar services\", lists the keys that take effect)";

/// Reads a compose file's text.
pub fn parse(text: &str) -> Result<World, WorldError> {
    let yaml_fix = "correct the YAML at the place shown";
    let mut doc: Value = serde_norway::from_str(text).map_err(|e| {
        err(
            None,
            "",
            format!("is not valid YAML: {}", elide(&e.to_string())),
            yaml_fix,
        )
    })?;
    doc.apply_merge().map_err(|e| {
        err(
            None,
            "",
            format!("has a bad `<<` merge: {}", elide(&e.to_string())),
            yaml_fix,
        )
    })?;
    let Value::Mapping(top) = doc else {
        return Err(err(
            None,
            "",
            "is not a mapping of top-level keys",
            "start the file with `services:`",
        ));
    };
    let mut services = None;
    for (k, v) in &top {
        let key = key_str(None, k)?;
        match key {
            "services" => services = Some(v),
            "version" | "name" => {}
            k if k.starts_with("x-") => {}
            "networks" | "volumes" | "configs" | "secrets" => {
                if !is_empty(v) {
                    return Err(err(
                        None,
                        key,
                        format!("declares {key}, which cannot take effect (every service is on one private network of the trial and has its own file system)"),
                        format!("remove the top-level `{key}` and the services' uses of it"),
                    ));
                }
            }
            other => {
                return Err(err(
                    None,
                    other,
                    "is not a compose key akbench runs",
                    SEE_DOCS,
                ));
            }
        }
    }
    let Some(services) = services else {
        return Err(err(
            None,
            "services",
            "is missing",
            "declare the sidecars under `services:`",
        ));
    };
    let Value::Mapping(services) = services else {
        return Err(err(
            None,
            "services",
            "is not a mapping of service names",
            "write `services:` with one key per service",
        ));
    };
    let mut world = World {
        services: Vec::new(),
        main_depends_on: Vec::new(),
        main_environment: BTreeMap::new(),
    };
    for (k, v) in services {
        let name = key_str(None, k)?;
        check_name(name)?;
        let Value::Mapping(m) = v else {
            return Err(err(
                Some(name),
                "",
                "is not a mapping of keys",
                "give the service its keys (`image:` at least), or remove it",
            ));
        };
        if name == MAIN {
            main(m, &mut world)?;
        } else {
            if world.services.len() == MAX_SIDECARS {
                return Err(err(
                    Some(name),
                    "",
                    format!("is one sidecar more than the {MAX_SIDECARS} a task may have"),
                    "merge services, or run the task with Harbor",
                ));
            }
            world.services.push(sidecar(name, m)?);
        }
    }
    checks(&world)?;
    Ok(world)
}

pub(super) fn key_str<'a>(service: Option<&str>, k: &'a Value) -> Result<&'a str, WorldError> {
    k.as_str().ok_or_else(|| {
        err(
            service,
            &elide(&format!("{k:?}")),
            "is not a string key",
            "write keys as names",
        )
    })
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Mapping(m) => m.is_empty(),
        Value::Sequence(s) => s.is_empty(),
        _ => false,
    }
}

fn check_name(name: &str) -> Result<(), WorldError> {
    let label = !name.is_empty()
        && name.len() <= 63
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if name == "localhost" {
        return Err(err(
            Some(name),
            "",
            "is a name every member of the network already gives itself",
            "rename the service",
        ));
    }
    if label {
        Ok(())
    } else {
        Err(err(
            Some(&elide(name)),
            "",
            "is not a DNS label (the others reach a service by its name)",
            "name it with lowercase letters, digits and `-`, starting with a letter or digit, at most 63 characters",
        ))
    }
}

/// The value with compose's interpolation applied to every string in it.
fn interpolated(service: &str, key: &str, v: &Value) -> Result<Value, WorldError> {
    Ok(match v {
        Value::String(s) => Value::String(interpolate(s).map_err(|e| {
            err(
                Some(service),
                key,
                format!("`{}` {e}, which akbench does not fill (Harbor fills some from its own run and the rest from the shell)", elide(s)),
                "write the value itself (`$$` is a literal `$`)",
            )
        })?),
        Value::Sequence(s) => Value::Sequence(s.iter().map(|x| interpolated(service, key, x)).collect::<Result<_, _>>()?),
        Value::Mapping(m) => {
            let mut out = Mapping::new();
            for (k, x) in m {
                out.insert(k.clone(), interpolated(service, key, x)?);
            }
            Value::Mapping(out)
        }
        Value::Tagged(t) => {
            return Err(err(
                Some(service),
                key,
                format!("has the YAML tag `{}`, which akbench does not apply (compose's `!reset` / `!override` merge files, and akbench reads this one alone)", elide(&t.tag.to_string())),
                "write the value without the tag",
            ))
        }
        other => other.clone(),
    })
}

fn sidecar(name: &str, m: &Mapping) -> Result<Service, WorldError> {
    let s = Some(name);
    let (mut image, mut build) = (None, None);
    let (mut entrypoint, mut command, mut working_dir, mut user) = (None, None, None, None);
    let (mut environment_, mut depends, mut health) = (BTreeMap::new(), Vec::new(), None);
    for (k, raw) in m {
        let key = key_str(s, k)?;
        if key.starts_with("x-") {
            continue;
        }
        let v = interpolated(name, key, raw)?;
        match key {
            "image" => image = Some(v),
            "build" => build = Some(super::build::build(name, &v)?),
            "entrypoint" => entrypoint = argv(name, key, &v)?,
            "command" => command = argv(name, key, &v)?,
            "environment" => environment_ = environment(name, &v)?,
            "working_dir" => {
                let d = string(name, key, &v)?;
                if !d.starts_with('/') {
                    return Err(err(
                        s,
                        key,
                        format!("`{}` is not an absolute path", elide(&d)),
                        "give an absolute path such as `/srv`",
                    ));
                }
                working_dir = Some(d);
            }
            "user" => user = Some(scalar(name, key, &v)?),
            "depends_on" => depends = depends_on(name, &v)?,
            "healthcheck" => health = healthcheck(name, &v)?,
            _ => no_op(name, key, &v)?,
        }
    }
    // With `build:`, compose's `image:` names what it builds: a pin by digest wins (akbench
    // runs it; Harbor still builds), any other name is left to Harbor and akbench builds.
    let image = match (image, &build) {
        (None, None) => {
            return Err(err(
                s,
                "image",
                "is missing",
                "name the service's image pinned by digest (`image: REGISTRY/REPOSITORY@sha256:...`), or build it from a folder of environment/ (`build: ./SERVICE`, then `akbench image build TASK --push REGISTRY`)",
            ))
        }
        (Some(v), None) => Some(pinned_image(name, &v)?),
        (Some(v), Some(_)) => ImageRef::parse(&string(name, "image", &v)?)
            .ok()
            .filter(|r| r.digest.is_some()),
        (None, Some(_)) => None,
    };
    let build = build.filter(|_| image.is_none());
    Ok(Service {
        name: name.to_string(),
        image,
        build,
        entrypoint,
        command,
        environment: environment_,
        working_dir,
        user,
        depends_on: depends,
        healthcheck: health,
    })
}

/// The keys both `main` and the sidecars accept as no-ops, and the refusal of every other.
fn no_op(name: &str, key: &str, v: &Value) -> Result<(), WorldError> {
    let s = Some(name);
    match key {
        "expose" | "ports" | "labels" | "pull_policy" => Ok(()),
        "container_name" | "hostname" => match v.as_str() {
            Some(n) if n == name => Ok(()),
            _ => Err(err(s, key, format!("is `{}`, not the service's name (akbench names each service by its compose name only)", elide(&scalar(name, key, v).unwrap_or_default())), "remove it; the others reach the service by its name")),
        },
        "restart" => match v.as_str() {
            Some("no") => Ok(()),
            _ => Err(err(s, key, "cannot take effect (a service runs once, for the trial; it is not restarted)", "remove it, or write `restart: \"no\"`")),
        },
        "init" => match v {
            Value::Bool(false) => Ok(()),
            _ => Err(err(s, key, "cannot take effect (akbench runs no init process in a service; its command is the first process)", "remove it, or make the image's entrypoint reap its children (e.g. `tini`)")),
        },
        _ => Err(refused(name, key)),
    }
}

/// The compose keys refused by name, each group with why it cannot take effect and the fix
/// (docs/tasks.md, "Sidecar services", lists every one).
pub const REFUSED: &[(&[&str], &str, &str)] = &[
    (
        &["volumes", "tmpfs"],
        "cannot take effect (akbench gives each service its own file system)",
        "copy what the service needs into its image",
    ),
    (
        &[
            "networks",
            "network_mode",
            "links",
            "external_links",
            "extra_hosts",
            "dns",
            "dns_search",
            "dns_opt",
            "mac_address",
            "domainname",
        ],
        "cannot take effect (every service is on one private network of the trial and reaches the others by their names)",
        "remove it; reach a service by its compose name",
    ),
    (
        &[
            "privileged",
            "cap_add",
            "cap_drop",
            "devices",
            "security_opt",
            "pid",
            "ipc",
            "userns_mode",
            "cgroup",
            "cgroup_parent",
            "sysctls",
            "ulimits",
            "runtime",
            "isolation",
        ],
        "cannot take effect (akbench runs every service unprivileged in its own namespaces)",
        "remove it; a world that needs it runs with Harbor only",
    ),
    (
        &[
            "deploy",
            "cpus",
            "cpu_count",
            "cpu_shares",
            "cpu_quota",
            "cpuset",
            "mem_limit",
            "memswap_limit",
            "mem_reservation",
            "shm_size",
            "oom_score_adj",
            "pids_limit",
            "storage_opt",
            "blkio_config",
        ],
        "cannot take effect (each service runs with the task's own limits, `[environment] cpus` and `memory_mb`)",
        "remove it; ask for the trial's resources with `[environment] cpus` / `memory_mb` in task.toml",
    ),
    (
        &["env_file"],
        "cannot take effect (akbench reads no file besides the compose file)",
        "write the variables in `environment:`",
    ),
    (
        &["secrets", "configs"],
        "cannot take effect (akbench mounts no file into a service)",
        "put the file in the service's image",
    ),
    (
        &["profiles"],
        "cannot take effect (every service of the file runs)",
        "remove it, and the services that should not run",
    ),
];

fn refused(name: &str, key: &str) -> WorldError {
    match REFUSED.iter().find(|(keys, _, _)| keys.contains(&key)) {
        Some((_, why, fix)) => err(Some(name), key, *why, *fix),
        None => err(
            Some(name),
            key,
            "is not a key akbench runs a service with",
            SEE_DOCS,
        ),
    }
}

fn main(m: &Mapping, world: &mut World) -> Result<(), WorldError> {
    let s = Some(MAIN);
    for (k, raw) in m {
        let key = key_str(s, k)?;
        if key.starts_with("x-") {
            continue;
        }
        let v = interpolated(MAIN, key, raw)?;
        let harbor_default = match key {
            "build" => {
                matches!(v.as_str(), Some("." | "./"))
                    || v.as_mapping().is_some_and(|b| {
                        b.len() == 1
                            && matches!(b.get("context").and_then(Value::as_str), Some("." | "./"))
                    })
            }
            "command" => argv(MAIN, key, &v)?.is_some_and(|a| a == ["sh", "-c", "sleep infinity"]),
            _ => false,
        };
        if harbor_default {
            continue;
        }
        let refuse = |why: &str, fix: &str| Err(err(s, key, why, fix));
        match key {
            "depends_on" => world.main_depends_on = depends_on(MAIN, &v)?,
            "environment" => world.main_environment = environment(MAIN, &v)?,
            "build" | "image" => return refuse("would change the task's image (main is the task's environment, made from its image)", "remove it; name the image in task.toml (`[environment] docker_image`) or build it from environment/Dockerfile"),
            "command" | "entrypoint" => return refuse("would change what main runs (akbench keeps main alive its own way and runs the agent in it)", "remove it; start the program the agent needs from a sidecar, or from the image"),
            "healthcheck" => return refuse("is main's healthcheck, which task.toml declares", "move it to `[environment] healthcheck` in task.toml"),
            "working_dir" => return refuse("is main's working folder, which task.toml declares", "move it to `[environment] workdir` in task.toml"),
            "user" => return refuse("is who runs in main, which task.toml declares", "move it to `[agent] user` / `[verifier] user` in task.toml"),
            _ => no_op(MAIN, key, &v)?,
        }
    }
    Ok(())
}

fn pinned_image(name: &str, v: &Value) -> Result<ImageRef, WorldError> {
    let text = string(name, "image", v)?;
    let r = ImageRef::parse(&text).map_err(|e| {
        err(
            Some(name),
            "image",
            e.to_string(),
            "write `REGISTRY/REPOSITORY@sha256:<64 hex>`",
        )
    })?;
    if r.digest.is_none() {
        return Err(err(
            Some(name),
            "image",
            format!("`{}` is not pinned by digest (a tag can name other content later)", elide(&text)),
            format!("pin it by digest, as Harbor's lint asks: `image: {}@sha256:...` (`docker buildx imagetools inspect {}` prints it)", elide(&text), elide(&text)),
        ));
    }
    Ok(r)
}

pub(super) fn string(name: &str, key: &str, v: &Value) -> Result<String, WorldError> {
    v.as_str().map(str::to_string).ok_or_else(|| {
        err(
            Some(name),
            key,
            format!("is {}, not a string", kind(v)),
            "write a string",
        )
    })
}

/// A string, number or boolean as compose turns it into text.
pub(super) fn scalar(name: &str, key: &str, v: &Value) -> Result<String, WorldError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(err(
            Some(name),
            key,
            format!("is {}, not a string or number", kind(other)),
            "write a string",
        )),
    }
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// `entrypoint` / `command`: a list, or a string split as compose splits it; null: unset.
fn argv(name: &str, key: &str, v: &Value) -> Result<Option<Vec<String>>, WorldError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => split_words(s).map(Some).map_err(|e| {
            err(
                Some(name),
                key,
                format!("`{}` {e}", elide(s)),
                "write it as a list, e.g. `[\"sh\", \"-c\", \"a && b\"]`",
            )
        }),
        Value::Sequence(items) => items
            .iter()
            .map(|x| scalar(name, key, x))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        other => Err(err(
            Some(name),
            key,
            format!("is {}, not a string or a list", kind(other)),
            "write a list of strings",
        )),
    }
}

fn environment(name: &str, v: &Value) -> Result<BTreeMap<String, String>, WorldError> {
    let key = "environment";
    let unset = |var: &str| {
        err(
            Some(name),
            key,
            format!("`{}` has no value (compose takes it from the shell that runs it; akbench has none)", elide(var)),
            format!("write its value: `{}=...`", elide(var)),
        )
    };
    let check = |var: &str| {
        if var.is_empty() || var.contains(['=', '\0']) || var.chars().any(char::is_whitespace) {
            Err(err(
                Some(name),
                key,
                format!("`{}` is not a variable name", elide(var)),
                "name variables with letters, digits and `_`",
            ))
        } else {
            Ok(())
        }
    };
    let mut out = BTreeMap::new();
    match v {
        Value::Null => {}
        Value::Sequence(items) => {
            for item in items {
                let text = string(name, key, item)?;
                let Some((k, val)) = text.split_once('=') else {
                    return Err(unset(&text));
                };
                check(k)?;
                out.insert(k.to_string(), val.to_string());
            }
        }
        Value::Mapping(m) => {
            for (k, val) in m {
                let k = scalar(name, key, k)?;
                check(&k)?;
                if val.is_null() {
                    return Err(unset(&k));
                }
                out.insert(k.clone(), scalar(name, &format!("{key}.{k}"), val)?);
            }
        }
        other => {
            return Err(err(
                Some(name),
                key,
                format!("is {}, not a list or a mapping", kind(other)),
                "write a list of `KEY=VALUE` or a mapping",
            ))
        }
    }
    Ok(out)
}

/// The rules between services: `depends_on` names services of the file (never `main`,
/// which starts after every sidecar), without a cycle; `service_healthy` waits for a
/// service with a healthcheck.
fn checks(world: &World) -> Result<(), WorldError> {
    let owners = world
        .services
        .iter()
        .map(|s| (s.name.as_str(), &s.depends_on))
        .chain(std::iter::once((MAIN, &world.main_depends_on)));
    for (owner, deps) in owners {
        for d in deps {
            if d.service == MAIN {
                return Err(err(
                    Some(owner),
                    "depends_on",
                    "names `main`, which starts after every sidecar (it is the task's environment)",
                    "remove `main` from its `depends_on`",
                ));
            }
            if d.condition == Condition::ServiceHealthy {
                if let Some(target) = world
                    .service(&d.service)
                    .filter(|t| t.healthcheck.is_none())
                {
                    return Err(err(Some(owner), "depends_on", format!("waits for `{}` to be healthy, but it has no healthcheck (akbench does not read the image's)", target.name), format!("give `{}` a `healthcheck:` with a `test`, or wait for `service_started`", target.name)));
                }
            }
        }
    }
    world.start_order().map(|_| ()).map_err(|e| {
        err(
            None,
            "depends_on",
            e,
            "name services of the file, without a cycle",
        )
    })
}
