//! The escape suite again with the worker as an unprivileged user (the Kubernetes worker's
//! case): [`rerun_suite`] re-executes the running test binary, every test but the caller,
//! as uid and gid [`UID`] with no supplementary groups and a cgroup delegated to it, so
//! the sandbox runs in an unprivileged user namespace of that user instead of dropping a
//! root worker's privileges with `setpriv`.
//!
//! What it needs, named when missing (`core::testkit::skip`: a failure under
//! `AKBENCH_REQUIRE_ALL_TESTS`): root to switch user; user namespaces for unprivileged users
//! (`user.max_user_namespaces` > 0, no `kernel.unprivileged_userns_clone = 0`, no AppArmor
//! `kernel.apparmor_restrict_unprivileged_userns = 1`: the sandbox's own probe names these);
//! a cgroup hierarchy to delegate (v1 memory, pids and cpu below this process's group, or a
//! v2 group); and every program the tests run (git, python3, cargo) reachable by that user.
//! A test the child skipped makes this one skip too, saying which.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The unprivileged worker's uid and gid (`nobody`).
pub const UID: u32 = 65534;

/// `common::in_container::IMAGE_ENV`, `IMAGES_ENV` and `SKIP_ENV` (this file is also included
/// alone).
const CONTAINER_IMAGE_ENV: &str = "AKBENCH_TEST_CONTAINER_IMAGE";
const CONTAINER_IMAGES_ENV: &str = "AKBENCH_TEST_CONTAINER_IMAGES";
const CONTAINER_SKIP_ENV: &str = "AKBENCH_TEST_CONTAINER_SKIP";

/// True in the container rerun's child (`common::in_container`).
fn in_a_container() -> bool {
    std::env::var(CONTAINER_IMAGE_ENV).is_ok_and(|v| !v.is_empty())
}

/// Set in the re-executed child, so it does not re-execute again.
const CHILD: &str = "AKBENCH_UNPRIVILEGED_WORKER_CHILD";

/// True in the re-executed child (the worker is [`UID`]).
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Folders delegated to `uid` below this process's own groups: v1 `memory`, `pids` and `cpu`
/// (the folder and its files), else one v2 group; `None` where neither can be made.
pub fn delegate_cgroup(uid: u32) -> Option<Vec<PathBuf>> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let name = format!("akbench-nonroot-{}", uuid::Uuid::now_v7().simple());
    let chown_all = |d: &Path| -> Option<()> {
        std::os::unix::fs::chown(d, Some(uid), Some(uid)).ok()?;
        for e in std::fs::read_dir(d).ok()?.flatten() {
            let _ = std::os::unix::fs::chown(e.path(), Some(uid), Some(uid));
        }
        Some(())
    };
    let root = Path::new("/sys/fs/cgroup");
    if root.join("memory/cgroup.procs").exists() {
        let mut dirs = Vec::new();
        for c in ["memory", "pids", "cpu"] {
            let base = root.join(c);
            let path = akbench_worker::runtime::cgroup::own_path(&own, c)?;
            let d = base.join(path.trim_start_matches('/')).join(&name);
            std::fs::create_dir(&d).ok()?;
            dirs.push(d.clone());
            chown_all(&d)?;
        }
        return Some(dirs);
    }
    let path = akbench_worker::runtime::cgroup::own_path(&own, "")?;
    let d = root.join(path.trim_start_matches('/')).join(&name);
    std::fs::create_dir(&d).ok()?;
    chown_all(&d)?;
    Some(vec![d])
}

/// The first folder on the way to `program` (found on `PATH`) that `uid` (not in the
/// owner's group) may not enter, or the program itself when it may not run it; `None` when
/// it can, or when the program is not installed.
fn unreachable_by_others(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())?;
    let mut at = PathBuf::from("/");
    for part in found.components().skip(1) {
        at.push(part);
        let mode = std::fs::metadata(&at).ok()?.permissions().mode();
        if mode & 0o001 == 0 {
            return Some(at);
        }
    }
    None
}

