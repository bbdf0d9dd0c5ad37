//! Before git reads what the agent left: the worktree walked once (links never followed),
//! every unreadable file or folder made readable, and every entry git cannot record
//! ([`akbench_core::uncollectable`]: a nested `.git`, a name git refuses, a special file, a
//! path too long) moved out of the worktree into a folder of the attempt for as long as git
//! reads it, then put back ([`SetAside::restore`]), so a kept worktree still holds
//! everything the agent left.
//!
//! Readability: the worker owns what the agent wrote (a root worker takes it back when the
//! sandbox ends, a worker in a user namespace of its own uid owns it already), so an entry
//! the worker cannot read is given its owner's read (and, for a folder, search) permission;
//! the bits git records (a file's executable bit) are not touched. An entry the worker can
//! neither read nor change, or move aside, ends the attempt as the agent's failure, naming
//! the path ([`Refusal::AgentLeft`]).

use akbench_core::uncollectable::{classify, quote_path, Decision, Kind, Why};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the worktree could not be made ready for git.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Something the agent left that the worker may neither read nor change, or move
    /// aside (the agent's doing).
    #[error("the agent left `{path}`, which the worker can neither {what}: {detail}")]
    AgentLeft {
        /// The worktree-relative path, quoted.
        path: String,
        /// What could not be done.
        what: &'static str,
        /// The system's message.
        detail: String,
    },
    /// The worker's own folder for what is set aside failed (the host's fault).
    #[error("failed to prepare {}: {source}", path.display())]
    Io {
        /// The folder or entry.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// The entries set aside while git reads the worktree.
#[derive(Debug)]
pub struct SetAside {
    dir: PathBuf,
    /// (where it was, where it is now), in the order they were moved.
    moved: Vec<(PathBuf, PathBuf)>,
    /// Every entry not collected: its worktree-relative path and why.
    pub entries: Vec<(Vec<u8>, Why)>,
}

impl SetAside {
    /// Puts every entry back where the agent left it and removes the folder (best effort:
    /// an entry that cannot go back stays in the attempt folder, removed with it); returns
    /// [`SetAside::entries`].
    pub fn restore(self) -> Vec<(Vec<u8>, Why)> {
        for (from, to) in self.moved.iter().rev() {
            let _ = std::fs::rename(to, from);
        }
        if !self.moved.is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        self.entries
    }
}

fn kind_of(ft: std::fs::FileType) -> Kind {
    if ft.is_dir() {
        Kind::Dir
    } else if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_fifo() {
        Kind::Fifo
    } else if ft.is_socket() {
        Kind::Socket
    } else if ft.is_char_device() || ft.is_block_device() {
        Kind::Device
    } else {
        Kind::File
    }
}

/// Walks `worktree` (its own `.git` excluded), making what is unreadable readable and moving
/// what git cannot record into `dir` (made fresh when the first entry is set aside; on the
/// worktree's file system).
pub fn set_aside(worktree: &Path, dir: &Path) -> Result<SetAside, Refusal> {
    let mut out = SetAside {
        dir: dir.to_path_buf(),
        moved: Vec::new(),
        entries: Vec::new(),
    };
    if let Err(e) = walk(worktree, &mut out) {
        let _ = out.restore();
        return Err(e);
    }
    Ok(out)
}

fn walk(worktree: &Path, out: &mut SetAside) -> Result<(), Refusal> {
    readable(worktree, b"", true)?;
    let mut stack: Vec<(PathBuf, Vec<u8>)> = vec![(worktree.to_path_buf(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| unreadable(&rel, &e))?;
        for e in entries {
            let e = e.map_err(|e| unreadable(&rel, &e))?;
            let name = e.file_name();
            let mut child_rel = rel.clone();
            if !child_rel.is_empty() {
                child_rel.push(b'/');
            }
            child_rel.extend_from_slice(name.as_bytes());
            let path = e.path();
            let kind = kind_of(e.file_type().map_err(|e| unreadable(&child_rel, &e))?);
            match classify(&child_rel, kind) {
                Decision::Own => {}
                Decision::SetAside(why) => {
                    if out.moved.is_empty() {
                        let _ = std::fs::remove_dir_all(&out.dir);
                        std::fs::create_dir_all(&out.dir).map_err(|source| Refusal::Io {
                            path: out.dir.clone(),
                            source,
                        })?;
                    }
                    let to = out.dir.join(out.moved.len().to_string());
                    move_out(&dir, &path, &to, &child_rel)?;
                    out.moved.push((path, to));
                    out.entries.push((child_rel, why));
                }
                Decision::Collect => match kind {
                    Kind::Dir => {
                        readable(&path, &child_rel, true)?;
                        stack.push((path, child_rel));
                    }
                    Kind::File => readable(&path, &child_rel, false)?,
                    _ => {}
                },
            }
        }
    }
    Ok(())
}

/// Moves `path` (in the folder `parent`) to `to`; a parent the agent made read-only is given
/// its owner's write permission first.
fn move_out(parent: &Path, path: &Path, to: &Path, rel: &[u8]) -> Result<(), Refusal> {
    let first = match std::fs::rename(path, to) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => e,
        Err(source) => {
            return Err(Refusal::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let refused = |e: &std::io::Error| Refusal::AgentLeft {
        path: quote_path(rel),
        what: "move aside nor make its folder writable",
        detail: e.to_string(),
    };
    let m = std::fs::symlink_metadata(parent).map_err(|_| refused(&first))?;
    let mode = m.permissions().mode() & 0o7777;
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(mode | 0o700))
        .map_err(|_| refused(&first))?;
    std::fs::rename(path, to).map_err(|e| refused(&e))
}

/// A failure to read the entry at `rel`: refused permission is the agent's doing, any other
/// error the host's.
fn unreadable(rel: &[u8], e: &std::io::Error) -> Refusal {
    if e.kind() != std::io::ErrorKind::PermissionDenied {
        return Refusal::Io {
            path: PathBuf::from(std::ffi::OsStr::from_bytes(rel)),
            source: std::io::Error::new(e.kind(), e.to_string()),
        };
    }
    Refusal::AgentLeft {
        path: if rel.is_empty() {
            ".".into()
        } else {
            quote_path(rel)
        },
        what: "read nor make readable",
        detail: e.to_string(),
    }
}

/// Makes `path` readable by the worker (a folder: readable and searchable), when it is not.
fn readable(path: &Path, rel: &[u8], dir: bool) -> Result<(), Refusal> {
    let want = if dir {
        libc::R_OK | libc::X_OK
    } else {
        libc::R_OK
    };
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), want) } == 0 {
        return Ok(());
    }
    let m = std::fs::symlink_metadata(path).map_err(|e| unreadable(rel, &e))?;
    let bits = if dir { 0o700 } else { 0o400 };
    let mode = m.permissions().mode() & 0o7777;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | bits))
        .map_err(|e| unreadable(rel, &e))?;
    // SAFETY: as above.
    if unsafe { libc::access(c.as_ptr(), want) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(unreadable(rel, &e));
    }
    Ok(())
}

/// The record's form of what was set aside: at most `max` entries (path quoted, why
/// described) and how many more there were.
pub fn listed(entries: &[(Vec<u8>, Why)], max: usize) -> (Vec<(String, String)>, u64) {
    let list = entries
        .iter()
        .take(max)
        .map(|(p, w)| (quote_path(p), w.describe()))
        .collect();
    (list, entries.len().saturating_sub(max) as u64)
}

#[cfg(test)]
mod tests;
