//! Workspaces: a private copy of the task's baseline repository checked out in the agent's
//! folder, a private agent home outside it, fingerprints and the agent's diff.
//!
//! The repository the agent gets holds the baseline (the pinned tree with the mutation
//! applied, one parentless "task baseline" commit, detached `HEAD`) and nothing else: it is a
//! file-by-file copy of the cached baseline ([`crate::baseline`]), so no other commit, ref,
//! reflog or object is in it, it borrows nothing, and it shares no file with the cache or the
//! mirror. Making one takes no lock and runs one git process.
//!
//! Fingerprints are git tree ids: `tree_after_mutation` at creation, `tree_after_agent` at
//! COLLECTING. What the agent left is read by git with the worktree as its work tree, the
//! cached baseline repository as its repository (read only: git reads its config and writes
//! nothing there), the worker's own index of the attempt, and an object folder of the
//! attempt's own for what git hashes (the baseline's objects borrowed read-only): the
//! agent's `.git` (config, hooks, filters, objects) is never read, and objects hashed from
//! the agent's files land in the attempt folder, removed with it.
//!
//! Before git reads the worktree, what git cannot record as it is (a nested `.git`, a name
//! git refuses, a special file, a path too long: [`akbench_core::uncollectable`]) is set
//! aside and named, and what the worker cannot read is made readable ([`set_aside`]); a
//! `git add` that still fails on what the agent left, where git works on the baseline, is
//! the agent's doing ([`WorkspaceError::AgentLeft`]), never the host's.
//!
//! Collecting an unchanged worktree runs one git process (`add --all`): when the index's
//! entries after it are the baseline's ([`akbench_core::git_index`]), the tree is the
//! baseline's and the diff is empty, so `write-tree` and `diff-tree` are not run.

use crate::baseline::{copy_repo, Baseline, BaselineError};
use crate::git::{git_at, run, run_capped, run_text, Capped, GitError};
use crate::mirror::{MirrorCache, MirrorError};
use crate::runtime::container::Image;
use akbench_core::git_index;
use akbench_core::task::Task;
use akbench_core::uncollectable::Why;
use std::path::{Path, PathBuf};

pub mod set_aside;

