//! `[environment]` of `task.toml`: the image a task runs in under the `container` runtime;
//! and every field of Harbor's sections that akbench keeps as written (`[environment]`,
//! `[solution]`, `[verifier] environment_mode`): each takes effect or is refused when the
//! task loads, never silently ignored ([`HARBOR_FIELDS`], the table in docs/tasks.md).

use super::{TaskError, TASK_FILE};
use crate::image::ImageRef;
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// What akbench does with a field of Harbor's `task.toml` that it keeps as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// The field takes effect: how.
    Applied(&'static str),
    /// The field is refused when the task loads: the fix the error names.
    Refused(&'static str),
}

/// Every field of `[environment]`, `[solution]` and `[verifier] environment_mode` (Harbor
/// 0.25's task configuration) and what akbench does with it. Any other key of
/// `[environment]` or `[solution]` is refused as unknown.
pub const HARBOR_FIELDS: &[(&str, Handling)] = &[
    (
        "environment.image",
        Handling::Applied("the OCI image the task runs in under `runtime: container`; a tag is pinned to its digest when a run is planned"),
    ),
    (
        "environment.docker_image",
        Handling::Applied("Harbor's name of `environment.image`, read the same way (a task sets one of the two)"),
    ),
    (
        "environment.workdir",
        Handling::Applied("where the workspace is inside the image, and where the agent, the solution and the tests start"),
    ),
    (
        "environment.os",
        Handling::Applied("`linux` only (images are resolved for `linux/<arch>`); any other value is refused"),
    ),
    (
        "environment.build_timeout_sec",
        Handling::Applied("the time limit of `akbench image build` (0.001 to 604800 s)"),
    ),
    (
        "environment.cpus",
        Handling::Applied("a requirement (a whole number, at least 1): a run whose `compute.cpus` is lower is refused when it is planned; a run that gives at least that many records it in the plan"),
    ),
    (
        "environment.memory_mb",
        Handling::Applied("a requirement in MiB, as `cpus`, against the run's `compute.memory_mb`"),
    ),
    (
        "environment.storage_mb",
        Handling::Applied("a requirement in MiB, as `cpus`, against the disk limit of an attempt (4096 MiB, `disk_mb` in docs/agents.md); also the disk limit of each grading run of the task (what it may add to its workspace and every other writable place)"),
    ),
    (
        "environment.gpus",
        Handling::Refused("remove it: akbench schedules no GPUs; run GPU tasks with Harbor"),
    ),
    (
        "environment.gpu_types",
        Handling::Refused("remove it: akbench schedules no GPUs; run GPU tasks with Harbor"),
    ),
    (
        "environment.env",
        Handling::Refused("move what the tests need to `[verifier] env`; the agent's environment comes from its descriptor and the image's `Env`"),
    ),
    (
        "environment.healthcheck",
        Handling::Applied("Docker's semantics (`command`, `interval_sec`, `timeout_sec`, `start_period_sec`, `start_interval_sec`, `retries`; Harbor's defaults): under `container` the task's environment is started before the agent (with the image's ENTRYPOINT) and the command polled in it; a failing healthcheck is `infrastructure_error`"),
    ),
    (
        "environment.network_mode",
        Handling::Refused("remove it: the agent reaches only the endpoints its descriptor lists (`network`), grading reaches none"),
    ),
    (
        "environment.allowed_hosts",
        Handling::Refused("remove it: list the endpoints in the agent descriptor's `network` (host:port)"),
    ),
    (
        "solution.env",
        Handling::Applied("the environment `solution/solve.sh` gets (a table of names to strings, taken as written: `${...}` is refused), over AKBENCH_SOLUTION_DIR, AKBENCH_WORKSPACE and AKBENCH_TASK_ID; under `container` the solution is also at `/solution`"),
    ),
    (
        "verifier.environment_mode",
        Handling::Applied("`separate` (the default here: every grading run is a fresh sandbox, over a fresh view of the image under `container`) or `shared` (under `container`: grading runs in the environment the agent left, its file-system changes and its processes; docs/container.md)"),
    ),
];

/// How akbench handles the Harbor field `field` (`section.key`), when it knows it.
pub fn handling(field: &str) -> Option<Handling> {
    HARBOR_FIELDS
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, h)| *h)
}

