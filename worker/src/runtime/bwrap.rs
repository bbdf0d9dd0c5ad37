//! The bubblewrap command line of the `sandbox` runtime: what the process sees.
//!
//! Mounts, in order: the system folders read-only (`/usr`, and `/bin`, `/sbin`, `/lib*` as
//! the symlinks or folders they are on the host), the pieces of `/etc` programs need
//! (users, name service, dynamic linker, certificates, time zone, alternatives) and a
//! generated `/etc/hosts`, a fresh `/proc` whose host-wide parts (`/proc/sys`,
//! `/proc/sysrq-trigger`, `/proc/irq`, `/proc/bus`, `/proc/fs`) are read-only, a fresh `/dev`
//! (read-only) with a size-capped `/dev/shm`, a private size-capped `/tmp`, the toolchain
//! homes read-only (rustup, cargo, and the install prefixes of node, npm, python3, claude and
//! codex when they live outside `/usr`), then the allowed read-only paths and the read-write
//! folders at their host paths; the sandbox's own root is read-only. Nothing else of the host
//! exists inside.
//!
//! Who runs inside: a worker that is not root gets a user namespace (`--unshare-user`) and
//! bwrap drops every capability, so the process is the worker's own unprivileged uid. A root
//! worker's bwrap does the mounts as root (it can reach folders only root can, such as a
//! toolchain under `/root`) keeping only the capabilities needed to change user, and the
//! program is started through `setpriv` as the sandbox user ([`super::owner`]) with an empty
//! capability bounding set and `no_new_privs`: never host uid 0, never a capability.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Pieces of `/etc` bound read-only when present.
pub const ETC_PIECES: &[&str] = &[
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/alternatives",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/mime.types",
    "/etc/inputrc",
    "/etc/bash.bashrc",
    "/etc/profile",
    "/etc/python3",
    "/etc/npmrc",
];

/// Top-level system folders: bound read-only when folders, recreated when symlinks.
pub const SYSTEM_TOP: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Programs whose install prefix is exposed read-only when outside `/usr`.
pub const TOOL_PROGRAMS: &[&str] = &[
    "node", "npm", "npx", "claude", "codex", "python3", "cargo", "rustc", "git",
];

/// One sandbox to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The program and arguments to run inside.
    pub argv: Vec<String>,
    /// Working directory inside (a writable folder).
    pub cwd: PathBuf,
    /// Read-write folders, at their host paths.
    pub writable: Vec<PathBuf>,
    /// Read-only files or folders, at their host paths.
    pub readable: Vec<PathBuf>,
    /// Toolchain folders, read-only, at their host paths.
    pub toolchain: Vec<PathBuf>,
    /// The generated hosts file, bound at `/etc/hosts`.
    pub hosts_file: PathBuf,
    /// A merged certificate bundle (the host's plus the worker's extra authorities,
    /// [`super::trust`]) and the path it is bound at, read-only; `None`: the host's as is.
    pub ca_bundle: Option<super::trust::Bind>,
    /// True: bwrap makes an empty network namespace (only loopback); false: the process was
    /// already put in one (with forwarders) before bwrap started.
    pub own_network: bool,
    /// Size of the private /tmp, and of /dev/shm.
    pub tmp_bytes: u64,
    /// The worker runs as root: the program runs as this user instead (see the module doc);
    /// `None`: a user namespace of the worker's own (unprivileged) uid.
    pub drop_to: Option<DropTo>,
    /// A descriptor holding the seccomp program ([`super::seccomp`]), inherited by bwrap.
    pub seccomp_fd: Option<i32>,
    /// A pipe's write end bwrap reports on (`--json-status-fd`): an `exit-code` line only
    /// once the program it started ended, so a status without one is bwrap failing to set up
    /// ([`launched`]).
    pub status_fd: Option<i32>,
}

/// Whether bwrap started the program and saw it end, from what it wrote on its
/// `--json-status-fd` (pure): a launcher that failed to set up the sandbox exits 1 without
/// an `exit-code` line, which must not be read as the program's own exit.
pub fn launched(status: &str) -> bool {
    status.contains("\"exit-code\"")
}

/// How a root worker's sandbox becomes unprivileged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropTo {
    /// The `setpriv` program (util-linux), by absolute path.
    pub setpriv: PathBuf,
    /// The unprivileged user.
    pub user: super::owner::SandboxUser,
}