/// Why a workspace could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The mirror could not provide the commit (an infrastructure error).
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    /// A git step failed (an infrastructure error).
    #[error(transparent)]
    Git(#[from] GitError),
    /// Filesystem trouble (an infrastructure error).
    #[error("failed to prepare {}: {source}", path.display())]
    Io {
        /// Path involved.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The baseline could not be built (the mirror was tampered with, or git failed).
    #[error(transparent)]
    Baseline(BaselineError),
    /// The task cannot start here (an image-only task without its image, or its image's
    /// working folder is not a folder): the run is refused, not retried.
    #[error("{0}")]
    Refused(String),
    /// What the agent left cannot be collected (an entry the worker may neither read nor
    /// move, or one git refuses where it works on the baseline): the agent's failure, with
    /// this cause.
    #[error("{0}")]
    AgentLeft(String),
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

impl From<BaselineError> for WorkspaceError {
    fn from(e: BaselineError) -> Self {
        match e {
            BaselineError::Mirror(m) => WorkspaceError::Mirror(m),
            BaselineError::Git(g) => WorkspaceError::Git(g),
            BaselineError::MutationDoesNotApply {
                patch,
                commit,
                detail,
            } => WorkspaceError::MutationDoesNotApply {
                patch,
                commit,
                detail,
            },
            e @ BaselineError::Image { .. } => WorkspaceError::Refused(e.to_string()),
            other => WorkspaceError::Baseline(other),
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A created workspace.
#[derive(Debug)]
pub struct Workspace {
    /// The cached baseline the repository was copied from.
    pub baseline: Baseline,
    /// Folder holding everything of this attempt that is not an artifact.
    pub root: PathBuf,
    /// The worktree (the agent's cwd), with its own `.git` folder.
    pub worktree: PathBuf,
    /// The agent's private HOME, outside the worktree.
    pub home: PathBuf,
    /// The pinned commit.
    pub base_commit: String,
    /// The baseline commit (post-mutation, parentless).
    pub baseline_commit: String,
    /// Tree id after the mutation.
    pub tree_after_mutation: String,
    /// Whether the mutation was applied.
    pub mutation_applied: bool,
    /// [`akbench_core::git_index::entries_digest`] of the fresh checkout's index (the
    /// baseline's entries), when readable: COLLECTING compares the index it updated with it.
    base_entries: Option<[u8; 32]>,
}

/// What the agent left.
#[derive(Debug, Clone)]
pub struct Collected {
    /// Tree id of the worktree as left (tracked and untracked, ignored files excluded).
    pub tree_after_agent: String,
    /// `git diff` from the post-mutation tree to that tree, binary-safe; empty when the
    /// diff was over the limit (`too_large`).
    pub diff: Vec<u8>,
    /// Number of files the diff touches.
    pub files_changed: u32,
    /// `Some(bytes read)` when the diff was larger than the limit given to
    /// [`Workspace::collect`]: git was stopped after that many bytes and nothing was kept.
    pub too_large: Option<u64>,
    /// What the agent left that is in neither the tree nor the diff (worktree-relative
    /// path, why), in the order found.
    pub not_collected: Vec<(Vec<u8>, Why)>,
}

/// The worker's own git view of a work tree: the cached baseline repository as repository
/// (read only), objects written to `objects` (a folder of the attempt), the baseline's
/// objects borrowed read-only.
struct Private {
    objects: PathBuf,
    repo: PathBuf,
    borrowed: PathBuf,
}

impl Private {
    fn create(objects: &Path, baseline: &Baseline) -> Result<Private, WorkspaceError> {
        let _ = std::fs::remove_dir_all(objects);
        std::fs::create_dir(objects).map_err(io(objects))?;
        Ok(Private {
            objects: objects.to_path_buf(),
            repo: baseline.repo.clone(),
            borrowed: baseline.objects(),
        })
    }

    fn git(&self, worktree: &Path, index: &Path) -> std::process::Command {
        let mut c = git_at(&self.repo, Some(worktree));
        c.env("GIT_INDEX_FILE", index)
            .env("GIT_OBJECT_DIRECTORY", &self.objects)
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &self.borrowed);
        c
    }

    fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.objects);
    }
}

impl Workspace {
    /// Creates the workspace for `task` under `root` (which must not exist yet). `image`:
    /// the image the task runs in under `container` (an image-only task's baseline is its
    /// working folder).
    pub fn create(
        cache: &MirrorCache,
        task: &Task,
        root: &Path,
        apply_mutation: bool,
        image: Option<&Image>,
    ) -> Result<Workspace, WorkspaceError> {
        let baseline = cache.baseline_in(task, apply_mutation, image)?;
        std::fs::create_dir_all(root).map_err(io(root))?;
        let worktree = root.join("ws");
        let home = root.join("home");
        std::fs::create_dir_all(home.join("tmp")).map_err(io(&home))?;
        let dot_git = worktree.join(".git");
        copy_repo(&baseline.repo, &dot_git).map_err(io(&dot_git))?;
        let mut c = git_at(&dot_git, Some(&worktree));
        c.args(["read-tree", "--reset", "-u", "HEAD"]);
        run(c)?;
        // The worker's own copy of the fresh index: its stat data lets COLLECTING rehash
        // only what changed, and the agent cannot touch it.
        let index = root.join("base.index");
        copy_index(&dot_git.join("index"), &index).map_err(io(&index))?;
        let base_entries = std::fs::read(&index)
            .ok()
            .and_then(|b| git_index::entries_digest(&b, baseline.tree.len() / 2));
        Ok(Workspace {
            root: root.to_path_buf(),
            worktree,
            home,
            // An image-only task pins no commit: its start is the baseline itself.
            base_commit: if task.image_only() {
                baseline.commit.clone()
            } else {
                task.commit.clone()
            },
            baseline_commit: baseline.commit.clone(),
            tree_after_mutation: baseline.tree.clone(),
            mutation_applied: apply_mutation && task.mutation.is_some(),
            baseline,
            base_entries,
        })
    }

    /// Reads what the agent left: fingerprint and diff against the post-mutation tree,
    /// new files included, through the worker's own index and object folder. A diff of
    /// more than `max_diff_bytes` is not kept (nor held in memory past the limit): the
    /// result says it was too large.
    pub fn collect(&self, max_diff_bytes: u64) -> Result<Collected, WorkspaceError> {
        let private = Private::create(&self.root.join("objects"), &self.baseline)?;
        let result = self.collect_with(&private, max_diff_bytes);
        private.remove();
        result
    }

    fn collect_with(
        &self,
        private: &Private,
        max_diff_bytes: u64,
    ) -> Result<Collected, WorkspaceError> {
        // The index of the checkout, updated in place (it is the worker's, never the
        // agent's); without it, one is made from the baseline's tree.
        let index = self.root.join("base.index");
        let seeded = index.is_file();
        let base = (!seeded).then_some(self.tree_after_mutation.as_str());
        let aside = self.root.join("aside");
        let not_collected = add_all(private, &self.worktree, base, &index, &aside)?;
        let unchanged = |after: &str| Collected {
            tree_after_agent: after.to_string(),
            diff: Vec::new(),
            files_changed: 0,
            too_large: None,
            not_collected: not_collected.clone(),
        };
        let oid_len = self.tree_after_mutation.len() / 2;
        if let (true, Some(base)) = (seeded, self.base_entries) {
            let now = std::fs::read(&index).map_err(io(&index))?;
            if git_index::entries_digest(&now, oid_len) == Some(base) {
                // The baseline's entries: its tree, and nothing to diff.
                return Ok(unchanged(&self.tree_after_mutation));
            }
        }
        let mut c = private.git(&self.worktree, &index);
        c.arg("write-tree");
        let after = run_text(c)?;
        if after == self.tree_after_mutation {
            return Ok(unchanged(&after));
        }
        let mut c = private.git(&self.worktree, &index);
        c.args([
            "diff-tree",
            "-p",
            "--binary",
            "--full-index",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            &self.tree_after_mutation,
            &after,
        ]);
        let (diff, files_changed, too_large) = match run_capped(c, max_diff_bytes)? {
            Capped::Whole(diff) => {
                // One "diff --git " header per file (no content line can start with it:
                // content lines start with ' ', '+', '-', and binary lines with a base85
                // length letter).
                let n = diff
                    .split(|b| *b == b'\n')
                    .filter(|l| l.starts_with(b"diff --git "))
                    .count();
                (diff, n, None)
            }
            Capped::Over { read } => {
                // The files it touches, without their contents.
                let mut c = private.git(&self.worktree, &index);
                c.args([
                    "diff-tree",
                    "-r",
                    "-z",
                    "--name-only",
                    "--no-renames",
                    &self.tree_after_mutation,
                    &after,
                ]);
                let names = run(c);
                let n = names.map_or(0, |o| {
                    o.split(|b| *b == 0).filter(|n| !n.is_empty()).count()
                });
                (Vec::new(), n, Some(read))
            }
        };
        Ok(Collected {
            tree_after_agent: after,
            diff,
            files_changed: u32::try_from(files_changed).unwrap_or(u32::MAX),
            too_large,
            not_collected,
        })
    }

    /// Applies a recorded agent diff on top of the post-mutation tree (rebuilding the agent's
    /// work on any host, any time later).
    pub fn apply_diff(&self, diff: &Path) -> Result<(), WorkspaceError> {
        self.apply(diff, false)
    }

    /// Takes back a part of a diff applied with [`Workspace::apply_diff`] (`git apply -R`):
    /// grading withholds the paths that steer the grader.
    pub fn unapply_diff(&self, diff: &Path) -> Result<(), WorkspaceError> {
        self.apply(diff, true)
    }

    fn apply(&self, diff: &Path, reverse: bool) -> Result<(), WorkspaceError> {
        let private = Private::create(&self.root.join("apply.objects"), &self.baseline)?;
        let mut c = private.git(&self.worktree, &self.root.join("apply.index"));
        c.args(["apply", "--binary", "--whitespace=nowarn"]);
        if reverse {
            c.arg("-R");
        }
        c.arg("--").arg(diff);
        let result = run(c);
        private.remove();
        let _ = std::fs::remove_file(self.root.join("apply.index"));
        result?;
        Ok(())
    }

    /// Moves the worktree (a self-contained repository) to `dest` (inside the run directory,
    /// so a kept workspace travels with its record) and removes the rest of the attempt folder.
    pub fn keep_at(&self, _cache: &MirrorCache, dest: &Path) -> Result<(), WorkspaceError> {
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::rename(&self.worktree, dest).map_err(io(dest))?;
        make_writable(&self.root);
        std::fs::remove_dir_all(&self.root).map_err(io(&self.root))
    }

    /// Replaces the `.git` of a worktree kept at `dest` with a fresh copy of the baseline
    /// repository: the agent's commits, objects, reflogs and config go (git stores objects
    /// compressed, where a credential value cannot be found and scrubbed), its files stay,
    /// and `git status` / `git diff` in the kept folder still show its work against the
    /// baseline. Used when the attempt's credentials must be scrubbed from what is kept.
    pub fn reset_kept_history(&self, dest: &Path) -> Result<(), WorkspaceError> {
        let dot_git = dest.join(".git");
        make_writable(&dot_git);
        match std::fs::symlink_metadata(&dot_git) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&dot_git).map_err(io(&dot_git))?,
            Ok(_) => std::fs::remove_file(&dot_git).map_err(io(&dot_git))?,
            Err(_) => {}
        }
        copy_repo(&self.baseline.repo, &dot_git).map_err(io(&dot_git))
    }

    /// Removes the attempt folder (worktree, home, private repositories).
    pub fn remove(&self, _cache: &MirrorCache) -> Result<(), WorkspaceError> {
        make_writable(&self.root);
        std::fs::remove_dir_all(&self.root).map_err(io(&self.root))
    }
}

