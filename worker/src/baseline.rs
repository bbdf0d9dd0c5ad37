//! The per-host baseline cache: for each task release (repository, pinned commit, mutation),
//! a small repository holding the baseline and nothing else.
//!
//! A baseline is the pinned tree with the mutation applied, committed as one parentless
//! "task baseline" commit. Its repository has one pack of exactly the objects reachable from
//! that commit, a detached `HEAD`, no refs, no reflogs, no alternates: neither the pinned
//! commit (the answer, for a mutation task) nor any other history can be read from it. Each
//! attempt gets a private copy (copied files, never hardlinks into the cache).
//!
//! It is built once per key, under a lock of its own, from the mirror's objects only: git runs
//! on a private build repository that borrows the mirror's object folder, so the mirror's
//! refs (replace refs included), config, hooks and `info/attributes` are never read. The
//! objects are re-indexed by `git index-pack` in the final repository (which hashes every
//! object it stores) and checked to be connected, and the pinned commit is re-hashed, so an
//! object planted in the mirror under a false name cannot change a baseline. The mirror's
//! lock is held while the mirror is fetched and the baseline built from it, never while a
//! workspace is made. A baseline handed out holds its own lock shared until it is dropped,
//! so the cache's collection ([`MirrorCache::gc`]) never removes one in use.

use crate::git::{git_at, run, run_text, run_with_input, GitError};
use crate::mirror::{MirrorCache, MirrorError, MirrorLock};
use crate::runtime::container::Image;
use akbench_core::task::Task;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

