//! What a worker's `sandbox` runtime needs from the place it is deployed, and which of it is
//! missing: the rule behind the worker's start-up check (`akbench-worker` refuses to start
//! when the sandbox cannot run, naming the missing kernel feature or permission, not a
//! package). deploy/README.md ("What a worker needs") gives the settings that provide each.
//!
//! The sandbox probe (bubblewrap running `true` the way attempts run, and a cgroup made and
//! removed) says *that* something failed; [`diagnose`] reads its message together with what
//! the worker sees of its own confinement ([`Confinement`]) and says *what* is missing.

/// What the worker process sees of its own confinement (read from `/proc/self/status`,
/// `/proc/self/mountinfo` and its uid; all pure data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Confinement {
    /// A seccomp filter is applied to this process (`Seccomp: 2`).
    pub seccomp_filter: bool,
    /// Parts of `/proc` are covered by other mounts (a container runtime's masked paths:
    /// `/proc/kcore`, `/proc/keys`, `/proc/timer_list`, ...).
    pub proc_masked: bool,
    /// The worker's uid.
    pub uid: u32,
}

/// A missing requirement, with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// Creating a user namespace (and mounting inside it) is refused by a seccomp filter.
    UserNamespacesBySeccomp,
    /// Creating a user namespace is refused, no seccomp filter in sight (a kernel setting
    /// or an AppArmor policy): the probe's own message names which.
    UserNamespaces,
    /// A new `/proc` cannot be mounted because parts of this `/proc` are covered by other
    /// mounts.
    UnmaskedProc,
    /// No cgroup the worker may write.
    WritableCgroup,
    /// Something else: the probe's message as it is.
    Other,
}

impl Missing {
    /// One sentence naming what is missing and how to provide it.
    pub fn explain(&self, c: &Confinement) -> String {
        match self {
            Missing::UserNamespacesBySeccomp => "missing: user namespaces. A seccomp filter on this worker refuses the system calls the sandbox makes (unshare/clone with CLONE_NEWUSER and CLONE_NEWNS, mount, pivot_root): container runtimes' default profiles do. Fix: run the worker with deploy/security/worker-seccomp.json (compose: security_opt `seccomp=...`; Kubernetes: seccompProfile type Localhost)".into(),
            Missing::UserNamespaces => "missing: unprivileged user namespaces (kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor policy refuses them; see the probe's message)".into(),
            Missing::UnmaskedProc => "missing: an uncovered /proc. The container runtime mounted over parts of this container's /proc (/proc/kcore, /proc/keys, read-only /proc/sys, ...), so the kernel refuses the sandbox a /proc of its own. Fix: start through the worker image's entry point with CAP_SYS_ADMIN and CAP_SETPCAP (it unmounts the covers, then drops every capability); or `docker run --security-opt systempaths=unconfined`, or Kubernetes securityContext.procMount: Unmasked where the ProcMountType feature is on".into(),
            Missing::WritableCgroup => format!("missing: a cgroup this worker (uid {}) may write, for the sandbox's memory, pids and cpu limits. Fix: in a container, bind /sys/fs/cgroup/memory, /sys/fs/cgroup/pids and /sys/fs/cgroup/cpu read-write (cgroup v1) and start through the image's entry point, which gives the worker user an `akbench` group below the container's own; on a host, run the worker as root or delegate its cgroup to it (systemd Delegate=yes)", c.uid),
            Missing::Other => "the sandbox probe failed (its message says why)".into(),
        }
    }
}

/// Which requirement the probe's failure `reason` shows missing, given `c` (pure).
pub fn diagnose(reason: &str, c: &Confinement) -> Missing {
    let r = reason.to_ascii_lowercase();
    if r.contains("cgroup") {
        return Missing::WritableCgroup;
    }
    if r.contains("mount proc") || (r.contains("/proc") && r.contains("operation not permitted")) {
        return if c.proc_masked {
            Missing::UnmaskedProc
        } else {
            Missing::Other
        };
    }
    let userns = [
        "new namespace",
        "user namespace",
        "uid map",
        "setting up uid map",
    ]
    .iter()
    .any(|m| r.contains(m));
    if userns {
        return if c.seccomp_filter {
            Missing::UserNamespacesBySeccomp
        } else {
            Missing::UserNamespaces
        };
    }
    Missing::Other
}

