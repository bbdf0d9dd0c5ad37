//! The `container` runtime: the `sandbox` runtime's bubblewrap, namespaces, seccomp filter,
//! cgroup limits and unprivileged user, over a task's image instead of the host's system
//! folders.
//!
//! The image (unpacked once by [`crate::image::Store`]) is the lower layer of an overlay
//! whose upper layer is a folder of this process only; the overlay is mounted in a private
//! mount namespace the child makes before it starts bwrap ([`OverlayMount`]), so it is
//! gone with the process and no mount is ever left on the host. bwrap binds it as `/`:
//! writes anywhere land in the upper folder, removed with the attempt; the cached image
//! never changes. Inside: the image's environment (its `PATH`, never the host's
//! toolchain), the workspace at the task's folder (`environment.workdir`, else the image's
//! working directory, else `/app`), `/logs/agent`, `/logs/artifacts` (the agent) or
//! `/logs/verifier` (grading) as Harbor defines them, a fresh `/proc`, `/dev`, private
//! `/tmp` and `/dev/shm`. bwrap 0.8 (this host's) has no `--overlay`, and the overlay is
//! mounted by the worker, so the runtime needs a root worker.
//!
//! Who runs inside: after the mount the child becomes the sandbox user (setgroups,
//! setresgid, setresuid, `no_new_privs`) and only then execs bwrap, which enters a user
//! namespace made for this start ([`user_namespace`]) mapping that host user to the
//! image's user (`User`, default root) and every other id to a range of subordinate host
//! ids ([`super::subids`]): the process is uid 0 (or the image's uid) inside, with
//! [`ROOT_CAPS`] within that namespace only (so apt, dpkg and `adduser` may change user and
//! owner), and the unprivileged sandbox user outside. The unpacked image is the worker's (root's), in
//! folders only the worker can enter, so nothing running as a sandbox user on the host can
//! change what a later trial runs or grades with; the overlay's lower layer is an idmapped
//! mount of it that shows the worker's files as the sandbox user's, so the image's
//! root-owned files are the process's own, as in the image. No program of the image or the
//! host (such as `setpriv`) is needed for the drop.

use super::bwrap::{self, Plan};
use akbench_core::image::manifest::RunConfig;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An unpacked image as a runtime uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The pinned reference (`registry/repository@sha256:...`), for the record.
    pub pinned: String,
    /// The unpacked root file system (read-only lower layer).
    pub rootfs: PathBuf,
    /// The image configuration's run settings.
    pub run: RunConfig,
    /// Where the workspace is inside.
    pub workdir: String,
    /// The uid and gid the process has inside (the image's user; [`image_user`]).
    pub user: (u32, u32),
}

/// One container start: the image, and the folders bound at fixed paths inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The image.
    pub image: Image,
    /// Host folders bound read-write at paths inside (`/logs/agent`, `/logs/verifier`...).
    pub mounts: Vec<(PathBuf, String)>,
    /// Host folders bound read-only at paths inside: Harbor's `/tests` (grading) and
    /// `/solution` (the reference solution's runs).
    pub ro_mounts: Vec<(PathBuf, String)>,
    /// Read-only host folders with agent CLIs the image may lack, bound at their host paths
    /// (their `bin/` appended to `PATH`).
    pub tools: Vec<PathBuf>,
    /// Whether the process's working folder (the workspace) is bound at the image's
    /// `workdir`; `false` for a sidecar service, which runs in its image's own folder.
    pub workspace: bool,
}

/// The uid and gid of the image's `User` (`""`: root; `name`, `uid`, `name:group`,
/// `uid:gid`), names looked up in the image's own `/etc/passwd` and `/etc/group`.
pub fn image_user(user: Option<&str>, rootfs: &Path) -> Result<(u32, u32), String> {
    let Some(u) = user.map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok((0, 0));
    };
    // The image's files: a link (to the host's /dev/zero, say) or a FIFO is not read.
    let read = |f: &str| {
        akbench_core::bounded_read::ReadKind::Config
            .read_text(&rootfs.join(f), akbench_core::bounded_read::Links::Refuse)
            .unwrap_or_default()
    };
    user_ids(u, &read("etc/passwd"), &read("etc/group"))
}