/// Re-executes this test binary, every test but `this` and `also_skip` (tests about
/// switching users themselves), with the worker as [`UID`]; fails with the child's output
/// when a test failed there. Call it from a test named `this`.
pub fn rerun_suite(this: &str, also_skip: &[&str]) {
    if is_child() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        akbench_core::testkit::skip(this, "needs root to start the worker as another user");
        return;
    }
    for program in ["git", "python3", "cargo", "bwrap"] {
        if let Some(blocked) = unreachable_by_others(program) {
            akbench_core::testkit::skip(
                this,
                &format!(
                    "`{program}` is not reachable by uid {UID}: {} may not be entered by other users; fix: `chmod o+x {}` (.ci/run does it for $HOME)",
                    blocked.display(),
                    blocked.display()
                ),
            );
            return;
        }
    }
    let Some(groups) = delegate_cgroup(UID) else {
        akbench_core::testkit::skip(
            this,
            "no cgroup hierarchy to delegate to the unprivileged worker (v1 memory/pids/cpu or v2 below this process's group)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // Under the container rerun: the unprivileged worker's own image cache (the root
    // worker's is root's), shared by its tests.
    if in_a_container() {
        let images = dir.path().join("images");
        std::fs::create_dir(&images).unwrap();
        std::os::unix::fs::chown(&images, Some(UID), Some(UID)).unwrap();
    }
    let procs: Vec<std::ffi::CString> = groups
        .iter()
        .map(|d| {
            std::ffi::CString::new(d.join("cgroup.procs").as_os_str().as_encoded_bytes()).unwrap()
        })
        .collect();
    // One process per test, as nextest runs them (a test may set process-wide state, e.g.
    // the worker's shutdown flag).
    // Inside the container rerun, what does not apply in a container is skipped here too.
    let in_container_skip = std::env::var(CONTAINER_SKIP_ENV).unwrap_or_default();
    let mut skip: Vec<&str> = also_skip.to_vec();
    if in_a_container() {
        skip.extend(in_container_skip.split(',').filter(|t| !t.is_empty()));
    }
    let tests = super::rerun::listed(this, &skip);
    let mut failed = Vec::new();
    let mut text = String::new();
    for test in &tests {
        let out = as_worker_user(test, dir.path(), &procs).output().unwrap();
        let t = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() || !t.contains("1 passed; 0 failed") {
            failed.push(test.clone());
        }
        text.push_str(&t);
    }
    for d in groups.iter().rev() {
        // The runtime's own parent group below it, then the delegated one.
        let _ = std::fs::remove_dir(d.join("akbench"));
        let _ = std::fs::remove_dir(d);
    }
    super::rerun::conclude(
        this,
        &format!("with the worker as uid {UID}"),
        &text,
        &failed,
    );
}

/// This test binary running `test` alone as [`UID`], in the delegated cgroup (`procs`: its
/// `cgroup.procs` files), with `dir` as its home and temporary folder.
fn as_worker_user(test: &str, dir: &Path, procs: &[std::ffi::CString]) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture"])
        .env_clear()
        .env(CHILD, "1")
        .env("HOME", dir)
        .env("TMPDIR", dir)
        .current_dir(dir);
    for var in [
        "PATH",
        "RUSTUP_HOME",
        "CARGO_HOME",
        "RUSTUP_TOOLCHAIN",
        "PYENV_ROOT",
        "PYENV_VERSION",
        // What a test expects in the worker's own environment (escape_runtime's
        // reading_the_workers_environment_fails looks for it from inside).
        "CARGO_MANIFEST_DIR",
        akbench_core::testkit::REQUIRE_ALL_TESTS_ENV,
        // Under the container rerun (common::in_container): the image and its registry.
        CONTAINER_IMAGE_ENV,
        "AKBENCH_INSECURE_REGISTRIES",
    ] {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
    if in_a_container() {
        cmd.env(CONTAINER_IMAGES_ENV, dir.join("images"));
    }
    // The child's HOME is a fresh folder: the toolchain homes the worker would find under
    // its own HOME are named instead, as a deployment's worker environment does.
    if let Some(home) = std::env::var_os("HOME") {
        for (var, sub) in [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")] {
            let p = Path::new(&home).join(sub);
            if std::env::var_os(var).is_none() && p.is_dir() {
                cmd.env(var, p);
            }
        }
    }
    let procs = procs.to_vec();
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls (open, write, close, setgroups, setgid, setuid)
    // on data made before fork.
    unsafe {
        cmd.pre_exec(move || {
            for p in &procs {
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
            }
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(UID) != 0
                || libc::setuid(UID) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}
