//! Symlinks in a task directory: a link whose target leaves the directory is refused at load,
//! so every byte a task release uses is inside the directory its digest covers.

use std::path::{Component, Path};

/// True when the link at `rel` (a path relative to the task directory) with target `target`
/// points outside the task directory. Absolute targets always leave; relative ones are
/// resolved lexically from the link's folder (links to links are checked on their own).
pub fn link_leaves(rel: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return true;
    }
    let mut depth: usize = rel
        .parent()
        .map(|p| {
            p.components()
                .filter(|c| matches!(c, Component::Normal(_)))
                .count()
        })
        .unwrap_or(0);
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return true,
            },
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

/// The first symlink under `dir` (`.git` folders skipped) whose target leaves it, as
/// (link path, target).
pub fn first_escaping_link(dir: &Path) -> Result<Option<(std::path::PathBuf, String)>, String> {
    walk(dir, dir)
}

fn walk(root: &Path, dir: &Path) -> Result<Option<(std::path::PathBuf, String)>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut entries: Vec<_> = rd
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if entry.file_name() == ".git" {
            continue;
        }
        let p = entry.path();
        let ft = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", p.display()))?;
        if ft.is_symlink() {
            let target = std::fs::read_link(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let rel = p.strip_prefix(root).unwrap_or(&p);
            if link_leaves(rel, &target) {
                return Ok(Some((p.clone(), target.display().to_string())));
            }
        } else if ft.is_dir() {
            if let Some(found) = walk(root, &p)? {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_leave_the_task_directory() {
        let cases: &[(&str, &str, bool)] = &[
            ("tests/x", "/etc/passwd", true),
            ("tests/x", "../../outside", true),
            ("x", "../sibling-task/solution", true),
            ("tests/a/b", "../../../x", true),
            ("tests/x", "../solution/solve.sh", false),
            ("tests/x", "./helper.sh", false),
            ("x", "tests/test.sh", false),
            ("tests/a/b", "../../task.toml", false),
            ("tests/x", "a/../../solution", false),
            ("tests/x", "a/../../../up", true),
        ];
        for (rel, target, leaves) in cases {
            assert_eq!(
                link_leaves(Path::new(rel), Path::new(target)),
                *leaves,
                "{rel} -> {target}"
            );
        }
    }
}
