//! The user namespaces a worker that is not root makes for the `container` runtime, and the
//! probe that says whether this kernel lets it.
//!
//! A root worker mounts a container's overlay in the host's user namespace and writes the
//! maps of the container's user namespace itself (`newuidmap`'s part). A worker that is not
//! root has neither privilege, so its child first makes a user namespace of its own
//! ([`OwnMaps`]: its uid and gid mapped onto themselves, `setgroups` denied first, as the
//! kernel requires of an unprivileged writer). As that namespace's owner the child holds
//! every capability in it, which is enough to make a mount namespace and mount overlayfs
//! there (Linux 5.11 and later), and, for a shared environment
//! ([`super::shared::Env::exec`]), to enter the namespaces bwrap made below it. Only one id
//! is mapped: every file of the image is the worker's, shown inside as the image's user,
//! and no other user exists inside (a task naming `[agent] user` or `[verifier] user`
//! needs a root worker).
//!
//! Everything here that runs between fork and exec ([`OwnMaps::write`]) uses only
//! async-signal-safe system calls on bytes prepared before the fork.

use std::ffi::CStr;
use std::sync::OnceLock;

/// The id maps a child writes for the user namespace it just made (prepared before fork).
#[derive(Debug, Clone)]
pub struct OwnMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl OwnMaps {
    /// The worker's uid and gid mapped onto themselves.
    pub fn identity() -> OwnMaps {
        // SAFETY: geteuid/getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        OwnMaps::to((uid, gid), (uid, gid))
    }

    /// `inside` (uid, gid) mapped to the worker's `outside` ids in the parent namespace.
    pub fn to(inside: (u32, u32), outside: (u32, u32)) -> OwnMaps {
        OwnMaps {
            uid_map: format!("{} {} 1\n", inside.0, outside.0).into_bytes(),
            gid_map: format!("{} {} 1\n", inside.1, outside.1).into_bytes(),
        }
    }

    /// Writes `setgroups` (`deny`), `gid_map` and `uid_map` in the `/proc` folder `proc`
    /// (resolved from the descriptor `dir`, or `AT_FDCWD`) of the calling process, which just
    /// made its user namespace.
    ///
    /// # Safety
    /// Between fork and exec: only async-signal-safe calls, nothing allocated.
    #[allow(unsafe_op_in_unsafe_fn)]
    pub unsafe fn write(&self, dir: i32, proc: *const libc::c_char) -> std::io::Result<()> {
        let base = libc::openat(
            dir,
            proc,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if base < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let r = write_at(base, c"setgroups", b"deny")
            .and_then(|_| write_at(base, c"gid_map", &self.gid_map))
            .and_then(|_| write_at(base, c"uid_map", &self.uid_map));
        libc::close(base);
        r
    }
}

/// Writes `bytes` to the file `name` below the folder descriptor `dir`.
///
/// # Safety
/// Async-signal-safe calls only.
#[allow(unsafe_op_in_unsafe_fn)]
pub unsafe fn write_at(dir: i32, name: &CStr, bytes: &[u8]) -> std::io::Result<()> {
    let fd = libc::openat(dir, name.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    let e = std::io::Error::last_os_error();
    libc::close(fd);
    if n != bytes.len() as isize {
        return Err(e);
    }
    Ok(())
}

/// A detached copy of the folder tree at `path` (read-only when `ro`) as a descriptor, or
/// -1 with `errno` set.
///
/// # Safety
/// Async-signal-safe calls only; `path` NUL-terminated.
#[allow(unsafe_op_in_unsafe_fn)]
pub unsafe fn clone_tree(path: *const libc::c_char, ro: bool) -> i32 {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let fd = libc::syscall(
        libc::SYS_open_tree,
        libc::AT_FDCWD,
        path,
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint,
    ) as i32;
    if fd < 0 || !ro {
        return fd;
    }
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    if libc::syscall(
        libc::SYS_mount_setattr,
        fd,
        c"".as_ptr(),
        libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
        &attr as *const MountAttr,
        std::mem::size_of::<MountAttr>(),
    ) != 0
    {
        let e = *libc::__errno_location();
        libc::close(fd);
        *libc::__errno_location() = e;
        return -1;
    }
    fd
}

/// Attaches the detached tree `tree` at the last of `folders` (the path's folders,
/// shortest first), making the missing ones (mode 0755) in the current mount namespace.
///
/// # Safety
/// Async-signal-safe calls only; the strings NUL-terminated.
#[allow(unsafe_op_in_unsafe_fn)]
pub unsafe fn attach(tree: i32, folders: &[std::ffi::CString]) -> std::io::Result<()> {
    for f in folders {
        if libc::mkdir(f.as_ptr(), 0o755) != 0 && *libc::__errno_location() != libc::EEXIST {
            return Err(std::io::Error::last_os_error());
        }
    }
    let Some(at) = folders.last() else {
        return Ok(());
    };
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
    if libc::syscall(
        libc::SYS_move_mount,
        tree,
        c"".as_ptr(),
        libc::AT_FDCWD,
        at.as_ptr(),
        MOVE_MOUNT_F_EMPTY_PATH,
    ) != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a worker that is not root can run the `container` runtime here: a child makes a
/// user namespace of its own and mounts an overlay in it (probed once per process); the
/// error names the kernel feature and the fix.
pub fn probe_overlay() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(try_overlay).clone()
}

fn try_overlay() -> Result<(), String> {
    let why = |e: String| {
        format!(
            "a worker that is not root mounts each container's copy-on-write overlay inside a user namespace of its own, and that failed here ({e}); it needs Linux 5.11 or later (overlayfs in user namespaces) and unprivileged user namespaces; fix: run the worker on such a kernel, run it as root, or choose `runtime: sandbox`"
        )
    };
    let d = std::env::temp_dir().join(format!(
        "akbench-overlay-probe-{}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    ));
    let made = try_overlay_in(&d, &why);
    let _ = std::fs::remove_dir_all(&d);
    made
}

fn try_overlay_in(d: &std::path::Path, why: &dyn Fn(String) -> String) -> Result<(), String> {
    for f in ["lower", "upper", "work", "root"] {
        std::fs::create_dir_all(d.join(f))
            .map_err(|e| why(format!("cannot make {}: {e}", d.join(f).display())))?;
    }
    let mut mount = super::container::OverlayMount::new(
        &d.join("lower"),
        &d.join("upper"),
        &d.join("work"),
        &d.join("root"),
        None,
    )
    .map_err(why)?;
    mount.in_own_userns();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", ": > \"$0\"/made"])
        .arg(d.join("root"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    mount.install(&mut cmd);
    let out = cmd.output().map_err(|e| why(e.to_string()))?;
    if !out.status.success() {
        return Err(why(format!(
            "the probe's shell ended {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    if !d.join("upper/made").exists() {
        return Err(why(
            "a file written over the overlay is not in its upper folder".into(),
        ));
    }
    Ok(())
}
