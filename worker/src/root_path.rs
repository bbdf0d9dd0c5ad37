//! A path inside an unpacked root folder (an image's rootfs) as the image sees it: every
//! symbolic link, absolute or relative, is followed inside the root and `..` stops at the
//! root, so the answer never names a host path outside it. Used while unpacking layers
//! ([`crate::image`]), and by the checks that read files of a rootfs (the baseline's image
//! files, the runtime's trust of an image's programs).

use std::path::{Component, Path, PathBuf};

/// `rel` resolved inside `root` (symbolic links followed, clamped at the root), as a path
/// relative to `root`.
pub fn resolve(root: &Path, rel: &Path) -> Result<PathBuf, String> {
    let mut out = PathBuf::new();
    let mut hops = 0;
    let mut pending: Vec<std::ffi::OsString> = rel
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    while let Some(c) = pending.pop() {
        if c == ".." {
            out.pop();
            continue;
        }
        let candidate = out.join(&c);
        match std::fs::read_link(root.join(&candidate)) {
            Ok(target) => {
                hops += 1;
                if hops > 40 {
                    return Err("too many levels of symbolic links".into());
                }
                if target.is_absolute() {
                    out = PathBuf::new();
                }
                for t in target.components().rev() {
                    match t {
                        Component::Normal(p) => pending.push(p.to_os_string()),
                        Component::ParentDir => pending.push("..".into()),
                        _ => {}
                    }
                }
            }
            Err(_) => out = candidate,
        }
    }
    Ok(out)
}