/// Copies an index file keeping its modification time: git trusts an entry's stat data only
/// when the file is older than the index, so a copy with a later time would hide a change
/// made in the same second as the checkout.
fn copy_index(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to)?;
    let modified = std::fs::metadata(from)?.modified()?;
    std::fs::File::options()
        .write(true)
        .open(to)?
        .set_modified(modified)
}

/// Gives the owner write permission on every folder under `root`, so that a tree an agent
/// made read-only can still be removed.
fn make_writable(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return;
    };
    if meta.is_dir() {
        let mode = meta.permissions().mode();
        if mode & 0o700 != 0o700 {
            let _ = std::fs::set_permissions(root, std::fs::Permissions::from_mode(mode | 0o700));
        }
        if let Ok(rd) = std::fs::read_dir(root) {
            for e in rd.flatten() {
                make_writable(&e.path());
            }
        }
    }
}

/// `git add --all` of a work tree's files as they are (tracked and untracked, ignored files
/// excluded) into `index` (first made from `base_tree` when given, else used as it is),
/// with what git cannot record set aside in `aside` (a folder next to the work tree, on its
/// file system) meanwhile; returns what was set aside.
fn add_all(
    private: &Private,
    worktree: &Path,
    base_tree: Option<&str>,
    index: &Path,
    aside: &Path,
) -> Result<Vec<(Vec<u8>, Why)>, WorkspaceError> {
    if let Some(tree) = base_tree {
        let _ = std::fs::remove_file(index);
        let mut c = private.git(worktree, index);
        c.args(["read-tree", tree]);
        run(c)?;
    }
    let set = set_aside::set_aside(worktree, aside).map_err(|e| match e {
        set_aside::Refusal::AgentLeft { .. } => WorkspaceError::AgentLeft(e.to_string()),
        set_aside::Refusal::Io { path, source } => WorkspaceError::Io { path, source },
    })?;
    let mut c = private.git(worktree, index);
    c.args(["add", "--all", "--", "."]);
    let added = run(c);
    let entries = set.restore();
    match added {
        Ok(_) => Ok(entries),
        Err(e) => Err(blame_add(private, worktree, e)),
    }
}