/// Refuses the fields of `[environment]` and `[solution]` that do not take effect (and
/// unknown ones), and checks the values of those that do but are not read elsewhere.
pub(super) fn check_fields(
    toml_path: &Path,
    sections: &[(&str, &BTreeMap<String, toml::Value>)],
    environment_mode: Option<&str>,
) -> Result<(), TaskError> {
    for (section, map) in sections {
        for (key, value) in *map {
            let field = format!("{section}.{key}");
            match handling(&field) {
                None => {
                    return Err(TaskError::field(
                        toml_path,
                        &field,
                        "is not a field akbench knows",
                        format!(
                            "remove it (the fields of [{section}] are listed in docs/tasks.md, \"Harbor fields\")"
                        ),
                    ))
                }
                Some(Handling::Refused(fix)) => {
                    return Err(TaskError::field(
                        toml_path,
                        &field,
                        "does not take effect in akbench",
                        fix,
                    ))
                }
                Some(Handling::Applied(_)) => check_value(toml_path, &field, value)?,
            }
        }
    }
    match environment_mode {
        None | Some("separate") | Some("shared") => Ok(()),
        Some(other) => Err(TaskError::field(
            toml_path,
            "verifier.environment_mode",
            format!(
                "`{}` is not an environment mode",
                crate::limits::elide(other)
            ),
            "set `separate` (a fresh sandbox) or `shared` (the agent's environment), or remove it",
        )),
    }
}

fn check_value(toml_path: &Path, field: &str, value: &toml::Value) -> Result<(), TaskError> {
    match (field, value) {
        ("environment.healthcheck", v) => crate::healthcheck::parse(v).map(|_| ()).map_err(|why| {
            TaskError::field(
                toml_path,
                field,
                why,
                "give a table with `command` (a shell command, exit 0 when healthy) and optionally `interval_sec`, `timeout_sec`, `start_period_sec`, `start_interval_sec`, `retries`",
            )
        }),
        ("environment.os", toml::Value::String(s)) if s == "linux" => Ok(()),
        ("environment.os", other) => Err(TaskError::field(
            toml_path,
            field,
            format!(
                "is {}, not `linux`",
                crate::limits::elide(&other.to_string())
            ),
            "set `linux` or remove it: akbench runs Linux images only",
        )),
        ("environment.build_timeout_sec", v) => {
            let secs = match v {
                toml::Value::Float(f) => *f,
                toml::Value::Integer(i) => *i as f64,
                other => {
                    return Err(TaskError::field(
                        toml_path,
                        field,
                        format!("is a {}, not a number", other.type_str()),
                        "give a number of seconds such as 600.0",
                    ))
                }
            };
            crate::ranges::BUILD_TIMEOUT_SEC
                .real(secs)
                .map(|_| ())
                .map_err(|why| {
                    TaskError::field(
                        toml_path,
                        field,
                        why.to_string(),
                        "give 1 to 604800 seconds, or drop it for the default (600)",
                    )
                })
        }
        ("solution.env", v) => solution_env(toml_path, v).map(|_| ()),
        ("environment.cpus" | "environment.memory_mb" | "environment.storage_mb", v) => match v {
            toml::Value::Integer(i) if *i >= 1 => Ok(()),
            other => Err(TaskError::field(
                toml_path,
                field,
                format!(
                    "is {}, not a whole number of at least 1",
                    crate::limits::elide(&other.to_string())
                ),
                "write a whole number such as 2, or remove it",
            )),
        },
        _ => Ok(()),
    }
}

