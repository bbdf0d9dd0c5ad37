//! The per-host mirror cache: one bare repository per source.
//!
//! A mirror is fetched only when the pinned commit is missing from it; creation and fetch
//! hold an exclusive `flock` on a lock file beside it (whose modification time is the
//! mirror's last use; the collection, [`MirrorCache::gc`], removes unlocked mirrors least
//! recently used first). Attempts never use a mirror: a task
//! release's baseline is built from its objects once ([`crate::baseline`]) and attempts copy
//! that. Its config is rewritten to a known one before every fetch, so nothing planted in it
//! changes what git does here; hooks are disabled by [`crate::git`].

use crate::git::{git, git_at, run, GitError};
use akbench_core::task::RepoLocation;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Why a mirror could not provide a commit.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// Filesystem trouble in the cache.
    #[error("failed to use the mirror cache at {}: {source}", path.display())]
    Io {
        /// Path involved.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The pinned commit is not in the repository even after a fetch.
    #[error("failed to find commit {commit} in {repo}: the repository does not contain it (check [source] commit, or that the repository was pushed)")]
    CommitMissing {
        /// Repository.
        repo: String,
        /// Commit.
        commit: String,
    },
}

/// The only configuration a mirror has.
const MIRROR_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n";

/// The cache of bare mirrors under a root folder.
#[derive(Debug, Clone)]
pub struct MirrorCache {
    root: PathBuf,
}

/// A lock on one mirror or baseline (exclusive, or shared while an attempt uses a
/// baseline); released on drop.
#[derive(Debug)]
pub struct MirrorLock {
    file: File,
}

impl Drop for MirrorLock {
    fn drop(&mut self) {
        // SAFETY: the fd is owned by `self.file` and valid for its lifetime.
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

impl MirrorCache {
    /// A cache rooted at `root` (created on first use).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The mirror path for a repository.
    pub fn path_for(&self, repo: &RepoLocation) -> PathBuf {
        let h = hex::encode(Sha256::digest(repo.as_git_arg().as_bytes()));
        self.root.join(format!("{}.git", &h[..24]))
    }

    /// Takes the exclusive lock of a mirror (blocking) and marks it used now.
    pub fn lock(&self, mirror: &Path) -> Result<MirrorLock, MirrorError> {
        self.lock_entry(mirror, libc::LOCK_EX)
    }

    /// Takes the lock of a cache entry (a mirror, or a baseline folder) with `op`
    /// (`LOCK_EX` or `LOCK_SH`, blocking), and marks the entry used now: the lock file's
    /// modification time is the entry's last use, which the collection reads
    /// ([`MirrorCache::gc`]).
    pub(crate) fn lock_entry(
        &self,
        entry: &Path,
        op: libc::c_int,
    ) -> Result<MirrorLock, MirrorError> {
        let parent = entry.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(parent).map_err(|source| MirrorError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
        let lock_path = entry.with_extension("lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| MirrorError::Io {
                path: lock_path.clone(),
                source,
            })?;
        loop {
            // SAFETY: a valid fd owned by `file`.
            let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
            if rc == 0 {
                // The stamp of the last use (best effort: a stamp left old only makes the
                // entry an earlier candidate for collection, which its lock still guards).
                let _ = file.set_modified(std::time::SystemTime::now());
                return Ok(MirrorLock { file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(MirrorError::Io {
                    path: lock_path,
                    source: err,
                });
            }
        }
    }

    /// Makes sure the mirror of `repo` contains `commit`, fetching only when it is missing.
    /// The caller must hold the mirror's lock. Returns the mirror path.
    pub fn ensure(
        &self,
        repo: &RepoLocation,
        commit: &str,
        _lock: &MirrorLock,
    ) -> Result<PathBuf, MirrorError> {
        let mirror = self.path_for(repo);
        if !mirror.join("HEAD").is_file() {
            let tmp = mirror.with_extension(format!("tmp-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&tmp);
            let mut c = git(None);
            c.args(["init", "--quiet", "--bare", "--"]).arg(&tmp);
            run(c)?;
            std::fs::rename(&tmp, &mirror).map_err(|source| MirrorError::Io {
                path: mirror.clone(),
                source,
            })?;
        }
        if has_commit(&mirror, commit) {
            return Ok(mirror);
        }
        let config = mirror.join("config");
        if std::fs::read_to_string(&config).ok().as_deref() != Some(MIRROR_CONFIG) {
            std::fs::write(&config, MIRROR_CONFIG).map_err(|source| MirrorError::Io {
                path: config.clone(),
                source,
            })?;
        }
        let mut c = git_at(&mirror, None);
        c.args(["fetch", "--quiet", "--no-tags", "--prune", "--"])
            .arg(repo.as_git_arg())
            .arg("+refs/heads/*:refs/heads/*")
            .arg("+refs/tags/*:refs/tags/*");
        run(c)?;
        if !has_commit(&mirror, commit) {
            // Some servers allow fetching a pinned commit that no ref points to.
            let mut c = git_at(&mirror, None);
            c.args(["fetch", "--quiet", "--no-tags", "--"])
                .arg(repo.as_git_arg())
                .arg(commit);
            let _ = run(c);
        }
        if has_commit(&mirror, commit) {
            Ok(mirror)
        } else {
            Err(MirrorError::CommitMissing {
                repo: repo.as_git_arg(),
                commit: commit.to_string(),
            })
        }
    }
}

mod gc;

/// True when `commit` names a commit object in `repo`.
pub fn has_commit(repo: &Path, commit: &str) -> bool {
    let mut c = git_at(repo, None);
    c.args(["cat-file", "-e"])
        .arg(format!("{commit}^{{commit}}"));
    run(c).is_ok()
}
