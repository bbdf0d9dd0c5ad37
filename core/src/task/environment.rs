//! `[environment]` of `task.toml`: the image a task runs in under the `container` runtime,
//! `[solution] env`, and the table of every field of Harbor's task configuration and what
//! akbench does with it ([`HARBOR_FIELDS`], the table in docs/tasks.md); the walk that
//! applies the table is `fields.rs`.

use super::{TaskError, TASK_FILE};
use crate::image::ImageRef;
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// What akbench does with a field of Harbor's `task.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// The field takes effect: how.
    Applied(&'static str),
    /// The field is refused when the task loads: the fix the error names.
    Refused(&'static str),
    /// Harbor itself runs nothing from the field: it is kept with the task (and shown by
    /// `akbench task check`), never silently dropped. Why it is ignored.
    Ignored(&'static str),
}

/// Every field of Harbor 0.25's task configuration (`harbor/models/task/config.py`) and
/// what akbench does with it. A key of a Harbor section that is not here is one Harbor
/// ignores too (its models accept and drop unknown keys): it is kept as ignored
/// ([`UNKNOWN_KEY`]). Some fields depend on their value (`gpus = 0` takes effect, `gpus =
/// 1` is refused): the row says both.
pub const HARBOR_FIELDS: &[(&str, Handling)] = &[
    (
        "schema_version",
        Handling::Applied("Harbor's task format: 1.0 to 1.4 are read as Harbor 0.25 reads them; another is refused"),
    ),
    (
        "version",
        Handling::Applied("the task's version (the release's), unless `[task] version` is set; Harbor reads it as the legacy name of `schema_version`"),
    ),
    (
        "source",
        Handling::Ignored("Harbor's note (a string) of where the task came from; akbench's `[source]` table pins a repository instead"),
    ),
    (
        "multi_step_reward_strategy",
        Handling::Applied("the trial's reward from its steps' (`mean`, the default, or `final`); ignored without `[[steps]]`, as in Harbor"),
    ),
    (
        "steps",
        Handling::Applied("a finite lifecycle (family `lifecycle`): each step is loaded and checked, each of its keys applied, refused naming it, or kept as ignored; its steps run in order in one environment under the container runtime (docs/tasks.md, \"Multi-step tasks\")"),
    ),
    (
        "artifacts",
        Handling::Applied("paths kept after the attempt: one in the working folder (its diff is always kept) or /logs/artifacts (collected after every attempt); another path, or a `service`, is refused (fix: write the file under /logs/artifacts)"),
    ),
    (
        "task.name",
        Handling::Applied("the task's Harbor name (`org/name`), kept with the task and shown by `task check`; the task's id stays its folder name"),
    ),
    (
        "task.version",
        Handling::Applied("the task's version (the release's), over the top-level `version`"),
    ),
    (
        "task.description",
        Handling::Ignored("registry information: kept with the task, runs nothing"),
    ),
    (
        "task.authors",
        Handling::Ignored("registry information: kept with the task, runs nothing"),
    ),
    (
        "task.keywords",
        Handling::Ignored("registry information: kept with the task, runs nothing"),
    ),
    (
        "metadata",
        Handling::Ignored("free-form: recorded in the plan (`metadata`), runs nothing"),
    ),
    (
        "agent.timeout_sec",
        Handling::Applied("the agent's time limit"),
    ),
    (
        "agent.user",
        Handling::Applied("who the agent and the reference solution run as in the task's image (a name or uid of the image's /etc/passwd, `name:group`, `uid:gid`); another user than the image's `USER` only in the agent's environment (the default grading of a task in Harbor's layout), where it owns the workspace, its home, /logs/agent and /logs/artifacts and nothing else; refused for an attempt graded in a fresh container"),
    ),
    (
        "agent.network_mode",
        Handling::Applied("the agent phase's network (`public`, `no-network`, `allowlist`), over `[environment]`'s; applied by the worker's egress proxy"),
    ),
    (
        "agent.allowed_hosts",
        Handling::Applied("the hosts the agent may reach with `network_mode = \"allowlist\"` (Harbor's normalisation)"),
    ),
    (
        "verifier.timeout_sec",
        Handling::Applied("each grading run's time limit"),
    ),
    (
        "verifier.env",
        Handling::Applied("extra environment of each grading run (names to strings)"),
    ),
    (
        "verifier.user",
        Handling::Applied("who grading runs as in the task's image (as `agent.user`); another user than the image's `USER` only in the agent's environment, where it owns /logs/verifier and its home; refused for an attempt graded in a fresh container"),
    ),
    (
        "verifier.network_mode",
        Handling::Applied("the grading runs' network, over `[verifier.environment]`'s and `[environment]`'s; applied by the worker's egress proxy"),
    ),
    (
        "verifier.allowed_hosts",
        Handling::Applied("the hosts grading may reach with `network_mode = \"allowlist\"`"),
    ),
    (
        "verifier.collect",
        Handling::Applied("an empty list only; a collect hook is refused (fix: snapshot the state from tests/test.sh, which runs after the agent, or remove it)"),
    ),
    (
        "verifier.environment",
        Handling::Applied("the separate verifier environment: its `network_mode`, `allowed_hosts` and `allow_internet` set the grading runs' network (Harbor's default `public` when the table is there); any other key takes effect when it equals `[environment]`'s, and is refused otherwise (grading runs in the task's own image with its resources)"),
    ),
    (
        "environment.image",
        Handling::Applied("the OCI image the task runs in under `runtime: container`; a tag is pinned to its digest when a run is planned"),
    ),
    (
        "environment.docker_image",
        Handling::Applied("Harbor's name of `environment.image`, read the same way (a task sets one of the two); it wins over environment/Dockerfile, as in Harbor"),
    ),
    (
        "environment.workdir",
        Handling::Applied("where the workspace is inside the image, and where the agent, the solution and the tests start"),
    ),
    (
        "environment.os",
        Handling::Applied("`linux` only, any case (images are resolved for `linux/<arch>`); `windows` is refused"),
    ),
    (
        "environment.build_timeout_sec",
        Handling::Applied("the time limit of `akbench image build` (1 to 604800 s)"),
    ),
    (
        "environment.cpus",
        Handling::Applied("a requirement (a number above 0; a fraction counts as the next whole CPU): a run whose `compute.cpus` is lower is refused when it is planned; a run that gives at least that many records it in the plan"),
    ),
    (
        "environment.memory_mb",
        Handling::Applied("a requirement in MiB, as `cpus`, against the run's `compute.memory_mb`"),
    ),
    (
        "environment.memory",
        Handling::Applied("Harbor's legacy `memory_mb` as a size (`\"2G\"`, `\"512M\"`, `\"1024K\"`), converted as Harbor converts it; a value that is not a string is ignored, as in Harbor"),
    ),
    (
        "environment.storage_mb",
        Handling::Applied("the disk limit of every attempt and grading run of the task in MiB, any size (what it may add to its workspace and every other writable place); else 4096 MiB"),
    ),
    (
        "environment.storage",
        Handling::Applied("Harbor's legacy `storage_mb` as a size (`\"10G\"`), converted as Harbor converts it"),
    ),
    (
        "environment.gpus",
        Handling::Applied("`0` only (no GPU, which is what akbench gives); more is refused: akbench schedules no GPUs, run GPU tasks with Harbor"),
    ),
    (
        "environment.gpu_types",
        Handling::Ignored("no GPU is given (`gpus` is 0 or unset), so no type applies"),
    ),
    (
        "environment.tpu",
        Handling::Refused("remove it: akbench schedules no TPUs; run TPU tasks with Harbor"),
    ),
    (
        "environment.mcp_servers",
        Handling::Applied("handed to the agent as tools: claude-code's `--mcp-config`, codex's `mcp_servers`, `AKBENCH_MCP_SERVERS` for a command agent; an HTTP server is usually a sidecar service of environment/docker-compose.yaml, reached by its name; header values come from the worker's environment when the agent starts; adapters that take no MCP are refused at plan"),
    ),
    (
        "environment.service_images",
        Handling::Applied("written by `akbench image build`: the image of each sidecar service the compose file builds (`build:`), pinned by digest (`kv = \"REGISTRY/akbench/TASK-kv:VERSION@sha256:...\"`); akbench runs the service over it, and Harbor, which ignores the key, builds the service from `build:`"),
    ),
    (
        "environment.env",
        Handling::Applied("the environment of every process of the task in its image (agent, solution, tests): a literal value as written; `${VAR}` and `${VAR:-default}` kept as named references, resolved from the worker's environment when an attempt starts (never stored)"),
    ),
    (
        "environment.skills_dir",
        Handling::Applied("an absolute folder in the image, given to the agent as `AKBENCH_SKILLS_DIR` (Harbor's agents copy it into their skills folder; akbench's adapters leave that to the agent)"),
    ),
    (
        "environment.healthcheck",
        Handling::Applied("Docker's semantics (`command`, `interval_sec`, `timeout_sec`, `start_period_sec`, `start_interval_sec`, `retries`; Harbor's defaults): under `container` the task's environment is started before the agent (with the image's ENTRYPOINT) and the command polled in it; a failing healthcheck is `infrastructure_error`"),
    ),
    (
        "environment.network_mode",
        Handling::Applied("every phase's network (`public`, Harbor's default, `no-network`, `allowlist`) unless `[agent]` or `[verifier]` sets its own; applied by the worker's egress proxy"),
    ),
    (
        "environment.allowed_hosts",
        Handling::Applied("the hosts reachable with `network_mode = \"allowlist\"` (hostnames, `*.` suffixes, addresses, CIDR ranges, normalised as Harbor does)"),
    ),
    (
        "environment.allow_internet",
        Handling::Applied("deprecated: `true` is `network_mode = \"public\"`, `false` is `\"no-network\"`; kept as ignored when `network_mode` or `allowed_hosts` is set, as in Harbor"),
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

/// Why a key no row of [`HARBOR_FIELDS`] names is kept as ignored.
pub const UNKNOWN_KEY: &str = "not a field of Harbor 0.25's task.toml (nor akbench's): Harbor ignores it, and so does akbench; check its spelling";

/// How akbench handles the Harbor field `field` (`section.key`), when it knows it.
pub fn handling(field: &str) -> Option<Handling> {
    HARBOR_FIELDS
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, h)| *h)
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
/// `dockerfile`: the task has environment/Dockerfile, whose image `workdir` may name a
/// folder of before it is built.
pub(super) fn image(
    toml_path: &Path,
    env: &BTreeMap<String, toml::Value>,
    dockerfile: bool,
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
    if workdir.is_some() && image.is_none() && !dockerfile {
        return Err(TaskError::field(
            toml_path,
            "environment.workdir",
            "is set but `environment.image` is not (and there is no environment/Dockerfile)",
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
