//! Workspaces: a detached worktree of the pinned commit with the mutation applied, a private
//! agent home outside it, fingerprints and the agent's diff.
//!
//! The post-mutation tree is committed as a parentless "task baseline" commit checked out
//! detached, so the agent starts from a clean tree whose history does not show the mutation.
//! Fingerprints are git tree ids: `tree_after_mutation` at creation, `tree_after_agent` at
//! COLLECTING, computed through a private index so the agent's own index is never touched.

use crate::git::{git, run, run_text, GitError};
use crate::mirror::{MirrorCache, MirrorError};
use akbench_core::task::Task;
use std::path::{Path, PathBuf};

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

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A created workspace.
#[derive(Debug)]
pub struct Workspace {
    /// The mirror the worktree belongs to.
    pub mirror: PathBuf,
    /// Folder holding everything of this attempt that is not an artifact.
    pub root: PathBuf,
    /// The worktree (the agent's cwd).
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
}

/// What the agent left.
#[derive(Debug, Clone)]
pub struct Collected {
    /// Tree id of the worktree as left (tracked and untracked, ignored files excluded).
    pub tree_after_agent: String,
    /// `git diff` from the post-mutation tree to that tree, binary-safe.
    pub diff: Vec<u8>,
    /// Number of files the diff touches.
    pub files_changed: u32,
}

impl Workspace {
    /// Creates the workspace for `task` under `root` (which must not exist yet).
    pub fn create(
        cache: &MirrorCache,
        task: &Task,
        root: &Path,
        apply_mutation: bool,
    ) -> Result<Workspace, WorkspaceError> {
        std::fs::create_dir_all(root).map_err(io(root))?;
        let worktree = root.join("ws");
        let home = root.join("home");
        std::fs::create_dir_all(home.join("tmp")).map_err(io(&home))?;
        let mirror = cache.path_for(&task.repo);
        {
            let lock = cache.lock(&mirror)?;
            cache.ensure(&task.repo, &task.commit, &lock)?;
            let mut c = git(Some(&mirror));
            c.args(["worktree", "add", "--quiet", "--detach", "--"])
                .arg(&worktree)
                .arg(&task.commit);
            run(c)?;
        }
        let mut mutation_applied = false;
        if let (true, Some((patch, _))) = (apply_mutation, &task.mutation) {
            let mut c = git(Some(&worktree));
            c.args(["apply", "--whitespace=nowarn", "--"]).arg(patch);
            run(c).map_err(|e| WorkspaceError::MutationDoesNotApply {
                patch: patch.clone(),
                commit: task.commit.clone(),
                detail: e.detail,
            })?;
            mutation_applied = true;
        }
        let mut c = git(Some(&worktree));
        c.args(["add", "--all", "--force", "--", "."]);
        run(c)?;
        let mut c = git(Some(&worktree));
        c.arg("write-tree");
        let tree = run_text(c)?;
        let mut c = git(Some(&worktree));
        c.args(["commit-tree", "-m", "task baseline", &tree]);
        let baseline = run_text(c)?;
        let mut c = git(Some(&worktree));
        c.args(["update-ref", "--no-deref", "HEAD", &baseline]);
        run(c)?;
        Ok(Workspace {
            mirror,
            root: root.to_path_buf(),
            worktree,
            home,
            base_commit: task.commit.clone(),
            baseline_commit: baseline,
            tree_after_mutation: tree,
            mutation_applied,
        })
    }

    /// Reads what the agent left: fingerprint and diff against the post-mutation tree,
    /// new files included, through a private index.
    pub fn collect(&self) -> Result<Collected, WorkspaceError> {
        let after = fingerprint(
            &self.worktree,
            &self.tree_after_mutation,
            &self.root.join("collect.index"),
        )?;
        let mut c = git(Some(&self.worktree));
        c.args([
            "diff-tree",
            "-p",
            "--binary",
            "--full-index",
            "--no-renames",
            &self.tree_after_mutation,
            &after,
        ]);
        let diff = run(c)?;
        let mut c = git(Some(&self.worktree));
        c.args([
            "diff-tree",
            "-r",
            "--name-only",
            "--no-renames",
            &self.tree_after_mutation,
            &after,
        ]);
        let files_changed = run_text(c)?.lines().filter(|l| !l.is_empty()).count();
        Ok(Collected {
            tree_after_agent: after,
            diff,
            files_changed: u32::try_from(files_changed).unwrap_or(u32::MAX),
        })
    }

    /// Applies a recorded agent diff on top of the post-mutation tree (rebuilding the agent's
    /// work on any host, any time later).
    pub fn apply_diff(&self, diff: &Path) -> Result<(), WorkspaceError> {
        let mut c = git(Some(&self.worktree));
        c.args(["apply", "--binary", "--whitespace=nowarn", "--"])
            .arg(diff);
        run(c)?;
        Ok(())
    }

    /// Moves the worktree to `dest` (inside the run directory, so a kept workspace travels
    /// with its record) and removes the rest of the attempt folder.
    pub fn keep_at(&self, cache: &MirrorCache, dest: &Path) -> Result<(), WorkspaceError> {
        {
            let _lock = cache.lock(&self.mirror)?;
            let mut c = git(Some(&self.mirror));
            c.args(["worktree", "move", "--"])
                .arg(&self.worktree)
                .arg(dest);
            run(c)?;
        }
        make_writable(&self.root);
        std::fs::remove_dir_all(&self.root).map_err(io(&self.root))
    }

    /// Removes the worktree (and prunes the mirror's worktree list) and the attempt folder.
    pub fn remove(&self, cache: &MirrorCache) -> Result<(), WorkspaceError> {
        let result = {
            let _lock = cache.lock(&self.mirror)?;
            let mut c = git(Some(&self.mirror));
            c.args(["worktree", "remove", "--force", "--force", "--"])
                .arg(&self.worktree);
            let r = run(c);
            let mut c = git(Some(&self.mirror));
            c.args(["worktree", "prune"]);
            let _ = run(c);
            r
        };
        make_writable(&self.root);
        std::fs::remove_dir_all(&self.root).map_err(io(&self.root))?;
        result.map(|_| ()).or_else(|e| {
            // The folder is gone; a failed `worktree remove` was repaired by the prune.
            if self.worktree.exists() {
                Err(e.into())
            } else {
                Ok(())
            }
        })
    }
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

/// The tree id of a worktree's files as they are (tracked and untracked, ignored files
/// excluded), computed through a private index seeded with `base_tree` so the worktree's own
/// index is never touched.
pub fn fingerprint(worktree: &Path, base_tree: &str, index: &Path) -> Result<String, GitError> {
    let _ = std::fs::remove_file(index);
    let with_index = |args: &[&str]| {
        let mut c = git(Some(worktree));
        c.env("GIT_INDEX_FILE", index).args(args);
        c
    };
    let result = run(with_index(&["read-tree", base_tree]))
        .and_then(|_| run(with_index(&["add", "--all", "--", "."])))
        .and_then(|_| run_text(with_index(&["write-tree"])));
    let _ = std::fs::remove_file(index);
    result
}

/// The tree id of a commit in a repository.
pub fn tree_of(repo: &Path, commit: &str) -> Result<String, GitError> {
    let mut c = git(Some(repo));
    c.args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{commit}^{{tree}}"));
    run_text(c)
}