/// Parts of `/proc` that act on the whole host, bound read-only over the sandbox's own
/// `/proc` (the pattern flatpak uses).
pub const PROC_READ_ONLY: &[&str] = &[
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
];

/// The full bwrap argv for `plan` (pure).
pub fn args(plan: &Plan) -> Vec<String> {
    let mut a: Vec<String> = vec!["bwrap".into()];
    namespaces(&mut a, plan);
    if plan.drop_to.is_some() {
        // Only what `setpriv` needs to become the sandbox user and drop the rest.
        a.extend(
            [
                "--cap-drop",
                "ALL",
                "--cap-add",
                "CAP_SETUID",
                "--cap-add",
                "CAP_SETGID",
                "--cap-add",
                "CAP_SETPCAP",
            ]
            .map(String::from),
        );
    } else {
        a.push("--unshare-user".into());
    }
    filters(&mut a, plan);
    let s = |p: &Path| p.display().to_string();
    a.extend(["--ro-bind".into(), "/usr".into(), "/usr".into()]);
    for top in SYSTEM_TOP {
        match std::fs::read_link(top) {
            Ok(target) => a.extend(["--symlink".into(), s(&target), (*top).to_string()]),
            Err(_) if Path::new(top).is_dir() => {
                a.extend(["--ro-bind".into(), (*top).to_string(), (*top).to_string()])
            }
            Err(_) => {}
        }
    }
    for e in ETC_PIECES {
        a.extend(["--ro-bind-try".into(), (*e).to_string(), (*e).to_string()]);
    }
    if let Some(b) = &plan.ca_bundle {
        a.extend(["--ro-bind".into(), s(&b.file), s(&b.inside)]);
    }
    kernel_views(&mut a, plan);
    host_paths(&mut a, &plan.toolchain, plan);
    // bwrap makes the folders above a bound path with the host folders' modes: a 0700
    // folder only root may enter (a temporary folder, `/root`) would keep the sandbox user
    // out of what is bound below it.
    for d in made_folders(plan) {
        a.extend(["--chmod".into(), "0755".into(), s(&d)]);
    }
    // The sandbox's root (bwrap's tmpfs) is not writable either.
    a.extend(["--remount-ro".into(), "/".into()]);
    a.extend(["--chdir".into(), s(&plan.cwd), "--".into()]);
    if let Some(d) = &plan.drop_to {
        a.extend([
            s(&d.setpriv),
            format!("--reuid={}", d.user.uid),
            format!("--regid={}", d.user.gid),
            "--clear-groups".into(),
            "--inh-caps=-all".into(),
            "--bounding-set=-all".into(),
            "--no-new-privs".into(),
            "--".into(),
        ]);
    }
    a.extend(plan.argv.iter().cloned());
    a
}

/// The namespaces of every sandbox, over the host's root or an image's: pid, ipc, uts,
/// cgroup, a new session, and the network when the plan has its own.
pub fn namespaces(a: &mut Vec<String>, plan: &Plan) {
    a.extend(
        [
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "akbench-sandbox",
        ]
        .map(String::from),
    );
    if plan.own_network {
        a.push("--unshare-net".into());
    }
}

/// The plan's seccomp filter and the status pipe bwrap reports the program's start and exit
/// on.
pub fn filters(a: &mut Vec<String>, plan: &Plan) {
    if let Some(fd) = plan.seccomp_fd {
        a.extend(["--seccomp".into(), fd.to_string()]);
    }
    if let Some(fd) = plan.status_fd {
        a.extend(["--json-status-fd".into(), fd.to_string()]);
    }
}

/// What every sandbox sees of the kernel, over the host's root or an image's: the plan's
/// `/etc/hosts`, its own `/proc` with [`PROC_READ_ONLY`] read-only, a read-only `/dev`, and
/// size-capped `/dev/shm` and `/tmp` (counted in the plan's disk limit).
pub fn kernel_views(a: &mut Vec<String>, plan: &Plan) {
    let s = |p: &Path| p.display().to_string();
    a.extend(["--ro-bind".into(), s(&plan.hosts_file), "/etc/hosts".into()]);
    a.extend(["--proc".into(), "/proc".into()]);
    for p in PROC_READ_ONLY {
        a.extend(["--ro-bind-try".into(), (*p).to_string(), (*p).to_string()]);
    }
    let size = plan.tmp_bytes.max(1024 * 1024).to_string();
    a.extend(["--dev".into(), "/dev".into()]);
    for t in ["/dev/shm", "/tmp"] {
        a.extend([
            "--perms".into(),
            "1777".into(),
            "--size".into(),
            size.clone(),
            "--tmpfs".into(),
            t.into(),
        ]);
    }
    // /dev's own tmpfs has no size cap: nothing may be written there.
    a.extend(["--remount-ro".into(), "/dev".into()]);
}

