//! Path helpers with no domain in them: a path made absolute without resolving links, and a
//! relative path joined under a base only when it stays inside it. A leaf layer: it imports
//! nothing from the crate (`task` re-exports both under their old paths).

use std::path::{Path, PathBuf};

/// Makes `p` absolute against the current directory without resolving symlinks.
pub fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// Joins a relative path under `base`, refusing absolute paths and `..` components.
pub fn inside(base: &Path, rel: &str) -> Option<PathBuf> {
    let r = Path::new(rel);
    if r.is_absolute()
        || r.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return None;
    }
    Some(base.join(r))
}
