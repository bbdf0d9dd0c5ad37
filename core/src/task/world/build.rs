//! A sidecar's `build:` as Harbor's compose files write it (`build: ./kv`, or a mapping
//! with `context` and `dockerfile`): read into a [`Build`] whose paths stay inside the
//! task's `environment/` folder (checked here by their text; that the folders exist and no
//! link leaves the folder is checked when the task loads). Every other build key is
//! refused by name: `akbench image build` builds a context with its Dockerfile only.

use super::parse::{err, key_str, kind, string, WorldError};
use super::Build;
use crate::limits::elide;
use serde_norway::Value;

/// The build keys refused, each group with why and the fix (docs/tasks.md, "Sidecar
/// services").
pub const BUILD_KEYS_REFUSED: &[(&[&str], &str)] = &[
    (
        &["args"],
        "write each value as its `ARG`'s default in the Dockerfile",
    ),
    (
        &["target"],
        "make the stage the service runs the Dockerfile's last one",
    ),
    (
        &["dockerfile_inline"],
        "write the Dockerfile as a file in the context and name it with `dockerfile:`",
    ),
    (
        &[
            "additional_contexts",
            "cache_from",
            "cache_to",
            "extra_hosts",
            "isolation",
            "labels",
            "network",
            "no_cache",
            "platforms",
            "privileged",
            "pull",
            "secrets",
            "shm_size",
            "ssh",
            "tags",
            "ulimits",
            "entitlements",
        ],
        "remove it; what the image needs goes into its context and Dockerfile",
    ),
];

/// `build:` of sidecar `name`.
pub(super) fn build(name: &str, v: &Value) -> Result<Build, WorldError> {
    let s = Some(name);
    let (context, dockerfile) = match v {
        Value::String(c) => (c.clone(), None),
        Value::Mapping(m) => {
            let (mut context, mut dockerfile) = (None, None);
            for (k, x) in m {
                let key = key_str(s, k)?;
                match key {
                    "context" => context = Some(string(name, "build.context", x)?),
                    "dockerfile" => dockerfile = Some(string(name, "build.dockerfile", x)?),
                    k if k.starts_with("x-") => {}
                    other => {
                        let fix = BUILD_KEYS_REFUSED
                            .iter()
                            .find(|(keys, _)| keys.contains(&other))
                            .map_or("remove it", |(_, fix)| fix);
                        return Err(err(
                            s,
                            &format!("build.{}", elide(other)),
                            "cannot take effect (`akbench image build` builds a service from its context and Dockerfile only)",
                            fix,
                        ));
                    }
                }
            }
            let Some(context) = context else {
                return Err(err(
                    s,
                    "build.context",
                    "is missing",
                    "name the service's folder under environment/: `context: ./SERVICE`",
                ));
            };
            (context, dockerfile)
        }
        other => {
            return Err(err(
                s,
                "build",
                format!("is {}, not a folder or a mapping", kind(other)),
                "write `build: ./SERVICE` (a folder of environment/ with its Dockerfile)",
            ))
        }
    };
    let context = inside(name, "build.context", ".", &context)?;
    let dockerfile = inside(
        name,
        "build.dockerfile",
        &context,
        dockerfile.as_deref().unwrap_or("Dockerfile"),
    )?;
    Ok(Build {
        context,
        dockerfile,
    })
}

/// `path` (relative to `base`, itself relative to environment/) as a normalised path
/// relative to environment/ (`.` for the folder itself); refused when absolute, a URL (a
/// remote context), or leaving environment/.
fn inside(name: &str, key: &str, base: &str, path: &str) -> Result<String, WorldError> {
    let fix = "name a folder (or file) inside the task's environment/ folder, relative to it: `./SERVICE`";
    if path.is_empty() || path.chars().any(char::is_control) {
        return Err(err(
            Some(name),
            key,
            "is empty or holds a control character",
            fix,
        ));
    }
    if path.contains("://") || path.starts_with("git@") {
        return Err(err(
            Some(name),
            key,
            format!("`{}` is a remote context (a repository or URL); akbench builds from the task's own files, which its release digest covers", elide(path)),
            fix,
        ));
    }
    if path.starts_with('/') {
        return Err(err(
            Some(name),
            key,
            format!("`{}` is an absolute path, outside the task", elide(path)),
            fix,
        ));
    }
    let mut parts: Vec<&str> = base
        .split('/')
        .filter(|p| *p != "." && !p.is_empty())
        .collect();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(err(
                        Some(name),
                        key,
                        format!("`{}` leaves the task's environment/ folder (the task's release digest covers only the task's files)", elide(path)),
                        fix,
                    ));
                }
            }
            p => parts.push(p),
        }
    }
    Ok(if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    })
}