/// The host paths a sandbox is given: `tools` read-only where they exist, the plan's
/// readable paths read-only and its writable paths read-write.
pub fn host_paths(a: &mut Vec<String>, tools: &[PathBuf], plan: &Plan) {
    let s = |p: &Path| p.display().to_string();
    for t in tools {
        a.extend(["--ro-bind-try".into(), s(t), s(t)]);
    }
    for r in &plan.readable {
        a.extend(["--ro-bind".into(), s(r), s(r)]);
    }
    for w in &plan.writable {
        a.extend(["--bind".into(), s(w), s(w)]);
    }
}

/// The folders bwrap makes in the sandbox's own tmpfs to hold the bound paths: `/etc`, and
/// the ancestors of the toolchain, readable and writable paths that are not themselves
/// bound, `/tmp` or `/`. (bwrap run by root makes them 0700.)
/// Toolchain folders missing on the host are skipped (they are bound only if present).
pub fn made_folders(plan: &Plan) -> Vec<PathBuf> {
    let toolchain = plan.toolchain.iter().filter(|t| t.exists());
    let bound: Vec<&PathBuf> = toolchain
        .chain(&plan.readable)
        .chain(&plan.writable)
        .collect();
    // `/etc` holds the bound pieces of the host's and the generated hosts file.
    let mut out: Vec<PathBuf> = vec![PathBuf::from("/etc")];
    for b in &bound {
        for anc in b.ancestors().skip(1) {
            let fixed = ["/", "/tmp", "/usr", "/dev", "/proc"]
                .iter()
                .any(|f| anc == Path::new(f));
            let inside_bound = bound.iter().any(|o| anc.starts_with(o));
            if fixed || inside_bound || anc.as_os_str().is_empty() {
                continue;
            }
            if !out.iter().any(|x| x == anc) {
                out.push(anc.to_path_buf());
            }
        }
    }
    out.sort_by_key(|p| p.components().count());
    out
}

