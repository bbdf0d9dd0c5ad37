//! Checks a task's fields get when it loads, for values that used to pass the load and fail
//! every trial at run time (docs/tasks.md, "Refused when the task loads"): a `version` that
//! is not one line of printable text, `verifier.protected_paths` that leave the workspace, a
//! `[verifier.tripwire] file` outside `tests/`, and a local `source.repo` that is missing or
//! not a git repository or bundle. Each error names the file, the field and the fix. It also
//! reads the task's compose file into its [`World`] ([`world`]).

use super::world::World;
use super::{inside, RepoLocation, TaskError};
use crate::bounded_read::{read_text, Links};
use std::path::Path;

/// `version`: [`crate::ranges::TASK_VERSION_BYTES`] long, printable (no newline, no NUL).
pub(super) fn version(toml_path: &Path, v: &str) -> Result<(), TaskError> {
    let fix = "set one line of printable text such as `version = \"1.0\"`";
    if v.trim().is_empty() {
        return Err(TaskError::field(toml_path, "version", "is empty", fix));
    }
    crate::ranges::TASK_VERSION_BYTES
        .length(v)
        .map_err(|e| TaskError::field(toml_path, "version", e.to_string(), fix))?;
    if let Some(c) = v.chars().find(|c| c.is_control()) {
        return Err(TaskError::field(
            toml_path,
            "version",
            format!(
                "`{}` holds the control character {c:?}",
                crate::limits::elide(&v.escape_debug().to_string())
            ),
            fix,
        ));
    }
    Ok(())
}

/// `verifier.protected_paths`: each a pattern inside the workspace (relative, no `..`, no
/// control character); an absolute path or one that climbs out could never match a path of
/// the agent's diff, so the task would silently protect nothing.
pub(super) fn protected_paths(toml_path: &Path, paths: &[String]) -> Result<(), TaskError> {
    for p in paths {
        let problem = if p.trim().is_empty() {
            Some("is empty".to_string())
        } else if p.starts_with('/') {
            Some("is absolute".to_string())
        } else if p.split('/').any(|c| c == "..") {
            Some("climbs out with `..`".to_string())
        } else {
            p.chars()
                .find(|c| c.is_control())
                .map(|c| format!("holds the control character {c:?}"))
        };
        if let Some(problem) = problem {
            return Err(TaskError::field(
                toml_path,
                "verifier.protected_paths",
                format!(
                    "`{}` {problem}: a protected path is relative to the workspace",
                    crate::limits::elide(&p.escape_debug().to_string())
                ),
                "give a path inside the repository such as `tests/akbench_hidden.rs`, a name such as `conftest.py`, `dir/` or `*.ext`",
            ));
        }
    }
    Ok(())
}

/// `[verifier.tripwire] file`: a regular file inside `tests/` (as the grader reads it).
pub(super) fn tripwire_file(
    toml_path: &Path,
    tests_dir: &Path,
    file: &str,
) -> Result<(), TaskError> {
    let fix = "name a file under tests/, relative to it (e.g. `test_hidden.py`), or drop `file`";
    let field = "verifier.tripwire.file";
    let shown = crate::limits::elide(file);
    let Some(path) = inside(tests_dir, file).filter(|_| !file.trim().is_empty()) else {
        return Err(TaskError::field(
            toml_path,
            field,
            format!("`{shown}` is not inside tests/"),
            fix,
        ));
    };
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => Err(TaskError::field(
            toml_path,
            field,
            format!(
                "`{shown}` is a {}, not a regular file of tests/",
                crate::bounded_read::kind_name(&m.file_type())
            ),
            fix,
        )),
        Err(e) => Err(TaskError::field(
            toml_path,
            field,
            format!("`{shown}` is not in tests/ ({e})"),
            fix,
        )),
    }
}