/// `[solution] env`: environment-variable names to string values, taken as written (a
/// `${...}` that Harbor would expand from the host is refused, not passed on unexpanded).
pub(super) fn solution_env(
    toml_path: &Path,
    value: &toml::Value,
) -> Result<BTreeMap<String, String>, TaskError> {
    let field = "solution.env";
    let toml::Value::Table(t) = value else {
        return Err(TaskError::field(
            toml_path,
            field,
            format!("is a {}, not a table", value.type_str()),
            "write `[solution.env]` with `NAME = \"value\"` lines",
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in t {
        if !crate::agent::is_env_name(k) {
            return Err(TaskError::field(
                toml_path,
                field,
                format!(
                    "`{}` is not an environment-variable name",
                    crate::limits::elide(k)
                ),
                "use names of letters, digits and `_`, not starting with a digit",
            ));
        }
        let toml::Value::String(s) = v else {
            return Err(TaskError::field(
                toml_path,
                field,
                format!("`{k}` is a {}, not a string", v.type_str()),
                "quote the value",
            ));
        };
        if s.contains("${") {
            return Err(TaskError::field(
                toml_path,
                field,
                format!(
                    "`{k}` = `{}` asks for a value from the host (`${{...}}`), which akbench does not expand",
                    crate::limits::elide(s)
                ),
                "write the value itself into task.toml",
            ));
        }
        out.insert(k.clone(), s.clone());
    }
    Ok(out)
}

/// `environment.cpus`, `memory_mb` and `storage_mb` (checked by [`check_fields`]).
pub(super) fn requirements(
    env: &BTreeMap<String, toml::Value>,
) -> super::requirements::Requirements {
    let get = |k: &str| match env.get(k) {
        Some(toml::Value::Integer(i)) if *i >= 1 => Some(*i as u64),
        _ => None,
    };
    super::requirements::Requirements {
        cpus: get("cpus"),
        memory_mb: get("memory_mb"),
        storage_mb: get("storage_mb"),
    }
}

/// The time limit of building the task's image: `environment.build_timeout_sec`, checked.
pub fn build_timeout_sec(env: &BTreeMap<String, toml::Value>) -> Option<f64> {
    match env.get("build_timeout_sec")? {
        toml::Value::Float(f) => Some(*f),
        toml::Value::Integer(i) => Some(*i as f64),
        _ => None,
    }
}

/// `environment.image` (or Harbor's `environment.docker_image`) and `environment.workdir`,
/// checked.
pub(super) fn image(
    toml_path: &Path,
    env: &BTreeMap<String, toml::Value>,
) -> Result<(Option<ImageRef>, Option<String>), TaskError> {
    debug_assert!(toml_path.ends_with(TASK_FILE));
    let (key, written) = match (env.get("image"), env.get("docker_image")) {
        (Some(_), Some(_)) => {
            return Err(TaskError::field(
                toml_path,
                "environment.docker_image",
                "is set beside `environment.image`",
                "keep one of the two (`docker_image` is Harbor's name of `image`)",
            ))
        }
        (Some(v), None) => ("environment.image", Some(v)),
        (None, Some(v)) => ("environment.docker_image", Some(v)),
        (None, None) => ("environment.image", None),
    };
    let image = match written {
        None => None,
        Some(toml::Value::String(s)) => Some(ImageRef::parse(s).map_err(|e| {
            TaskError::field(
                toml_path,
                key,
                e.to_string(),
                "write an OCI reference such as `registry.example:5000/team/image:tag` or `...@sha256:<64 hex>`",
            )
        })?),
        Some(other) => {
            return Err(TaskError::field(
                toml_path,
                key,
                format!("is a {}, not a string", other.type_str()),
                "write the image reference as a string",
            ))
        }
    };
    let workdir = match env.get("workdir") {
        None => None,
        Some(toml::Value::String(s)) => {
            workdir_names(toml_path, s)?;
            let p = Path::new(s);
            let clean = p.is_absolute()
                && p.components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
                && p.components().count() > 1
                && !s.contains(':');
            if !clean {
                return Err(TaskError::field(
                    toml_path,
                    "environment.workdir",
                    format!(
                        "`{}` is not an absolute folder below `/` without `.` or `..`",
                        crate::limits::elide(s)
                    ),
                    "give an absolute path such as `/app`",
                ));
            }
            Some(s.trim_end_matches('/').to_string())
        }
        Some(other) => {
            return Err(TaskError::field(
                toml_path,
                "environment.workdir",
                format!("is a {}, not a string", other.type_str()),
                "write the folder as a string such as `/app`",
            ))
        }
    };
    if workdir.is_some() && image.is_none() {
        return Err(TaskError::field(
            toml_path,
            "environment.workdir",
            "is set but `environment.image` is not",
            "name the image the task runs in, or drop `workdir`",
        ));
    }
    Ok((image, workdir))
}

/// Each folder name of `environment.workdir`: no NUL or other control byte (no file system
/// holds one), inside [`crate::ranges::WORKDIR_COMPONENT_BYTES`].
fn workdir_names(toml_path: &Path, s: &str) -> Result<(), TaskError> {
    let refuse = |problem: String| {
        TaskError::field(
            toml_path,
            "environment.workdir",
            problem,
            "give an absolute path such as `/app` whose folder names are 1 to 255 bytes of printable text",
        )
    };
    if let Some(i) = s.bytes().position(|b| b.is_ascii_control()) {
        return Err(refuse(format!(
            "`{}` holds byte 0x{:02x} at offset {i}",
            crate::limits::elide(&s.escape_debug().to_string()),
            s.as_bytes()[i]
        )));
    }
    for name in s.split('/').filter(|n| !n.is_empty()) {
        crate::ranges::WORKDIR_COMPONENT_BYTES
            .length(name)
            .map_err(|e| refuse(e.to_string()))?;
    }
    Ok(())
}