/// `setpriv` on the system folders, by absolute path.
pub fn find_setpriv() -> Option<PathBuf> {
    [
        "/usr/bin/setpriv",
        "/bin/setpriv",
        "/usr/sbin/setpriv",
        "/sbin/setpriv",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// True when this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Toolchain folders to expose: `RUSTUP_HOME` and `CARGO_HOME` from `env`, and the install
/// prefix (the folder above `bin/`) of each of [`TOOL_PROGRAMS`] found on `env`'s PATH
/// outside `/usr` and `/bin`.
pub fn toolchain_dirs(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for k in ["RUSTUP_HOME", "CARGO_HOME"] {
        if let Some(v) = env.get(k) {
            out.push(PathBuf::from(v));
        }
    }
    let path = env.get("PATH").cloned().unwrap_or_default();
    for prog in TOOL_PROGRAMS {
        for dir in path.split(':').filter(|d| !d.is_empty()) {
            let cand = Path::new(dir).join(prog);
            if !cand.is_file() {
                continue;
            }
            for p in [cand.clone(), std::fs::canonicalize(&cand).unwrap_or(cand)] {
                if let Some(prefix) = install_prefix(&p) {
                    if !out.contains(&prefix) {
                        out.push(prefix);
                    }
                }
            }
            break;
        }
    }
    out
}

/// The folder a program's install lives in, when it is not a system folder: `/opt/node` for
/// `/opt/node/bin/node`, `/root/.pyenv` for `/root/.pyenv/shims/python3`.
pub fn install_prefix(program: &Path) -> Option<PathBuf> {
    let system = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"];
    if system.iter().any(|s| program.starts_with(s)) {
        return None;
    }
    let bin = program.parent()?;
    if bin.file_name().is_some_and(|n| n == "bin" || n == "shims") {
        bin.parent().map(Path::to_path_buf)
    } else {
        Some(bin.to_path_buf())
    }
}

/// How the sandbox becomes unprivileged here: `Some` for a root worker (the sandbox user
/// and `setpriv`), `None` for any other (its own uid in a user namespace); an error names
/// what is missing.
pub fn drop_to() -> Result<Option<DropTo>, String> {
    if !is_root() {
        return Ok(None);
    }
    let user = super::owner::from_env()?;
    let setpriv = find_setpriv().ok_or_else(|| {
        "`setpriv` is not installed (a root worker starts the sandboxed program through it as an unprivileged user); fix: `apt-get install -y util-linux` (Debian 11 and older: `apt-get install -y setpriv`)".to_string()
    })?;
    Ok(Some(DropTo { setpriv, user }))
}

/// The kernel feature a non-root worker's sandbox lacks, from the values of
/// `kernel.unprivileged_userns_clone`, `user.max_user_namespaces` and
/// `kernel.apparmor_restrict_unprivileged_userns` (`None`: the file does not exist), with
/// the fix (pure).
pub fn missing_userns_feature(
    unprivileged_userns_clone: Option<&str>,
    max_user_namespaces: Option<&str>,
    apparmor_restrict: Option<&str>,
) -> Option<String> {
    let is = |v: Option<&str>, want: &str| v.map(str::trim) == Some(want);
    if is(unprivileged_userns_clone, "0") {
        return Some("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); fix: `sysctl -w kernel.unprivileged_userns_clone=1`, or run the worker as root".into());
    }
    if is(max_user_namespaces, "0") {
        return Some("user namespaces are disabled (user.max_user_namespaces = 0); fix: `sysctl -w user.max_user_namespaces=10000`, or run the worker as root".into());
    }
    if is(apparmor_restrict, "1") {
        return Some("AppArmor refuses unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1); fix: an AppArmor profile allowing `userns` for /usr/bin/bwrap, or `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or run the worker as root".into());
    }
    None
}

/// Lets the child inherit `fd` across exec (it was opened close-on-exec, so no other child
/// of this multi-threaded process gets it).
pub fn inherit_in_child(cmd: &mut Command, fd: i32) {
    use std::os::unix::process::CommandExt;
    // SAFETY: fcntl is async-signal-safe; fd stays open in the parent until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Runs `true` in a sandbox shaped like the real ones (user, seccomp filter, mounts); the
/// message names what is missing: a kernel feature, a program, or bwrap's own complaint.
pub fn probe() -> Result<(), String> {
    let drop_to = drop_to()?;
    if drop_to.is_none() {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        if let Some(missing) = missing_userns_feature(
            read("/proc/sys/kernel/unprivileged_userns_clone").as_deref(),
            read("/proc/sys/user/max_user_namespaces").as_deref(),
            read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref(),
        ) {
            return Err(missing);
        }
    }
    let seccomp = super::seccomp::memfd()?;
    let tmp = std::env::temp_dir().join(format!("akbench-probe-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let hosts = tmp.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n")
        .map_err(|e| format!("cannot write {}: {e}", hosts.display()))?;
    use std::os::fd::AsRawFd;
    let plan = Plan {
        argv: vec!["true".into()],
        cwd: tmp.clone(),
        writable: vec![tmp.clone()],
        readable: Vec::new(),
        toolchain: Vec::new(),
        hosts_file: hosts,
        ca_bundle: None,
        own_network: true,
        tmp_bytes: 1024 * 1024,
        drop_to,
        seccomp_fd: seccomp.as_ref().map(|f| f.as_raw_fd()),
        status_fd: None,
    };
    let argv = args(&plan);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null());
    if let Some(f) = &seccomp {
        inherit_in_child(&mut cmd, f.as_raw_fd());
    }
    let out = cmd.output();
    drop(seccomp);
    let _ = std::fs::remove_dir_all(&tmp);
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(
            "`bwrap` is not installed; fix: `apt-get install -y bubblewrap` (Debian package `bubblewrap`)"
                .into(),
        ),
        Err(e) => Err(format!("`bwrap` could not start: {e}")),
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
            let userns = !is_root()
                && ["uid map", "new namespace", "user namespace", "Operation not permitted"]
                    .iter()
                    .any(|m| err.contains(m));
            if userns {
                Err(format!("this user may not create user namespaces (bwrap: {err}); the sandbox of a worker that is not root needs unprivileged user namespaces (kernel.unprivileged_userns_clone, user.max_user_namespaces; in a container, a seccomp or AppArmor profile that allows them); fix: allow them, or run the worker as root"))
            } else {
                Err(format!("`bwrap` does not work here ({}): {err}", o.status))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            argv: vec!["bash".into(), "/agents/a.sh".into()],
            cwd: "/w/work/1/worktree".into(),
            writable: vec!["/w/work/1/worktree".into(), "/w/work/1/home".into()],
            readable: vec!["/agents/a.sh".into()],
            toolchain: vec!["/root/.cargo".into()],
            hosts_file: "/w/work/1/runtime/hosts".into(),
            ca_bundle: None,
            own_network: true,
            tmp_bytes: 4 << 20,
            drop_to: Some(DropTo {
                setpriv: "/usr/bin/setpriv".into(),
                user: crate::runtime::owner::SandboxUser {
                    uid: 65534,
                    gid: 65534,
                },
            }),
            seccomp_fd: Some(9),
            status_fd: None,
        }
    }

    fn has(a: &[String], seq: &[&str]) -> bool {
        a.windows(seq.len())
            .any(|w| w.iter().zip(seq).all(|(x, y)| x == y))
    }

    #[test]
    fn the_status_pipe_tells_a_failed_launch_from_the_programs_exit() {
        let mut p = plan();
        assert!(!args(&p).iter().any(|a| a == "--json-status-fd"));
        p.status_fd = Some(11);
        let a = args(&p);
        let at = a.iter().position(|x| x == "--json-status-fd").unwrap();
        assert_eq!(a[at + 1], "11");
        assert!(at < a.iter().position(|x| x == "--").unwrap_or(a.len()));
        // What bubblewrap 0.8 writes: a program that ran (whatever its exit), and a launch
        // that failed while setting up the sandbox (bind source missing), or wrote nothing.
        let ran = "{ \"child-pid\": 5, \"mnt-namespace\": 4026532179 }\n{ \"exit-code\": 137 }\n";
        let failed = "{ \"child-pid\": 5, \"mnt-namespace\": 4026532179 }\n";
        assert!(launched(ran));
        assert!(!launched(failed));
        assert!(!launched(""));
    }

    #[test]
    fn the_command_line_isolates_and_exposes_only_what_the_plan_says() {
        let a = args(&plan());
        for flag in [
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-net",
        ] {
            assert!(a.contains(&flag.to_string()), "{flag} missing: {a:?}");
        }
        // A root worker: bwrap keeps only what setpriv needs; the program runs as the
        // sandbox user with no capabilities, no new privileges, under the seccomp filter.
        assert!(has(
            &a,
            &[
                "--cap-drop",
                "ALL",
                "--cap-add",
                "CAP_SETUID",
                "--cap-add",
                "CAP_SETGID",
                "--cap-add",
                "CAP_SETPCAP"
            ]
        ));
        assert!(!a.contains(&"--unshare-user".to_string()));
        assert!(has(&a, &["--seccomp", "9"]));
        assert!(has(
            &a,
            &[
                "--",
                "/usr/bin/setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
                "bash",
                "/agents/a.sh"
            ]
        ));
        // The host-wide parts of /proc are read-only, after the fresh /proc.
        let proc_at = a.iter().position(|x| x == "--proc").unwrap();
        for p in PROC_READ_ONLY {
            let at = a
                .windows(3)
                .position(|w| w[0] == "--ro-bind-try" && w[1] == *p && w[2] == *p)
                .unwrap_or_else(|| panic!("{p} not read-only: {a:?}"));
            assert!(at > proc_at, "{p} bound before /proc");
        }
        // /dev/shm and /tmp are capped tmpfs everyone may write; /dev and / are read-only.
        for t in ["/dev/shm", "/tmp"] {
            assert!(has(
                &a,
                &["--perms", "1777", "--size", "4194304", "--tmpfs", t]
            ));
        }
        assert!(has(&a, &["--remount-ro", "/dev"]));
        let ro_root = a
            .windows(2)
            .position(|w| w[0] == "--remount-ro" && w[1] == "/")
            .unwrap();
        // The folders bwrap makes above the bound paths can be entered by the sandbox user.
        for d in ["/w", "/w/work", "/w/work/1", "/agents"] {
            let at = a
                .windows(3)
                .position(|w| w[0] == "--chmod" && w[1] == "0755" && w[2] == d)
                .unwrap_or_else(|| panic!("{d} not made enterable: {a:?}"));
            assert!(at < ro_root);
        }
        assert!(ro_root > a.iter().position(|x| x == "/w/work/1/home").unwrap());
        assert!(has(&a, &["--ro-bind", "/usr", "/usr"]));
        assert!(has(
            &a,
            &["--ro-bind", "/w/work/1/runtime/hosts", "/etc/hosts"]
        ));
        assert!(has(&a, &["--ro-bind-try", "/root/.cargo", "/root/.cargo"]));
        assert!(has(&a, &["--ro-bind", "/agents/a.sh", "/agents/a.sh"]));
        assert!(has(
            &a,
            &["--bind", "/w/work/1/worktree", "/w/work/1/worktree"]
        ));
        assert!(has(&a, &["--bind", "/w/work/1/home", "/w/work/1/home"]));
        assert!(has(
            &a,
            &["--chdir", "/w/work/1/worktree", "--", "/usr/bin/setpriv"]
        ));
        // Read-write binds come after the private /tmp, so a worktree under /tmp is not hidden.
        let tmp = a.iter().position(|x| x == "/tmp").unwrap();
        let wt = a.iter().position(|x| x == "/w/work/1/worktree").unwrap();
        assert!(tmp < wt);
        // Nothing of the host's root, /home, /root, /var or /proc is bound.
        for p in ["/", "/home", "/root", "/var", "/run", "/sys"] {
            assert!(
                !has(&a, &["--bind", p]) && !has(&a, &["--ro-bind", p]),
                "{p} exposed"
            );
        }
    }

    #[test]
    fn declared_endpoints_keep_the_prepared_namespace_and_non_root_uses_a_user_namespace() {
        let mut p = plan();
        p.own_network = false;
        p.drop_to = None;
        let a = args(&p);
        assert!(!a.contains(&"--unshare-net".to_string()));
        assert!(a.contains(&"--unshare-user".to_string()));
        assert!(!a.contains(&"--cap-drop".to_string()));
        assert!(!a.iter().any(|x| x.contains("setpriv")));
        assert!(has(&a, &["--", "bash", "/agents/a.sh"]));
    }

    #[test]
    fn the_made_folders_are_the_unbound_ancestors_of_bound_paths() {
        let mut p = plan();
        p.toolchain = vec!["/nonexistent-akbench-toolchain/x".into()];
        p.readable = vec!["/tmp/t1/agents/a.sh".into(), "/r/repo".into()];
        p.writable = vec!["/tmp/t1/ws".into(), "/r/repo/.git/worktrees/w".into()];
        let got = made_folders(&p);
        let want: Vec<PathBuf> = ["/etc", "/r", "/tmp/t1", "/tmp/t1/agents"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let mut g = got.clone();
        g.sort();
        assert_eq!(g, want, "{got:?}");
    }

    #[test]
    fn a_missing_kernel_feature_is_named_with_its_fix() {
        let cases = [
            (None, None, None, None),
            (Some("1\n"), Some("15000\n"), Some("0\n"), None),
            (
                Some("0\n"),
                Some("15000"),
                None,
                Some("kernel.unprivileged_userns_clone = 0"),
            ),
            (
                None,
                Some("0\n"),
                None,
                Some("user.max_user_namespaces = 0"),
            ),
            (
                None,
                None,
                Some("1"),
                Some("kernel.apparmor_restrict_unprivileged_userns = 1"),
            ),
        ];
        for (clone, max, aa, want) in cases {
            let got = missing_userns_feature(clone, max, aa);
            match want {
                None => assert_eq!(got, None),
                Some(w) => {
                    let g = got.unwrap();
                    assert!(g.contains(w) && g.contains("fix:"), "{g}");
                    assert!(!g.contains("bubblewrap"), "{g}");
                }
            }
        }
    }

    #[test]
    fn install_prefixes_skip_system_folders() {
        let cases = [
            ("/usr/bin/node", None),
            ("/bin/git", None),
            ("/opt/node/bin/node", Some("/opt/node")),
            ("/root/.cargo/bin/cargo", Some("/root/.cargo")),
            ("/srv/tools/claude", Some("/srv/tools")),
            ("/root/.pyenv/shims/python3", Some("/root/.pyenv")),
        ];
        for (p, want) in cases {
            assert_eq!(install_prefix(Path::new(p)), want.map(PathBuf::from), "{p}");
        }
    }
}