/// The uid and gid inside a phase of a task runs as: `user` (the task's `[agent] user` or
/// `[verifier] user`, named `field`) looked up in the image's own /etc/passwd and
/// /etc/group, never in the environment's (which the agent may have changed); `None`: the
/// image's user.
pub fn phase_ids(image: &Image, user: Option<&str>, field: &str) -> Result<(u32, u32), String> {
    match user {
        None => Ok(image.user),
        Some(u) => {
            image_user(Some(u), &image.rootfs).map_err(|e| format!("`{field}` = `{u}`: {e}"))
        }
    }
}

/// The uid and gid inside the agent and the grader of `task` run as in `image`
/// ([`phase_ids`]), under the one rule of where they may: a user other than the image's
/// runs only inside the agent's environment ([`super::shared::Env::exec_as`]), so an
/// attempt graded in a fresh container (`shared` false) that names one is refused, the
/// error naming the field and the fix.
pub fn phase_users(
    image: &Image,
    task: &akbench_core::task::Task,
    shared: bool,
) -> Result<PhaseUsers, String> {
    let agent = phase_ids(image, task.file.agent.user.as_deref(), "agent.user")?;
    let verifier = phase_ids(image, task.file.verifier.user.as_deref(), "verifier.user")?;
    for (field, ids) in [("agent.user", agent), ("verifier.user", verifier)] {
        if !shared && ids != image.user {
            return Err(format!(
                "`{field}` (uid {}, gid {}) is not the image's user (uid {}, gid {}), and a phase runs as another user only in the agent's environment; fix: grade in the agent's environment (`[verifier] environment_mode = \"shared\"`, Harbor's default, and no `execution.grading_environment: separate`), make the user the image's `USER`, or remove `{field}`",
                ids.0, ids.1, image.user.0, image.user.1
            ));
        }
    }
    Ok(PhaseUsers { agent, verifier })
}

/// Who the phases of an attempt run as ([`phase_users`]): uid and gid inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseUsers {
    /// The agent (and a reference solution).
    pub agent: (u32, u32),
    /// The grader.
    pub verifier: (u32, u32),
}

/// [`image_user`] over the files' text (pure).
pub fn user_ids(user: &str, passwd: &str, group: &str) -> Result<(u32, u32), String> {
    let (name, grp) = match user.split_once(':') {
        Some((n, g)) => (n, Some(g)),
        None => (user, None),
    };
    let entry = |text: &str, key: &str| -> Option<Vec<String>> {
        text.lines()
            .map(|l| l.split(':').map(str::to_string).collect::<Vec<_>>())
            .find(|f| f.first().map(String::as_str) == Some(key))
    };
    let num = |f: &Option<Vec<String>>, col: usize| {
        f.as_ref().and_then(|f| f.get(col)?.parse::<u32>().ok())
    };
    let (uid, default_gid) = match name.parse::<u32>() {
        Ok(n) => {
            let by_uid = passwd
                .lines()
                .map(|l| l.split(':').map(str::to_string).collect::<Vec<_>>())
                .find(|f| f.get(2).map(String::as_str) == Some(name));
            (n, num(&by_uid, 3).unwrap_or(n))
        }
        Err(_) => {
            let e = entry(passwd, name);
            let uid = num(&e, 2).ok_or_else(|| {
                format!("the image's user `{name}` is not in its /etc/passwd; fix: set a user the image has, or a numeric uid")
            })?;
            (uid, num(&e, 3).unwrap_or(uid))
        }
    };
    let gid = match grp {
        None => default_gid,
        Some(g) => match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => num(&entry(group, g), 2).ok_or_else(|| {
                format!("the image's group `{g}` is not in its /etc/group; fix: set a group the image has, or a numeric gid")
            })?,
        },
    };
    Ok((uid, gid))
}

/// Where the workspace goes inside the image: the task's `environment.workdir`, else the
/// image's working directory unless it is `/`, else [`akbench_core::task::DEFAULT_IMAGE_WORKDIR`].
pub fn workdir(task: Option<&str>, image: &RunConfig) -> String {
    task.map(str::to_string)
        .or_else(|| {
            image
                .working_dir
                .clone()
                .map(|w| w.trim_end_matches('/').to_string())
                .filter(|w| w.starts_with('/') && w.len() > 1 && !w.contains(".."))
        })
        .unwrap_or_else(|| akbench_core::task::DEFAULT_IMAGE_WORKDIR.to_string())
}

