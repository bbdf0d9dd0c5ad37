//! Who the sandboxed process is, and who owns what it writes.
//!
//! When the worker runs as root the sandboxed process does not: it runs as the sandbox user
//! ([`SandboxUser`], `AKBENCH_SANDBOX_UID` / `AKBENCH_SANDBOX_GID`, default 65534 `nobody`)
//! with no capabilities. The folders it must write (worktree, home, the verifier's output
//! folder, a linked worktree's git folder) are handed to that user before the start
//! ([`hand_over`]) and given back to their owner once every process of the sandbox is gone
//! ([`Handed::restore`]), so the worker's later steps (git, diff, delete) see them as before.
//!
//! A regular file with more than one link is left as it is (it may be linked from outside the
//! folder, e.g. a clone's objects); symbolic links are never followed.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The unprivileged host user the sandbox runs as under a root worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxUser {
    /// Host uid (never 0).
    pub uid: u32,
    /// Host gid (never 0).
    pub gid: u32,
}

/// Default uid and gid: `nobody` / `nogroup`.
pub const DEFAULT_ID: u32 = 65534;

/// The sandbox user from the values of `AKBENCH_SANDBOX_UID` and `AKBENCH_SANDBOX_GID`
/// (pure); a value that is not a whole number above 0 is refused, naming the variable.
pub fn sandbox_user(uid: Option<&str>, gid: Option<&str>) -> Result<SandboxUser, String> {
    let parse = |var: &str, v: Option<&str>| -> Result<u32, String> {
        match v.map(str::trim) {
            None | Some("") => Ok(DEFAULT_ID),
            Some(s) => match s.parse::<u32>() {
                Ok(n) if n > 0 && n != u32::MAX => Ok(n),
                _ => Err(format!(
                    "{var}=`{s}` is not a usable id; give a whole number above 0 (an unprivileged host user the sandbox runs as), or leave it unset for {DEFAULT_ID}"
                )),
            },
        }
    };
    Ok(SandboxUser {
        uid: parse("AKBENCH_SANDBOX_UID", uid)?,
        gid: parse("AKBENCH_SANDBOX_GID", gid)?,
    })
}

/// The sandbox user from this process's environment.
pub fn from_env() -> Result<SandboxUser, String> {
    sandbox_user(
        std::env::var("AKBENCH_SANDBOX_UID").ok().as_deref(),
        std::env::var("AKBENCH_SANDBOX_GID").ok().as_deref(),
    )
}

/// Folders handed to the sandbox user, with the owner each is given back to.
#[derive(Debug, Default)]
pub struct Handed {
    user: Option<SandboxUser>,
    roots: Vec<(PathBuf, u32, u32)>,
}

/// Hands every entry under each of `roots` owned by the root's own owner to `to` (entries of
/// other owners and multiply linked files stay; links are changed, never followed). On an
/// error what was handed over is given back.
pub fn hand_over(roots: &[PathBuf], to: SandboxUser) -> Result<Handed, (PathBuf, std::io::Error)> {
    let mut handed = Handed {
        user: Some(to),
        roots: Vec::new(),
    };
    for r in roots {
        let walked = std::fs::symlink_metadata(r)
            .map_err(|e| (r.clone(), e))
            .and_then(|m| {
                let (uid, gid) = (m.uid(), m.gid());
                handed.roots.push((r.clone(), uid, gid));
                walk(r, &mut |p, m| {
                    if m.uid() == uid && !(m.is_file() && m.nlink() > 1) {
                        std::os::unix::fs::lchown(p, Some(to.uid), Some(to.gid))
                            .map_err(|e| (p.to_path_buf(), e))?;
                    }
                    Ok(())
                })
            });
        if let Err(e) = walked {
            // Nothing half handed over stays so.
            handed.restore();
            return Err(e);
        }
    }
    Ok(handed)
}

impl Handed {
    /// Nothing handed over (a worker that is not root).
    pub fn none() -> Self {
        Self::default()
    }

    /// Gives every entry the sandbox user owns under the roots back to the root's owner
    /// (the processes are gone; what they created becomes the worker's). Best effort: an
    /// entry that cannot be changed is skipped.
    pub fn restore(self) {
        let Some(user) = self.user else {
            return;
        };
        for (r, uid, gid) in &self.roots {
            let _ = walk(r, &mut |p, m| {
                if m.uid() == user.uid {
                    let _ = std::os::unix::fs::lchown(p, Some(*uid), Some(*gid));
                }
                Ok(())
            });
        }
    }
}

type Visit<'a> = dyn FnMut(&Path, &std::fs::Metadata) -> Result<(), (PathBuf, std::io::Error)> + 'a;

/// Visits `root` and everything below it, without following symbolic links.
fn walk(root: &Path, f: &mut Visit<'_>) -> Result<(), (PathBuf, std::io::Error)> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        f(&p, &m)?;
        if m.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_user_defaults_to_nobody_and_refuses_root_and_garbage() {
        let ok = |u, g| sandbox_user(u, g).unwrap();
        assert_eq!(
            ok(None, None),
            SandboxUser {
                uid: 65534,
                gid: 65534
            }
        );
        assert_eq!(
            ok(Some("1500"), Some(" 1501 ")),
            SandboxUser {
                uid: 1500,
                gid: 1501
            }
        );
        assert_eq!(ok(Some(""), None).uid, 65534);
        for (u, g, var) in [
            (Some("0"), None, "AKBENCH_SANDBOX_UID"),
            (Some("-3"), None, "AKBENCH_SANDBOX_UID"),
            (None, Some("root"), "AKBENCH_SANDBOX_GID"),
            (None, Some("4294967295"), "AKBENCH_SANDBOX_GID"),
        ] {
            let e = sandbox_user(u, g).unwrap_err();
            assert!(e.starts_with(var) && e.contains("above 0"), "{e}");
        }
    }

    #[test]
    fn hand_over_and_restore_change_only_the_workers_entries() {
        if !super::super::bwrap::is_root() {
            akbench_core::testkit::skip(
                "hand_over_and_restore_change_only_the_workers_entries",
                "needs root (chown)",
            );
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("ws");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/f"), "x").unwrap();
        let outside = d.path().join("outside");
        std::fs::write(&outside, "host").unwrap();
        std::fs::hard_link(&outside, root.join("linked")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let user = SandboxUser {
            uid: 4242,
            gid: 4243,
        };
        let h = hand_over(std::slice::from_ref(&root), user).unwrap();
        let owner = |p: &Path| {
            let m = std::fs::symlink_metadata(p).unwrap();
            (m.uid(), m.gid())
        };
        assert_eq!(owner(&root), (4242, 4243));
        assert_eq!(owner(&root.join("sub/f")), (4242, 4243));
        assert_eq!(owner(&root.join("link")), (4242, 4243));
        // Multiply linked: stays, and so does the file outside.
        assert_eq!(owner(&outside), (0, 0));
        // What the sandbox user creates becomes the worker's.
        std::fs::write(root.join("new"), "y").unwrap();
        std::os::unix::fs::lchown(root.join("new"), Some(4242), Some(4243)).unwrap();
        h.restore();
        for p in ["", "sub", "sub/f", "link", "new"] {
            assert_eq!(owner(&root.join(p)), (0, 0), "{p}");
        }
    }
}
