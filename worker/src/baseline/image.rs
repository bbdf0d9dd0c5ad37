//! The baseline of an image-only task (no `[source]`): the files of its image's working
//! folder, committed as one parentless "task baseline" commit, so the diff, withheld and
//! grading paths are those of every other task. Built once per image digest and working
//! folder, from the unpacked, digest-pinned image (never from a tag, never from what an
//! agent changed); the folder is found inside the image's root as the image sees it
//! (symbolic links followed inside the root, never out of it).
//!
//! What the commit holds is what git keeps: regular files (with their executable bit) and
//! symbolic links. Owners, other modes, empty folders and nested `.git` folders are not
//! kept; a folder missing from the image gives an empty baseline.

use super::{init_repo, io, seal, Baseline, BaselineError, REPO_CONFIG};
use crate::git::{git_at, run};
use crate::mirror::MirrorCache;
use crate::runtime::container::Image;
use akbench_core::task::Task;
use sha2::{Digest, Sha256};
use std::path::Path;

/// The cache key of the baseline made from `image`'s working folder.
pub fn key(image: &Image) -> String {
    let mut h = Sha256::new();
    h.update(b"akbench-baseline-image-v1\0");
    h.update(image.pinned.as_bytes());
    h.update(b"\0");
    h.update(image.workdir.as_bytes());
    hex::encode(h.finalize())[..32].to_string()
}

impl MirrorCache {
    /// The baseline of the image-only `task`: its image's working folder.
    pub(super) fn image_baseline(
        &self,
        task: &Task,
        image: Option<&Image>,
    ) -> Result<Baseline, BaselineError> {
        let Some(image) = image else {
            return Err(BaselineError::Image {
                task: task.release.id.clone(),
                problem: "it has no [source]: its workspace is its image's working folder, and no image was given (it runs under the `container` runtime only); fix: run it with `runtime: container`".into(),
            });
        };
        let dir = self.baselines_root().join(key(image));
        self.cached(&dir, |tmp| build(task, image, tmp))
    }
}

/// Builds the baseline of `image`'s working folder under `tmp`.
fn build(task: &Task, image: &Image, tmp: &Path) -> Result<(), BaselineError> {
    let refused = |problem: String| BaselineError::Image {
        task: task.release.id.clone(),
        problem,
    };
    let rel = Path::new(image.workdir.trim_start_matches('/'));
    let inside = crate::root_path::resolve(&image.rootfs, rel).map_err(|e| {
        refused(format!(
            "the working folder {} of {} cannot be found in the image: {e}",
            image.workdir, image.pinned
        ))
    })?;
    let folder = image.rootfs.join(inside);
    let scratch = tmp.join("build.git");
    init_repo(&scratch, "ref: refs/heads/main", REPO_CONFIG).map_err(io(tmp))?;
    let index = tmp.join("build.index");
    match std::fs::symlink_metadata(&folder) {
        Ok(m) if m.is_dir() => {
            // Every file, also those a `.gitignore` of the image names: the workspace is
            // the folder as the image has it.
            let mut c = git_at(&scratch, Some(&folder));
            c.env("GIT_INDEX_FILE", &index)
                .args(["add", "--all", "--force", "--", "."]);
            run(c)?;
        }
        Ok(_) => {
            return Err(refused(format!(
                "the working folder {} of {} is not a folder in the image; fix: set `[environment] workdir` to a folder of the image",
                image.workdir, image.pinned
            )))
        }
        // Not in the image: the agent starts in an empty folder there.
        Err(_) => {}
    }
    let on_build = || {
        let mut c = git_at(&scratch, None);
        c.env("GIT_INDEX_FILE", &index);
        c
    };
    seal(tmp, &scratch, &index, &on_build)
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::image::manifest::RunConfig;

    fn image(rootfs: &Path, workdir: &str) -> Image {
        Image {
            pinned: format!("reg.example/t@sha256:{}", "0".repeat(64)),
            rootfs: rootfs.to_path_buf(),
            run: RunConfig::default(),
            workdir: workdir.into(),
            user: (0, 0),
        }
    }

    fn task(root: &Path) -> Task {
        let dir = root.join("tasks/img");
        std::fs::create_dir_all(dir.join("tests")).unwrap();
        std::fs::write(
            dir.join("task.toml"),
            "version = \"1\"\n[environment]\nimage = \"reg.example/t:1\"\n",
        )
        .unwrap();
        std::fs::write(dir.join("instruction.md"), "Fix it.\n").unwrap();
        std::fs::write(dir.join("tests/test.sh"), "exit 0\n").unwrap();
        Task::load(&dir, &root.join("tasks")).unwrap()
    }

    /// The paths of `tree` in the baseline repository.
    fn files(b: &Baseline) -> Vec<String> {
        let mut c = git_at(&b.repo, None);
        c.args(["ls-tree", "-r", "--name-only", &b.tree]);
        String::from_utf8(run(c).unwrap())
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_baseline_is_the_images_working_folder_as_the_image_sees_it() {
        let tmp = tempfile::tempdir().unwrap();
        let task = task(tmp.path());
        let cache = MirrorCache::new(tmp.path().join("cache"));
        // Without its image an image-only task has no baseline (refused, naming the fix).
        let e = cache.baseline(&task, true).unwrap_err().to_string();
        assert!(e.contains("`img`") && e.contains("container"), "{e}");
        // /app is a link to /srv/app: followed inside the root, never to the host's /srv.
        // A file the image's .gitignore names is kept: the folder as the image has it.
        let root = tmp.path().join("rootfs");
        std::fs::create_dir_all(root.join("srv/app/pkg")).unwrap();
        std::fs::write(root.join("srv/app/main.py"), "print(1)\n").unwrap();
        std::fs::write(root.join("srv/app/pkg/build.log"), "kept\n").unwrap();
        std::fs::write(root.join("srv/app/.gitignore"), "*.log\n").unwrap();
        std::os::unix::fs::symlink("/srv/app", root.join("app")).unwrap();
        let b = cache
            .baseline_in(&task, true, Some(&image(&root, "/app")))
            .unwrap();
        assert_eq!(files(&b), [".gitignore", "main.py", "pkg/build.log"]);
        // One parentless commit; built once per image and folder.
        let mut c = git_at(&b.repo, None);
        c.args(["rev-list", "--parents", "-n", "1", &b.commit]);
        let line = String::from_utf8(run(c).unwrap()).unwrap();
        assert_eq!(line.split_whitespace().count(), 1, "{line}");
        let again = cache
            .baseline_in(&task, true, Some(&image(&root, "/app")))
            .unwrap();
        assert_eq!(
            (again.commit, again.repo),
            (b.commit.clone(), b.repo.clone())
        );
        // A link that climbs out of the root stays in it: /work -> ../../.. is the root.
        std::os::unix::fs::symlink("../../..", root.join("work")).unwrap();
        let b = cache
            .baseline_in(&task, true, Some(&image(&root, "/work/srv/app")))
            .unwrap();
        assert_eq!(files(&b), [".gitignore", "main.py", "pkg/build.log"]);
        // A folder the image lacks: an empty start.
        let b = cache
            .baseline_in(&task, true, Some(&image(&root, "/nowhere")))
            .unwrap();
        assert!(files(&b).is_empty());
        // A file where the folder should be: refused.
        let e = cache
            .baseline_in(&task, true, Some(&image(&root, "/srv/app/main.py")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a folder"), "{e}");
    }
}