/// The programs whose install folder (outside the system folders) a container gets
/// read-only when the host has them: the agent CLIs and their runtime.
pub const AGENT_PROGRAMS: &[&str] = &["node", "npm", "npx", "claude", "codex"];

/// Install folders of [`AGENT_PROGRAMS`] on the host `path` (outside `/usr`, `/bin`...).
pub fn agent_tools(path: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for prog in AGENT_PROGRAMS {
        for dir in path.split(':').filter(|d| !d.is_empty()) {
            let cand = Path::new(dir).join(prog);
            if !cand.is_file() {
                continue;
            }
            if let Some(p) = bwrap::install_prefix(&cand) {
                if !out.contains(&p) && !p.starts_with("/usr") {
                    out.push(p);
                }
            }
            break;
        }
    }
    out
}

/// The overlay the child mounts in a private mount namespace before it execs bwrap, and
/// the unprivileged host user it then becomes.
#[derive(Debug, Clone)]
pub struct OverlayMount {
    target: CString,
    options: CString,
    drop_to: Option<(u32, u32)>,
    /// An idmapped copy of the image (a detached mount) attached at the path of the
    /// overlay's lower folder, first: the worker's files shown as the sandbox user's.
    idmapped: Option<(Arc<OwnedFd>, CString)>,
    /// A worker that is not root: the user namespace the child makes first (mapping the
    /// worker's uid and gid onto themselves), which owns the mount namespace the overlay is
    /// mounted in ([`super::userns::OwnMaps`]). `None` for a root worker, and where the
    /// child already entered a user namespace of the worker's (the network's).
    own_userns: Option<Arc<super::userns::OwnMaps>>,
}

/// A user namespace mapping the worker's uid and gid 0 to the sandbox user's `(uid, gid)`
/// (and nothing else), for idmapped mounts: made once per sandbox user, by a `sleep`
/// started in a new user namespace whose maps the (root) worker writes.
fn idmap_userns(uid: u32, gid: u32) -> Result<Arc<OwnedFd>, String> {
    use std::collections::HashMap;
    use std::os::unix::process::CommandExt;
    use std::sync::Mutex;
    type ByUser = HashMap<(u32, u32), Arc<OwnedFd>>;
    static MADE: Mutex<Option<ByUser>> = Mutex::new(None);
    let mut made = MADE.lock().map_err(|e| e.to_string())?;
    if let Some(fd) = made.as_ref().and_then(|m| m.get(&(uid, gid))) {
        return Ok(fd.clone());
    }
    let mut cmd = std::process::Command::new("sleep");
    cmd.arg("60")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: unshare is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("failed to start `sleep` in a new user namespace: {e}"))?;
    let proc = PathBuf::from(format!("/proc/{}", child.id()));
    let done = (|| {
        std::fs::write(proc.join("uid_map"), format!("0 {uid} 1\n"))?;
        std::fs::write(proc.join("gid_map"), format!("0 {gid} 1\n"))?;
        std::fs::File::open(proc.join("ns/user")).map(OwnedFd::from)
    })();
    let _ = child.kill();
    let _ = child.wait();
    let fd =
        Arc::new(done.map_err(|e| format!("failed to map the image's owner to uid {uid}: {e}"))?);
    made.get_or_insert_with(HashMap::new)
        .insert((uid, gid), fd.clone());
    Ok(fd)
}

/// The capabilities the image's root keeps inside its user namespace (Docker's default set
/// without `NET_RAW`, `MKNOD`, `AUDIT_WRITE` and `SETFCAP`): enough for apt, dpkg and
/// `adduser` to change user and owner. They act only on what that namespace owns (its
/// mount, pid, ipc and uts namespaces) and on files whose owner is mapped in it (the
/// image's, the copy-on-write layer's and the workspace's); outside, the process is the
/// sandbox user or an id of the subordinate range, with no capability.
pub const ROOT_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
];

