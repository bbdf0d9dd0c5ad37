//! Applies image layers, lowest first, to a root folder: regular files, folders, symbolic
//! and hard links; whiteouts and opaque folders remove what lower layers put there; device
//! nodes, FIFOs and sockets are skipped. No entry may write outside the root: names with
//! `..` are refused, and every parent is resolved inside the root (a symbolic link in the
//! image, absolute or relative, is followed as the image sees it, never to the host).
//! Set-uid and set-gid bits are dropped. Under a root worker every entry is owned by the
//! sandbox user (the image's root is the sandbox user, never host uid 0).

use akbench_core::image::layer::{self, Action, Compression};
use std::collections::HashSet;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// Unpacks the layer in `blob` (compressed as `c`) onto `root`.
pub fn apply(
    root: &Path,
    blob: &Path,
    c: Compression,
    owner: Option<(u32, u32)>,
) -> Result<(), String> {
    let f =
        std::fs::File::open(blob).map_err(|e| format!("failed to open {}: {e}", blob.display()))?;
    let f = std::io::BufReader::with_capacity(1 << 20, f);
    let reader: Box<dyn Read> = match c {
        Compression::None => Box::new(f),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(f)),
        Compression::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(f)
                .map_err(|e| format!("failed to read the zstd layer {}: {e}", blob.display()))?,
        ),
    };
    let mut archive = tar::Archive::new(reader);
    let mut made: HashSet<PathBuf> = HashSet::new();
    let entries = archive
        .entries()
        .map_err(|e| format!("failed to read the layer {}: {e}", blob.display()))?;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| format!("failed to read the layer {}: {e}", blob.display()))?;
        let name = entry
            .path()
            .map_err(|e| format!("an entry name of {} is unreadable: {e}", blob.display()))?
            .into_owned();
        let action = layer::action(&name).map_err(|e| format!("layer {}: {e}", blob.display()))?;
        apply_entry(root, &mut entry, action, owner, &mut made)
            .map_err(|e| format!("layer {}: entry `{}`: {e}", blob.display(), name.display()))?;
    }
    Ok(())
}

fn apply_entry<R: Read>(
    root: &Path,
    entry: &mut tar::Entry<'_, R>,
    action: Action,
    owner: Option<(u32, u32)>,
    made: &mut HashSet<PathBuf>,
) -> Result<(), String> {
    let err = |e: std::io::Error| e.to_string();
    match action {
        Action::Root => Ok(()),
        Action::Remove(rel) => {
            let p = place(root, &rel)?;
            remove(&p).map_err(err)
        }
        Action::Opaque(rel) => {
            let dir = if rel.as_os_str().is_empty() {
                root.to_path_buf()
            } else {
                place(root, &rel)?
            };
            let Ok(rd) = std::fs::read_dir(&dir) else {
                return Ok(());
            };
            for e in rd.flatten() {
                let child = rel.join(e.file_name());
                if !made.contains(&child) {
                    remove(&e.path()).map_err(err)?;
                }
            }
            Ok(())
        }
        Action::Put(rel) => {
            let p = place(root, &rel)?;
            let h = entry.header();
            let mode = layer::kept_mode(h.mode().map_err(err)?);
            let kind = h.entry_type();
            let existing = std::fs::symlink_metadata(&p).ok();
            if kind.is_dir() {
                match existing {
                    Some(m) if m.is_dir() => {}
                    Some(_) => {
                        remove(&p).map_err(err)?;
                        std::fs::create_dir(&p).map_err(err)?;
                    }
                    None => std::fs::create_dir(&p).map_err(err)?,
                }
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).map_err(err)?;
            } else if kind.is_file() || kind == tar::EntryType::Continuous {
                if existing.is_some() {
                    remove(&p).map_err(err)?;
                }
                let mut out = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode_ext(mode)
                    .open(&p)
                    .map_err(err)?;
                std::io::copy(entry, &mut out).map_err(err)?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).map_err(err)?;
            } else if kind.is_symlink() {
                let target = entry
                    .link_name()
                    .map_err(err)?
                    .ok_or("a symbolic link without a target")?
                    .into_owned();
                if existing.is_some() {
                    remove(&p).map_err(err)?;
                }
                std::os::unix::fs::symlink(&target, &p).map_err(err)?;
            } else if kind.is_hard_link() {
                let target = entry
                    .link_name()
                    .map_err(err)?
                    .ok_or("a hard link without a target")?
                    .into_owned();
                let trel = layer::relative(&target)?.ok_or("a hard link to the root")?;
                let tp = place(root, &trel)?;
                let tm = std::fs::symlink_metadata(&tp)
                    .map_err(|e| format!("its target `{}`: {e}", target.display()))?;
                if tm.is_dir() {
                    return Err(format!("it links to the folder `{}`", target.display()));
                }
                if existing.is_some() && tp != p {
                    remove(&p).map_err(err)?;
                }
                if tp != p {
                    std::fs::hard_link(&tp, &p).map_err(err)?;
                }
                made.insert(rel);
                return Ok(());
            } else {
                // Character and block devices, FIFOs, sockets and unknown kinds.
                return Ok(());
            }
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::lchown(&p, Some(uid), Some(gid)).map_err(err)?;
            }
            made.insert(rel);
            Ok(())
        }
    }
}

trait ModeExt {
    fn mode_ext(&mut self, mode: u32) -> &mut Self;
}

impl ModeExt for std::fs::OpenOptions {
    fn mode_ext(&mut self, mode: u32) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        // Owner-writable while it is written; the final mode is set after.
        self.mode(mode | 0o200)
    }
}

fn remove(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
    }
}

/// The host path of `rel` inside `root`: its parent folders resolved as the image sees
/// them (a symbolic link followed inside `root`, `..` never above it), the last component
/// as it is (not followed).
pub fn place(root: &Path, rel: &Path) -> Result<PathBuf, String> {
    let name = rel.file_name().ok_or("an entry without a name")?;
    let parent = resolve(root, rel.parent().unwrap_or(Path::new("")))?;
    let dir = root.join(&parent);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("its folder `{}` is not a folder", parent.display())),
        Err(_) => return Err(format!("its folder `{}` does not exist", parent.display())),
    }
    Ok(dir.join(name))
}

/// `rel` resolved inside `root` (symbolic links followed, clamped at the root), as a path
/// relative to `root`.
fn resolve(root: &Path, rel: &Path) -> Result<PathBuf, String> {
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