/// Why a baseline could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The mirror could not provide the commit (an infrastructure error).
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    /// A git step failed (an infrastructure error).
    #[error(transparent)]
    Git(#[from] GitError),
    /// Filesystem trouble (an infrastructure error).
    #[error("failed to prepare the baseline at {}: {source}", path.display())]
    Io {
        /// Path involved.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The mirror holds an object under the pinned commit's name whose content does not hash
    /// to it (the mirror was tampered with).
    #[error("failed to trust commit {commit} in the mirror {}: its content does not hash to its name; delete the mirror folder so it is fetched again", mirror.display())]
    Tampered {
        /// The mirror.
        mirror: PathBuf,
        /// The commit.
        commit: String,
    },
    /// An image-only task's baseline was asked for without its image, or the image's working
    /// folder cannot be read (the run is refused: the task needs `runtime: container`).
    #[error("failed to make the baseline of task `{task}`: {problem}")]
    Image {
        /// The task.
        task: String,
        /// What is wrong, with the fix.
        problem: String,
    },
    /// The task's mutation does not apply to its pinned commit (the task is broken).
    #[error("failed to apply the mutation {} to commit {commit}: {detail}; fix the task's mutation.patch so that `git apply` accepts it on the pinned commit", patch.display())]
    MutationDoesNotApply {
        /// The patch.
        patch: PathBuf,
        /// The commit.
        commit: String,
        /// git's message.
        detail: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BaselineError + '_ {
    move |source| BaselineError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A built baseline in the cache.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The repository to copy (a `.git` folder: `HEAD`, `config`, `objects/pack`).
    pub repo: PathBuf,
    /// The parentless baseline commit.
    pub commit: String,
    /// Its tree (the fingerprint of the starting point).
    pub tree: String,
    /// The baseline's lock, held shared while this value (or a clone) lives: the cache's
    /// collection never removes a baseline in use.
    in_use: Option<Arc<MirrorLock>>,
}

impl Baseline {
    /// The object folder of the cached repository (read by the worker's own git calls, never
    /// written).
    pub fn objects(&self) -> PathBuf {
        self.repo.join("objects")
    }
}

/// The `config` of a baseline repository and of every attempt's copy.
const REPO_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";

/// Writes the skeleton of a repository (no objects) with `head` as its `HEAD`.
pub(crate) fn init_repo(dir: &Path, head: &str, config: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("objects/pack"))?;
    std::fs::create_dir_all(dir.join("objects/info"))?;
    std::fs::create_dir_all(dir.join("refs/heads"))?;
    std::fs::create_dir_all(dir.join("refs/tags"))?;
    std::fs::write(dir.join("HEAD"), format!("{head}\n"))?;
    std::fs::write(dir.join("config"), config)
}

/// The cache key of a task's baseline.
pub fn key(task: &Task, apply_mutation: bool) -> String {
    let mut h = Sha256::new();
    h.update(b"akbench-baseline-v1\0");
    if let Some(repo) = &task.repo {
        h.update(repo.as_git_arg().as_bytes());
    }
    h.update(b"\0");
    h.update(task.commit.as_bytes());
    h.update(b"\0");
    match (&task.mutation, apply_mutation) {
        (Some((_, digest)), true) => h.update(digest.as_bytes()),
        _ => h.update(b"-"),
    }
    hex::encode(h.finalize())[..32].to_string()
}

impl MirrorCache {
    /// The folder holding built baselines.
    pub fn baselines_root(&self) -> PathBuf {
        self.root().join("baselines")
    }

    /// The baseline of `task` (with its mutation when `apply_mutation`), built on first use.
    /// An image-only task's baseline needs its image: [`MirrorCache::baseline_in`].
    pub fn baseline(&self, task: &Task, apply_mutation: bool) -> Result<Baseline, BaselineError> {
        self.baseline_in(task, apply_mutation, None)
    }

    /// The baseline of `task`: from its pinned commit (with its mutation when
    /// `apply_mutation`), or, for an image-only task, from the working folder of `image`
    /// (the image it runs in, unpacked), built on first use.
    pub fn baseline_in(
        &self,
        task: &Task,
        apply_mutation: bool,
        image: Option<&Image>,
    ) -> Result<Baseline, BaselineError> {
        let Some(repo) = &task.repo else {
            return self.image_baseline(task, image);
        };
        let dir = self.baselines_root().join(key(task, apply_mutation));
        self.cached(&dir, |tmp| {
            // The mirror's lock is held while its objects are read (the collection never
            // removes a locked mirror).
            let mirror = self.path_for(repo);
            let lock = self.lock(&mirror)?;
            let mirror = self.ensure(repo, &task.commit, &lock)?;
            build(&mirror, task, apply_mutation, tmp)
        })
    }

    /// The baseline kept at `dir`, made by `make` (into a temporary folder, renamed into
    /// place) under `dir`'s lock when it is not there yet. The baseline returned holds
    /// `dir`'s lock shared (and its use is stamped) until it is dropped.
    fn cached(
        &self,
        dir: &Path,
        make: impl FnOnce(&Path) -> Result<(), BaselineError>,
    ) -> Result<Baseline, BaselineError> {
        let root = self.baselines_root();
        std::fs::create_dir_all(&root).map_err(io(&root))?;
        let mut make = Some(make);
        loop {
            let held = self.lock_entry(dir, libc::LOCK_SH)?;
            if let Some(mut b) = read_built(dir) {
                b.in_use = Some(Arc::new(held));
                return Ok(b);
            }
            drop(held);
            let _lock = self.lock(dir)?;
            if read_built(dir).is_some() {
                continue;
            }
            // Built by this call and collected before it could be used: not retried forever.
            let Some(make) = make.take() else {
                return Err(BaselineError::Io {
                    path: dir.to_path_buf(),
                    source: std::io::Error::other(
                        "the baseline just built was removed before it could be used (the cache's collection or a person); run again",
                    ),
                });
            };
            let tmp = dir.with_extension(format!("tmp-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&tmp);
            let built = make(&tmp).and_then(|()| std::fs::rename(&tmp, dir).map_err(io(dir)));
            if built.is_err() {
                let _ = std::fs::remove_dir_all(&tmp);
            }
            built?;
        }
    }
}

/// Reads a built baseline (`meta` holds "<commit> <tree>").
fn read_built(dir: &Path) -> Option<Baseline> {
    let meta = std::fs::read_to_string(dir.join("meta")).ok()?;
    let mut it = meta.split_whitespace();
    let (commit, tree) = (it.next()?.to_string(), it.next()?.to_string());
    Some(Baseline {
        repo: dir.join("repo"),
        commit,
        tree,
        in_use: None,
    })
}

/// Builds the baseline under `tmp`: `tmp/repo` (the repository) and `tmp/meta`.
fn build(
    mirror: &Path,
    task: &Task,
    apply_mutation: bool,
    tmp: &Path,
) -> Result<(), BaselineError> {
    let scratch = tmp.join("build.git");
    init_repo(&scratch, "ref: refs/heads/main", "[core]\n\tbare = true\n").map_err(io(tmp))?;
    let index = tmp.join("build.index");
    let objects = mirror.join("objects");
    let on_build = || {
        let mut c = git_at(&scratch, None);
        c.env("GIT_INDEX_FILE", &index)
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &objects);
        c
    };
    // The pinned commit must hash to its name (the mirror is only trusted for content).
    let mut c = on_build();
    c.args(["cat-file", "commit", &task.commit]);
    let body = run(c)?;
    let mut c = on_build();
    c.args(["hash-object", "-t", "commit", "--stdin"]);
    let rehashed = run_with_input(c, &body, Stdio::piped())?;
    if String::from_utf8_lossy(&rehashed).trim() != task.commit {
        return Err(BaselineError::Tampered {
            mirror: mirror.to_path_buf(),
            commit: task.commit.clone(),
        });
    }
    let mut c = on_build();
    c.args(["read-tree", "--"])
        .arg(format!("{}^{{tree}}", task.commit));
    run(c)?;
    if let (true, Some((patch, _))) = (apply_mutation, &task.mutation) {
        let mut c = on_build();
        c.args(["apply", "--cached", "--whitespace=nowarn", "--"])
            .arg(patch);
        run(c).map_err(|e| BaselineError::MutationDoesNotApply {
            patch: patch.clone(),
            commit: task.commit.clone(),
            detail: e.detail,
        })?;
    }
    seal(tmp, &scratch, &index, &on_build)
}

/// Commits the index `index` of the build repository `scratch` (git run by `on_build`) as
/// the parentless "task baseline" commit and writes `tmp/repo` (exactly its objects, each
/// hashed by `index-pack`) and `tmp/meta`; removes the build repository and the index.
fn seal(
    tmp: &Path,
    scratch: &Path,
    index: &Path,
    on_build: &dyn Fn() -> std::process::Command,
) -> Result<(), BaselineError> {
    let mut c = on_build();
    c.arg("write-tree");
    let tree = run_text(c)?;
    let mut c = on_build();
    c.args(["commit-tree", "-m", "task baseline", &tree]);
    let commit = run_text(c)?;
    let pack = tmp.join("baseline.pack");
    let file = std::fs::File::create(&pack).map_err(io(&pack))?;
    let mut c = on_build();
    c.args(["pack-objects", "--revs", "--stdout", "-q"]);
    run_with_input(c, format!("{commit}\n").as_bytes(), Stdio::from(file))?;

    // The final repository: only what index-pack hashed out of that pack.
    let repo = tmp.join("repo");
    init_repo(&repo, &commit, REPO_CONFIG).map_err(io(&repo))?;
    let bytes = std::fs::read(&pack).map_err(io(&pack))?;
    // index-pack names every object by hashing its content (no fsck strictness: old trees
    // of real repositories fail some of its checks and are still fine to check out).
    let mut c = git_at(&repo, None);
    c.args(["index-pack", "--stdin"]);
    run_with_input(c, &bytes, Stdio::piped())?;
    // Every object the baseline needs is in it (a renamed object would be missing).
    let mut c = git_at(&repo, None);
    c.args([
        "rev-list",
        "--objects",
        "--missing=error",
        "--quiet",
        &commit,
    ]);
    run(c)?;
    for p in [pack.as_path(), index] {
        std::fs::remove_file(p).map_err(io(p))?;
    }
    std::fs::remove_dir_all(scratch).map_err(io(scratch))?;
    let meta = tmp.join("meta");
    std::fs::write(&meta, format!("{commit} {tree}\n")).map_err(io(&meta))
}

/// Copies a cached baseline repository to `dest` (file by file: the copy shares no inode
/// with the cache, so nothing done to it reaches the cache or another attempt).
///
/// Only what git needs is copied: `HEAD`, `config`, `refs/` and the pack with its index.
/// Empty folders other than `refs` (git makes `refs/heads`, `objects/info` when it needs
/// them) and the pack's reverse index (`.rev`, which git computes when it is missing) are
/// left out: every attempt makes and removes its copy, and each file or folder made costs
/// the file system an inode.
pub fn copy_repo(from: &Path, dest: &Path) -> std::io::Result<()> {
    // git needs `refs` to exist to take the folder for a repository.
    std::fs::create_dir_all(dest.join("refs"))?;
    copy_files(from, dest)
}

/// Copies every file under `from` (but `.rev` files) to the same place under `dest`,
/// making only the folders that hold one.
fn copy_files(from: &Path, dest: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let to = dest.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_files(&entry.path(), &to)?;
        } else if to.extension().is_some_and(|e| e == "rev") {
            continue;
        } else {
            std::fs::create_dir_all(dest)?;
            std::fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}

mod image;