/// A user namespace for one container start, owned by the sandbox user (so bwrap, running
/// as that user, may enter it with `--userns`) and mapping ids as [`super::subids::maps`]
/// says: the image's user is the sandbox user, every other id one of the subordinate
/// range. Made by a `sleep` that becomes the sandbox user and unshares its user namespace;
/// the (root) worker writes the maps, as `newuidmap` and `newgidmap` do.
pub(super) fn user_namespace(
    sandbox: super::owner::SandboxUser,
    image: (u32, u32),
    range: super::subids::SubIds,
) -> Result<OwnedFd, String> {
    use std::os::unix::process::CommandExt;
    let (uid, gid) = (sandbox.uid, sandbox.gid);
    let mut cmd = std::process::Command::new("sleep");
    cmd.arg("60")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: only async-signal-safe system calls on plain integers.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(gid, gid, gid) != 0
                || libc::setresuid(uid, uid, uid) != 0
                || libc::unshare(libc::CLONE_NEWUSER) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        format!("failed to start `sleep` as the sandbox user in a new user namespace: {e}")
    })?;
    let proc = PathBuf::from(format!("/proc/{}", child.id()));
    let done = (|| {
        std::fs::write(
            proc.join("uid_map"),
            super::subids::maps(image.0, uid, range),
        )?;
        std::fs::write(
            proc.join("gid_map"),
            super::subids::maps(image.1, gid, range),
        )?;
        std::fs::File::open(proc.join("ns/user")).map(OwnedFd::from)
    })();
    let _ = child.kill();
    let _ = child.wait();
    done.map_err(|e| {
        format!(
            "failed to map the container's ids (the image's user to uid {uid}, the others to {}..{}): {e}; fix: set {} to a free range",
            range.base,
            u64::from(range.base) + u64::from(range.count),
            super::subids::VAR
        )
    })
}

/// A detached copy of the folder tree at `lower` whose files owned by uid and gid 0 (the
/// worker's: every file of the image cache) are seen as `userns`'s mapping says (the
/// sandbox user's).
fn idmapped_tree(lower: &Path, userns: &OwnedFd) -> std::io::Result<OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
    let path = CString::new(lower.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // SAFETY: open_tree with a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor this function owns.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    let empty = c"";
    // SAFETY: mount_setattr on the descriptor above with a struct of the kernel's layout.
    if unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(tree)
}

impl crate::process::PreExec for OverlayMount {
    fn register(self: Arc<Self>, cmd: &mut std::process::Command) {
        self.install(cmd);
    }
}

