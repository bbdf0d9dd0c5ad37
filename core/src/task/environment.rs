//! `[environment]` of `task.toml`: the image a task runs in under the `container` runtime.

use super::{TaskError, TASK_FILE};
use crate::image::ImageRef;
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// `environment.image` and `environment.workdir`, checked.
pub(super) fn image(
    toml_path: &Path,
    env: &BTreeMap<String, toml::Value>,
) -> Result<(Option<ImageRef>, Option<String>), TaskError> {
    debug_assert!(toml_path.ends_with(TASK_FILE));
    let image = match env.get("image") {
        None => None,
        Some(toml::Value::String(s)) => Some(ImageRef::parse(s).map_err(|e| {
            TaskError::field(
                toml_path,
                "environment.image",
                e.to_string(),
                "write an OCI reference such as `registry.example:5000/team/image:tag` or `...@sha256:<64 hex>`",
            )
        })?),
        Some(other) => {
            return Err(TaskError::field(
                toml_path,
                "environment.image",
                format!("is a {}, not a string", other.type_str()),
                "write the image reference as a string",
            ))
        }
    };
    let workdir = match env.get("workdir") {
        None => None,
        Some(toml::Value::String(s)) => {
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
