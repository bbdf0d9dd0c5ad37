//! The bubblewrap command line of the `sandbox` runtime: what the process sees.
//!
//! Mounts, in order: the system folders read-only (`/usr`, and `/bin`, `/sbin`, `/lib*` as
//! the symlinks or folders they are on the host), the pieces of `/etc` programs need
//! (users, name service, dynamic linker, certificates, time zone, alternatives) and a
//! generated `/etc/hosts`, a fresh `/proc` and `/dev`, a private size-capped `/tmp`, the
//! toolchain homes read-only (rustup, cargo, and the install prefixes of node, npm, python3,
//! claude and codex when they live outside `/usr`), then the allowed read-only paths and the
//! read-write folders at their host paths. Nothing else of the host exists inside.

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
    /// True: bwrap makes an empty network namespace (only loopback); false: the process was
    /// already put in one (with forwarders) before bwrap started.
    pub own_network: bool,
    /// Size of the private /tmp.
    pub tmp_bytes: u64,
    /// The worker runs as root: no user namespace, every capability dropped.
    pub as_root: bool,
}

/// The full bwrap argv for `plan` (pure).
pub fn args(plan: &Plan) -> Vec<String> {
    let mut a: Vec<String> = vec!["bwrap".into()];
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
    push(&[
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "akbench-sandbox",
    ]);
    if plan.own_network {
        push(&["--unshare-net"]);
    }
    if plan.as_root {
        push(&["--cap-drop", "ALL"]);
    } else {
        push(&["--unshare-user"]);
    }
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
    a.extend(["--ro-bind".into(), s(&plan.hosts_file), "/etc/hosts".into()]);
    a.extend([
        "--proc".into(),
        "/proc".into(),
        "--dev".into(),
        "/dev".into(),
    ]);
    a.extend([
        "--size".into(),
        plan.tmp_bytes.max(1024 * 1024).to_string(),
        "--tmpfs".into(),
        "/tmp".into(),
    ]);
    for t in &plan.toolchain {
        a.extend(["--ro-bind-try".into(), s(t), s(t)]);
    }
    for r in &plan.readable {
        a.extend(["--ro-bind".into(), s(r), s(r)]);
    }
    for w in &plan.writable {
        a.extend(["--bind".into(), s(w), s(w)]);
    }
    a.extend(["--chdir".into(), s(&plan.cwd), "--".into()]);
    a.extend(plan.argv.iter().cloned());
    a
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
fn install_prefix(program: &Path) -> Option<PathBuf> {
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

/// Runs `true` in a sandbox shaped like the real ones; the message says what failed.
pub fn probe() -> Result<(), String> {
    let tmp = std::env::temp_dir().join(format!("akbench-probe-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let hosts = tmp.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n")
        .map_err(|e| format!("cannot write {}: {e}", hosts.display()))?;
    let plan = Plan {
        argv: vec!["true".into()],
        cwd: tmp.clone(),
        writable: vec![tmp.clone()],
        readable: Vec::new(),
        toolchain: Vec::new(),
        hosts_file: hosts,
        own_network: true,
        tmp_bytes: 1024 * 1024,
        as_root: is_root(),
    };
    let argv = args(&plan);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output();
    let _ = std::fs::remove_dir_all(&tmp);
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("`bwrap` is not installed (Debian package `bubblewrap`)".into())
        }
        Err(e) => Err(format!("`bwrap` could not start: {e}")),
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`bwrap` does not work here ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
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
            own_network: true,
            tmp_bytes: 4 << 20,
            as_root: true,
        }
    }

    fn has(a: &[String], seq: &[&str]) -> bool {
        a.windows(seq.len())
            .any(|w| w.iter().zip(seq).all(|(x, y)| x == y))
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
        assert!(has(&a, &["--cap-drop", "ALL"]));
        assert!(has(&a, &["--ro-bind", "/usr", "/usr"]));
        assert!(has(
            &a,
            &["--ro-bind", "/w/work/1/runtime/hosts", "/etc/hosts"]
        ));
        assert!(has(&a, &["--size", "4194304", "--tmpfs", "/tmp"]));
        assert!(has(&a, &["--ro-bind-try", "/root/.cargo", "/root/.cargo"]));
        assert!(has(&a, &["--ro-bind", "/agents/a.sh", "/agents/a.sh"]));
        assert!(has(
            &a,
            &["--bind", "/w/work/1/worktree", "/w/work/1/worktree"]
        ));
        assert!(has(&a, &["--bind", "/w/work/1/home", "/w/work/1/home"]));
        assert!(has(
            &a,
            &[
                "--chdir",
                "/w/work/1/worktree",
                "--",
                "bash",
                "/agents/a.sh"
            ]
        ));
        // Read-write binds come after the private /tmp, so a worktree under /tmp is not hidden.
        let tmp = a.iter().position(|x| x == "--tmpfs").unwrap();
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
        p.as_root = false;
        let a = args(&p);
        assert!(!a.contains(&"--unshare-net".to_string()));
        assert!(a.contains(&"--unshare-user".to_string()));
        assert!(!a.contains(&"--cap-drop".to_string()));
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