/// A local `source.repo` (a path, or a `file://` URL): an existing git repository (a folder
/// with `HEAD` and `objects/`, or a work tree whose `.git` is one) or a git bundle. A remote
/// URL is not contacted at load.
pub(super) fn local_repo(
    toml_path: &Path,
    written: &str,
    repo: &RepoLocation,
) -> Result<(), TaskError> {
    let path = match repo {
        RepoLocation::Path(p) => p.clone(),
        RepoLocation::Url(u) => match u.strip_prefix("file://") {
            Some(p) => Path::new(p).to_path_buf(),
            None => return Ok(()),
        },
    };
    let refuse = |problem: String| {
        TaskError::field(
            toml_path,
            "source.repo",
            format!(
                "`{}` ({}) {problem}",
                crate::limits::elide(written),
                path.display()
            ),
            "point it at a git repository or bundle (a path is relative to the tasks root), or use an https:// or ssh:// URL",
        )
    };
    let meta = std::fs::metadata(&path).map_err(|e| refuse(format!("cannot be read: {e}")))?;
    if meta.is_dir() {
        let git_dir = |d: &Path| d.join("HEAD").is_file() && d.join("objects").is_dir();
        if git_dir(&path) || git_dir(&path.join(".git")) || path.join(".git").is_file() {
            return Ok(());
        }
        return Err(refuse(
            "is a folder but not a git repository (no HEAD and objects/, no .git)".into(),
        ));
    }
    if !meta.is_file() {
        return Err(refuse("is neither a folder nor a regular file".into()));
    }
    let head = crate::bounded_read::read_prefix(&path, 32, crate::bounded_read::Links::Follow)
        .map_err(|e| refuse(e.to_string()))?;
    if head.starts_with(b"# v2 git bundle") || head.starts_with(b"# v3 git bundle") {
        Ok(())
    } else {
        Err(refuse(
            "is a file but not a git bundle (it does not start with `# v2 git bundle` or `# v3 git bundle`)".into(),
        ))
    }
}

/// The compose file Harbor reads, and the other name, which is refused.
pub const COMPOSE_FILES: [&str; 2] = ["docker-compose.yaml", "docker-compose.yml"];

/// `environment/docker-compose.yaml`: the task's sidecar services
/// ([`crate::task::world::parse`]), read through `bounded_read`; `None` without one. A
/// `docker-compose.yml` is refused: Harbor 0.25 reads only the `.yaml` name, so Harbor
/// would run the task without its services (a verdict akbench's would not match). A
/// `build:` service's context must be a folder and its Dockerfile a file, both inside
/// environment/ once links are followed. The error names the file, the service, the key
/// and the fix.
pub(super) fn world(dir: &Path) -> Result<Option<World>, TaskError> {
    let [yaml, yml] = COMPOSE_FILES.map(|n| dir.join("environment").join(n));
    if std::fs::symlink_metadata(&yml).is_ok() {
        return Err(TaskError {
            file: yml,
            kind: super::TaskErrorKind::Io(
                "is a compose file Harbor 0.25 does not read (it reads only environment/docker-compose.yaml, and would run the task without these services); fix: rename it to docker-compose.yaml (keep one compose file)".into(),
            ),
        });
    }
    if std::fs::symlink_metadata(&yaml).is_err() {
        return Ok(None);
    }
    let file = yaml;
    let text = read_text(
        &file,
        crate::bounded_read::ReadKind::Config.cap(),
        Links::Follow,
    )
    .map_err(|e| TaskError {
        file: file.clone(),
        kind: super::TaskErrorKind::Io(format!(
            "{e}; the compose file must be a regular UTF-8 file"
        )),
    })?;
    let world = crate::task::world::parse(&text).map_err(|e| TaskError {
        file: file.clone(),
        kind: super::TaskErrorKind::Refused(e.to_string()),
    })?;
    build_paths(&dir.join("environment"), &world).map_err(|e| TaskError {
        file,
        kind: super::TaskErrorKind::Refused(e),
    })?;
    Ok(Some(world))
}

/// Each `build:` service's context is a folder and its Dockerfile a file, both inside
/// `env` once links are followed (the parse has checked their text).
fn build_paths(env: &Path, world: &World) -> Result<(), String> {
    let root = env
        .canonicalize()
        .map_err(|e| format!("{}: {e}", env.display()))?;
    for s in &world.services {
        let Some(b) = &s.build else { continue };
        for (key, rel, folder) in [
            ("build.context", &b.context, true),
            ("build.dockerfile", &b.dockerfile, false),
        ] {
            let path = env.join(rel);
            let real = path
                .canonicalize()
                .ok()
                .filter(|r| r.starts_with(&root) && if folder { r.is_dir() } else { r.is_file() });
            if real.is_none() {
                return Err(format!(
                    "service `{}`: `{key}` names environment/{rel}, which is not a {} inside environment/; fix: {}",
                    s.name,
                    if folder { "folder" } else { "file" },
                    if folder {
                        "give the service a folder of environment/ with its Dockerfile (`build: ./SERVICE`)"
                    } else {
                        "write the service's Dockerfile there, or name it with `build.dockerfile` (relative to the context)"
                    }
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "load_checks_tests.rs"]
mod tests;