impl OverlayMount {
    /// An overlay of `lower` (read-only) and `upper` (with `work`, same file system) at
    /// `target`; the folders must exist.
    pub fn new(
        lower: &Path,
        upper: &Path,
        work: &Path,
        target: &Path,
        drop_to: Option<(u32, u32)>,
    ) -> Result<Self, String> {
        let bad = |p: &Path| {
            let s = p.display().to_string();
            s.contains([',', ':', '\n']) || s.contains('\\')
        };
        if [lower, upper, work, target].iter().any(|p| bad(p)) {
            return Err("an overlay folder's path holds `,`, `:` or `\\`".into());
        }
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            upper.display(),
            work.display()
        );
        Ok(Self {
            target: CString::new(target.as_os_str().as_encoded_bytes())
                .map_err(|e| e.to_string())?,
            options: CString::new(options).map_err(|e| e.to_string())?,
            drop_to,
            idmapped: None,
            own_userns: None,
        })
    }

    /// Makes the child first make a user namespace of its own, mapping the worker's uid and
    /// gid onto themselves (a worker that is not root; [`super::userns`]).
    pub(super) fn in_own_userns(&mut self) {
        self.own_userns = Some(Arc::new(super::userns::OwnMaps::identity()));
    }

    /// Makes the child enter a new mount namespace (propagation private, so nothing reaches
    /// the host) and mount the overlay there, just before it execs.
    pub fn install(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let m = self.clone();
        // SAFETY: only async-signal-safe system calls (unshare, mount) on data prepared
        // before fork.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(maps) = &m.own_userns {
                    if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    maps.write(libc::AT_FDCWD, c"/proc/self".as_ptr())?;
                }
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let root = c"/";
                let none = c"none";
                if libc::mount(
                    none.as_ptr(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some((tree, at)) = &m.idmapped {
                    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
                    let empty = c"";
                    if libc::syscall(
                        libc::SYS_move_mount,
                        std::os::fd::AsRawFd::as_raw_fd(&**tree),
                        empty.as_ptr(),
                        libc::AT_FDCWD,
                        at.as_ptr(),
                        MOVE_MOUNT_F_EMPTY_PATH,
                    ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                let overlay = c"overlay";
                if libc::mount(
                    overlay.as_ptr(),
                    m.target.as_ptr(),
                    overlay.as_ptr(),
                    0,
                    m.options.as_ptr().cast(),
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some((uid, gid)) = m.drop_to {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setresgid(gid, gid, gid) != 0
                        || libc::setresuid(uid, uid, uid) != 0
                        || libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}

/// The folder in the scratch folder where a container's overlay is mounted (in the child's
/// own mount namespace), and its upper and work folders.
pub const ROOT: &str = "container-root";
const UPPER: &str = "container-upper";
const WORK: &str = "container-work";

/// The folder in the scratch folder where the idmapped image is attached (in the child's
/// own mount namespace), the overlay's lower folder.
const LOWER: &str = "container-lower";

/// Makes a fresh copy-on-write layer for one container start in `exposure.scratch`: the
/// mount point, the upper folder (owned by the sandbox user, so it may write where the
/// image lets it) and overlay's work folder. When the process runs as the sandbox user, the
/// image (the worker's files: the cache is never the sandbox user's, so nothing running as
/// that uid on the host can change what a later trial loads) is the lower layer through an
/// idmapped mount that shows the worker's files as the sandbox user's.
///
/// `own_userns` (a worker that is not root, whose child has not entered a user namespace
/// of the worker's for the network): the child first makes a user namespace mapping the
/// worker's own uid and gid, where overlayfs may be mounted without privilege (Linux 5.11
/// and later). The image's files are then the worker's, which bwrap's user namespace maps
/// to the image's user.
pub(super) fn copy_on_write(
    exposure: &super::Exposure,
    view: &View,
    drop_to: Option<&bwrap::DropTo>,
    own_userns: bool,
) -> Result<(OverlayMount, PathBuf), (PathBuf, std::io::Error)> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let s = &exposure.scratch;
    let (root, upper, work, at) = (s.join(ROOT), s.join(UPPER), s.join(WORK), s.join(LOWER));
    for d in [&root, &upper, &work, &at] {
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| (d.clone(), e))?;
        }
        std::fs::create_dir_all(d).map_err(|e| (d.clone(), e))?;
    }
    let lower = &view.image.rootfs;
    let m = std::fs::metadata(lower).map_err(|e| (lower.clone(), e))?;
    if let Some(d) = drop_to {
        std::os::unix::fs::lchown(&upper, Some(d.user.uid), Some(d.user.gid))
            .map_err(|e| (upper.clone(), e))?;
    }
    std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(m.mode() & 0o7777))
        .map_err(|e| (upper.clone(), e))?;
    let idmapped = match drop_to {
        None => None,
        Some(d) => {
            let userns = idmap_userns(d.user.uid, d.user.gid)
                .map_err(|e| (lower.clone(), std::io::Error::other(e)))?;
            let tree = idmapped_tree(lower, &userns).map_err(|e| (lower.clone(), e))?;
            Some(tree)
        }
    };
    let mut mount = OverlayMount::new(
        if idmapped.is_some() { &at } else { lower },
        &upper,
        &work,
        &root,
        drop_to.map(|d| (d.user.uid, d.user.gid)),
    )
    .map_err(|e| (root.clone(), std::io::Error::other(e)))?;
    if let Some(tree) = idmapped {
        let at = CString::new(at.as_os_str().as_encoded_bytes())
            .map_err(|e| (at.clone(), std::io::Error::other(e.to_string())))?;
        mount.idmapped = Some((Arc::new(tree), at));
    }
    if own_userns && drop_to.is_none() {
        mount.in_own_userns();
    }
    Ok((mount, upper))
}

/// The bwrap argv of a container start (pure): `plan` as the sandbox's (namespaces, user,
/// seccomp, tmpfs sizes, read-only and read-write host paths, working folder, argv), over
/// `root` (the mounted overlay) instead of the host's system folders, with `view`'s mounts.
///
/// `userns`: the descriptor of the container's user namespace ([`user_namespace`]), which
/// bwrap enters; the image's root then keeps [`ROOT_CAPS`] inside it (a non-root image user
/// keeps none). Without one, bwrap makes a user namespace mapping only the sandbox user, and
/// every capability is dropped.
pub fn args(plan: &Plan, view: &View, root: &Path, userns: Option<i32>) -> Vec<String> {
    let s = |p: &Path| p.display().to_string();
    let mut a: Vec<String> = vec!["bwrap".into()];
    bwrap::namespaces(&mut a, plan);
    // bwrap runs as the unprivileged sandbox user ([`OverlayMount::install`]): a user
    // namespace maps it to the image's user.
    let (uid, gid) = view.image.user;
    match userns {
        Some(fd) => a.extend(["--userns".into(), fd.to_string()]),
        None => a.push("--unshare-user".into()),
    }
    a.extend([
        "--uid".into(),
        uid.to_string(),
        "--gid".into(),
        gid.to_string(),
        "--cap-drop".into(),
        "ALL".into(),
    ]);
    // The image's root keeps ROOT_CAPS in its own user namespace: the one made for the start
    // (a root worker), or bwrap's (a worker that is not root, which maps only its own uid:
    // the capabilities act on nothing but that namespace and the worker's own files).
    if uid == 0 && (userns.is_some() || plan.drop_to.is_none()) {
        for c in ROOT_CAPS {
            a.extend(["--cap-add".into(), (*c).to_string()]);
        }
    }
    bwrap::filters(&mut a, plan);
    a.extend(["--bind".into(), s(root), "/".into()]);
    bwrap::kernel_views(&mut a, plan);
    bwrap::host_paths(&mut a, &view.tools, plan);
    // The workspace (the plan's working folder) also at the task's folder, where it runs.
    if view.workspace {
        a.extend(["--bind".into(), s(&plan.cwd), view.image.workdir.clone()]);
    } else {
        // A service runs in its working folder, made when the image lacks it (as
        // `docker run -w` makes it).
        a.extend(["--dir".into(), view.image.workdir.clone()]);
    }
    for (host, inside) in &view.mounts {
        a.extend(["--bind".into(), s(host), inside.clone()]);
    }
    for (host, inside) in &view.ro_mounts {
        a.extend(["--ro-bind".into(), s(host), inside.clone()]);
    }
    let mut tool_plan = plan.clone();
    tool_plan.toolchain = view.tools.clone();
    for d in bwrap::made_folders(&tool_plan) {
        if d != Path::new("/etc") {
            a.extend(["--chmod".into(), "0755".into(), s(&d)]);
        }
    }
    a.extend(["--chdir".into(), view.image.workdir.clone(), "--".into()]);
    a.extend(plan.argv.iter().cloned());
    a
}

/// The environment inside: the image's, the attempt's (without the host's toolchain
/// variables), `PATH` the image's with the tools' `bin/` appended.
pub fn env(
    view: &View,
    spec: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    let extra: Vec<String> = view
        .tools
        .iter()
        .map(|t| t.join("bin").display().to_string())
        .collect();
    akbench_core::image::manifest::container_env(&view.image.run, spec, &extra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bwrap::PROC_READ_ONLY;

    fn has(a: &[String], seq: &[&str]) -> bool {
        a.windows(seq.len())
            .any(|w| w.iter().zip(seq).all(|(x, y)| x == y))
    }

    #[test]
    fn the_container_command_line_runs_over_the_image_with_the_sandboxs_isolation() {
        let plan = Plan {
            argv: vec!["bash".into(), "/agents/a.sh".into()],
            cwd: "/w/work/1/worktree".into(),
            writable: vec!["/w/work/1/worktree".into(), "/w/work/1/home".into()],
            readable: vec!["/agents/a.sh".into()],
            toolchain: vec!["/root/.cargo".into()],
            hosts_file: "/w/work/1/hosts".into(),
            ca_bundle: None,
            own_network: true,
            tmp_bytes: 4 << 20,
            drop_to: Some(bwrap::DropTo {
                setpriv: "/usr/bin/setpriv".into(),
                user: crate::runtime::owner::SandboxUser {
                    uid: 65534,
                    gid: 65534,
                },
            }),
            seccomp_fd: Some(9),
            status_fd: Some(11),
        };
        let view = View {
            workspace: true,
            image: Image {
                pinned: "r/x@sha256:00".into(),
                rootfs: "/c/images/roots/00/rootfs".into(),
                run: RunConfig::default(),
                workdir: "/app".into(),
                user: (0, 0),
            },
            mounts: vec![("/w/art/logs/agent".into(), "/logs/agent".into())],
            ro_mounts: vec![("/w/eval/tests".into(), "/tests".into())],
            tools: vec![],
        };
        let a = args(&plan, &view, Path::new("/w/work/1/root"), None);
        for flag in [
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-net",
        ] {
            assert!(a.contains(&flag.to_string()), "{flag}");
        }
        assert!(has(&a, &["--seccomp", "9"]));
        assert!(has(&a, &["--json-status-fd", "11"]));
        assert!(has(&a, &["--bind", "/w/work/1/root", "/"]));
        assert!(has(&a, &["--bind", "/w/work/1/worktree", "/app"]));
        assert!(has(&a, &["--bind", "/w/art/logs/agent", "/logs/agent"]));
        // Harbor's /tests (or /solution): bound read-only, after the workspace.
        assert!(has(&a, &["--ro-bind", "/w/eval/tests", "/tests"]));
        // The image's user inside a user namespace, no capability, no host program.
        assert!(has(
            &a,
            &[
                "--unshare-user",
                "--uid",
                "0",
                "--gid",
                "0",
                "--cap-drop",
                "ALL"
            ]
        ));
        assert!(has(&a, &["--chdir", "/app", "--", "bash", "/agents/a.sh"]));
        assert!(!a.iter().any(|x| x.contains("setpriv")));
        // A root worker with no container user namespace: no capability kept.
        assert!(!a.contains(&"--cap-add".to_string()));
        // A worker that is not root (no drop): bwrap's user namespace is the container's,
        // and the image's root keeps ROOT_CAPS there; a non-root image user keeps none.
        let mut unprivileged = plan.clone();
        unprivileged.drop_to = None;
        let a = args(&unprivileged, &view, Path::new("/w/work/1/root"), None);
        for c in ROOT_CAPS {
            assert!(has(&a, &["--cap-add", c]), "{c}");
        }
        let mut user_view = view.clone();
        user_view.image.user = (1000, 1000);
        let a = args(&unprivileged, &user_view, Path::new("/w/work/1/root"), None);
        assert!(!a.contains(&"--cap-add".to_string()));
        // Nothing of the host's system or toolchain is bound: the image is the system.
        for p in ["/usr", "/bin", "/lib", "/root/.cargo", "/etc/passwd"] {
            assert!(
                !has(&a, &["--ro-bind", p]) && !has(&a, &["--ro-bind-try", p]),
                "{p} exposed"
            );
        }
        for p in PROC_READ_ONLY {
            assert!(has(&a, &["--ro-bind-try", p, p]), "{p}");
        }
        assert!(!a.contains(&"--remount-ro".to_string()) || has(&a, &["--remount-ro", "/dev"]));
        assert!(
            !has(&a, &["--remount-ro", "/"]),
            "the copy-on-write root stays writable"
        );
    }

    #[test]
    fn the_workspace_folder_is_the_tasks_then_the_images_then_app() {
        let img = |w: Option<&str>| RunConfig {
            working_dir: w.map(str::to_string),
            ..RunConfig::default()
        };
        assert_eq!(workdir(Some("/src"), &img(Some("/x"))), "/src");
        assert_eq!(workdir(None, &img(Some("/x/"))), "/x");
        assert_eq!(workdir(None, &img(Some("/"))), "/app");
        assert_eq!(workdir(None, &img(Some("rel"))), "/app");
        assert_eq!(workdir(None, &img(None)), "/app");
    }

    #[test]
    fn overlay_options_refuse_separators_in_paths() {
        let p = Path::new;
        assert!(OverlayMount::new(p("/a"), p("/b"), p("/c"), p("/d"), None).is_ok());
        assert!(OverlayMount::new(p("/a,b"), p("/b"), p("/c"), p("/d"), None).is_err());
        assert!(OverlayMount::new(p("/a"), p("/b:x"), p("/c"), p("/d"), None).is_err());
    }

    #[test]
    fn the_images_user_is_found_in_its_own_files() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\napp:x:1000:1001::/home/app:/bin/sh\n";
        let group = "root:x:0:\nstaff:x:50:\n";
        type Want = Result<(u32, u32), &'static str>;
        let cases: &[(&str, Want)] = &[
            ("app", Ok((1000, 1001))),
            ("app:staff", Ok((1000, 50))),
            ("1000", Ok((1000, 1001))),
            ("1234", Ok((1234, 1234))),
            ("1234:7", Ok((1234, 7))),
            ("root", Ok((0, 0))),
            ("ghost", Err("`ghost` is not in its /etc/passwd")),
            ("app:ghosts", Err("`ghosts` is not in its /etc/group")),
        ];
        for (u, want) in cases {
            match (user_ids(u, passwd, group), want) {
                (Ok(g), Ok(w)) => assert_eq!(g, *w, "{u}"),
                (Err(g), Err(w)) => assert!(g.contains(w) && g.contains("fix:"), "{u}: {g}"),
                (g, w) => panic!("{u}: {g:?} vs {w:?}"),
            }
        }
        assert_eq!(image_user(None, Path::new("/nonexistent")), Ok((0, 0)));
        assert_eq!(image_user(Some(" "), Path::new("/nonexistent")), Ok((0, 0)));
    }

    /// The image cache is owned by the worker (root) and no sandbox user can write it; the
    /// process inside still owns the image's files (an idmapped lower layer shows the
    /// worker's files as the sandbox user's), writes where the image lets it, and every
    /// write lands in its own upper folder: the cached files keep their owner and bytes.
    /// Before, the cache was unpacked as the sandbox user's (65534), so anything running as
    /// that uid on the host could plant files a later trial's grading loads; a root-owned
    /// cache was not writable from inside.
    #[test]
    fn a_root_owned_image_is_the_sandbox_users_inside_and_unchanged_outside() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        const TEST: &str = "a_root_owned_image_is_the_sandbox_users_inside_and_unchanged_outside";
        if !bwrap::is_root() {
            akbench_core::testkit::skip(TEST, "needs a root worker (the container runtime)");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let lower = tmp.path().join("rootfs");
        std::fs::create_dir_all(lower.join("app")).unwrap();
        std::fs::write(lower.join("app/file"), "image\n").unwrap();
        std::fs::set_permissions(
            lower.join("app/file"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let user = crate::runtime::owner::SandboxUser {
            uid: 65534,
            gid: 65534,
        };
        let drop_to = bwrap::DropTo {
            setpriv: "/usr/bin/setpriv".into(),
            user,
        };
        let exposure = super::super::Exposure {
            egress: None,
            scratch: tmp.path().join("scratch"),
            ..Default::default()
        };
        let view = View {
            workspace: true,
            image: Image {
                pinned: "r/x@sha256:00".into(),
                rootfs: lower.clone(),
                run: RunConfig::default(),
                workdir: "/app".into(),
                user: (0, 0),
            },
            mounts: vec![],
            ro_mounts: vec![],
            tools: vec![],
        };
        let (mount, upper) = copy_on_write(&exposure, &view, Some(&drop_to), false).unwrap();
        let root = exposure.scratch.join(ROOT).display().to_string();
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args([
            "-c",
            &format!(
                "stat -c %u {root}/app/file; echo more >> {root}/app/file && echo new > {root}/app/new && cat {root}/app/file"
            ),
        ]);
        mount.install(&mut cmd);
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stdout}{stderr}");
        assert_eq!(stdout, "65534\nimage\nmore\n", "{stderr}");
        // Outside: the cached file is the worker's, unchanged; the writes are in the upper.
        let m = std::fs::metadata(lower.join("app/file")).unwrap();
        assert_eq!((m.uid(), m.gid()), (0, 0));
        assert_eq!(
            std::fs::read_to_string(lower.join("app/file")).unwrap(),
            "image\n"
        );
        assert!(!lower.join("app/new").exists());
        assert_eq!(
            std::fs::read_to_string(upper.join("app/new")).unwrap(),
            "new\n"
        );
    }
}