/// `/proc` paths a container runtime masks (Docker, containerd/CRI `procMount: Default`).
pub const MASKED_PROC_PATHS: &[&str] = &[
    "/proc/kcore",
    "/proc/keys",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/acpi",
    "/proc/scsi",
    "/proc/latency_stats",
];

/// Whether `/proc/self/mountinfo` text shows a mount over one of [`MASKED_PROC_PATHS`] (a
/// host's own submounts such as `/proc/sys/fs/binfmt_misc` do not count).
pub fn proc_masked(mountinfo: &str) -> bool {
    mountinfo.lines().any(|l| {
        l.split_whitespace()
            .nth(4)
            .is_some_and(|mount_point| MASKED_PROC_PATHS.contains(&mount_point))
    })
}

/// Whether `/proc/self/status` text says a seccomp filter applies (`Seccomp: 2`).
pub fn seccomp_filter(status: &str) -> bool {
    status
        .lines()
        .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECCOMP: Confinement = Confinement {
        seccomp_filter: true,
        proc_masked: true,
        uid: 10001,
    };
    const PLAIN: Confinement = Confinement {
        seccomp_filter: false,
        proc_masked: false,
        uid: 10001,
    };

    #[test]
    fn each_probe_failure_names_what_is_missing() {
        let cases: &[(&str, Confinement, Missing)] = &[
            // Docker's default seccomp profile: bwrap cannot make its namespaces.
            ("this user may not create user namespaces (bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.)", SECCOMP, Missing::UserNamespacesBySeccomp),
            ("this user may not create user namespaces (bwrap: No permissions to create new namespace)", PLAIN, Missing::UserNamespaces),
            ("bwrap: setting up uid map: Permission denied", SECCOMP, Missing::UserNamespacesBySeccomp),
            // seccomp allows namespaces, but /proc is masked.
            ("this user may not create user namespaces (bwrap: Can't mount proc on /newroot/proc: Operation not permitted)", SECCOMP, Missing::UnmaskedProc),
            ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted", PLAIN, Missing::Other),
            // No writable cgroup (read-only /sys/fs/cgroup, or owned by root).
            ("cannot create /sys/fs/cgroup/memory/docker/x/akbench/probe-1: Read-only file system: the sandbox needs a cgroup hierarchy", SECCOMP, Missing::WritableCgroup),
            ("no writable cgroup hierarchy with memory and pids controllers", PLAIN, Missing::WritableCgroup),
            ("`bwrap` does not work here (exit status: 1): bwrap: execvp true: No such file or directory", PLAIN, Missing::Other),
        ];
        for (reason, c, want) in cases {
            assert_eq!(&diagnose(reason, c), want, "{reason}");
        }
    }

    #[test]
    fn explanations_name_the_feature_and_the_setting_not_a_package() {
        for (m, words) in [
            (
                Missing::UserNamespacesBySeccomp,
                &["user namespaces", "seccomp", "worker-seccomp.json"][..],
            ),
            (
                Missing::UnmaskedProc,
                &[
                    "/proc",
                    "CAP_SYS_ADMIN",
                    "systempaths=unconfined",
                    "procMount: Unmasked",
                ][..],
            ),
            (
                Missing::WritableCgroup,
                &["cgroup", "uid 10001", "read-write"][..],
            ),
            (Missing::UserNamespaces, &["user namespaces"][..]),
        ] {
            let e = m.explain(&PLAIN);
            for w in words {
                assert!(e.contains(w), "{m:?}: {e} lacks {w}");
            }
            assert!(!e.contains("apt-get") && !e.contains("install"), "{e}");
        }
    }

    #[test]
    fn confinement_is_read_from_proc_text() {
        let docker = "600 500 0:60 / /proc rw,nosuid - proc proc rw\n\
                      601 600 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw\n";
        let host = "600 500 0:60 / /proc rw,nosuid - proc proc rw\n\
                    602 600 0:61 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw\n";
        assert!(proc_masked(docker));
        assert!(!proc_masked(host));
        assert!(!proc_masked(""));
        assert!(seccomp_filter(
            "Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1\n"
        ));
        assert!(!seccomp_filter("Seccomp:\t0\n"));
        assert!(!seccomp_filter("Seccomp_filters:\t2\n"));
    }
}