/// Whose fault a failed `git add` of the agent's worktree is: the host's when git cannot
/// start, the disk is full, or git fails here on a tiny object of its own too; else what
/// the agent left (a state git refuses that the rule of [`akbench_core::uncollectable`]
/// does not know), named by git's message.
fn blame_add(private: &Private, worktree: &Path, e: GitError) -> WorkspaceError {
    let host = [
        "cannot start git",
        "No space left",
        "Disk quota exceeded",
        "Read-only file system",
        "Cannot allocate memory",
        "Out of memory",
    ];
    if host.iter().any(|h| e.detail.contains(h)) {
        return e.into();
    }
    let mut probe = private.git(worktree, Path::new("/dev/null"));
    probe.args(["hash-object", "-w", "--stdin"]);
    match crate::git::run_with_input(
        probe,
        b"akbench: can git write here?\n",
        std::process::Stdio::piped(),
    ) {
        Ok(_) => WorkspaceError::AgentLeft(format!(
            "git cannot record what the agent left in its worktree: {}",
            e.detail
        )),
        Err(_) => e.into(),
    }
}

/// The tree id of a work tree as it is (see [`Workspace::collect`]), read through a private
/// repository made under `scratch` that borrows the baseline's objects: the work tree's own
/// `.git` is never read.
pub fn fingerprint(
    worktree: &Path,
    baseline: &Baseline,
    scratch: &Path,
) -> Result<String, WorkspaceError> {
    let private = Private::create(&scratch.join("fp.objects"), baseline)?;
    let index = scratch.join("fp.index");
    // Next to the work tree, on its file system (entries are moved there, not copied).
    let mut aside = worktree.as_os_str().to_owned();
    aside.push(".aside");
    let result = add_all(
        &private,
        worktree,
        Some(&baseline.tree),
        &index,
        Path::new(&aside),
    )
    .and_then(|_| {
        let mut c = private.git(worktree, &index);
        c.arg("write-tree");
        Ok(run_text(c)?)
    });
    private.remove();
    let _ = std::fs::remove_file(&index);
    result
}

/// The tree id of a commit in a repository (found from the folder `repo`; for tests and
/// tools on repositories the worker trusts).
pub fn tree_of(repo: &Path, commit: &str) -> Result<String, GitError> {
    let mut c = crate::git::git(Some(repo));
    c.args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{commit}^{{tree}}"));
    run_text(c)
}

#[cfg(test)]
mod tests;
