//! The escape suite's privilege attacks: from inside the `sandbox` runtime, try what host
//! root (or any capability) would allow, and check that each is refused and that the host
//! is unchanged. The sysctl attacks only ever write the value already there, so even a
//! sandbox that let them through changes nothing.
//!
//! Every test needs a working sandbox (bubblewrap and writable cgroups); where there is none
//! it prints that it skipped.

use akbench_worker::process::{base_env, spawn, CancelToken, ProcessSpec};
use akbench_worker::runtime::seccomp::{Arch, DENIED};
use akbench_worker::runtime::{
    prepare, sandbox_available, Exposure, Finished, Limits, RuntimeKind,
};
use std::os::unix::fs::PermissionsExt;

#[allow(dead_code)]
#[path = "common/rerun.rs"]
mod rerun;
#[allow(dead_code)] // the rerun of a whole suite is for the files that use tests/common
#[path = "common/unprivileged.rs"]
mod unprivileged;
use std::path::PathBuf;
use std::time::Duration;

fn sandbox_works(test: &str) -> bool {
    match sandbox_available() {
        Ok(()) => true,
        Err(e) => {
            akbench_core::testkit::skip(test, &format!("the sandbox does not work here: {e}"));
            false
        }
    }
}

/// What a script run in the sandbox printed, and how the runtime saw its end.
struct Ran {
    stdout: String,
    stderr: String,
    finished: Finished,
}

/// Runs `script` with `sh` in a sandbox with a fresh worktree and home, `readable` bound
/// read-only.
fn run(script: &str, limits: Limits, readable: Vec<PathBuf>) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let spec = ProcessSpec {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: ws.clone(),
        env: base_env(&home),
        stdout_path: dir.path().join("out"),
        stderr_path: dir.path().join("err"),
        output_cap: 1 << 20,
        timeout: Duration::from_secs(120),
        grace: Duration::from_secs(1),
        tag: uuid::Uuid::now_v7().to_string(),
        hooks: Default::default(),
    };
    let exposure = Exposure {
        hosts: Vec::new(),
        budget: None,
        egress: None,
        writable: vec![ws.clone(), home.clone()],
        readable,
        endpoints: Vec::new(),
        disk_roots: vec![ws.clone(), home.clone()],
        scratch: dir.path().join("rt"),
        container: None,
    };
    let p = prepare(RuntimeKind::Sandbox, spec, &exposure, limits).unwrap();
    let running = spawn(p.spec).unwrap();
    let _ = running.wait(&CancelToken::new());
    let finished = p.guard.finish();
    let r = Ran {
        stdout: std::fs::read_to_string(dir.path().join("out")).unwrap_or_default(),
        stderr: std::fs::read_to_string(dir.path().join("err")).unwrap_or_default(),
        finished,
    };
    eprintln!("stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

const SYSCTLS: &[&str] = &[
    "kernel/core_pattern",
    "kernel/pid_max",
    "vm/overcommit_memory",
];

fn host_sysctls() -> Vec<String> {
    SYSCTLS
        .iter()
        .map(|s| std::fs::read_to_string(format!("/proc/sys/{s}")).unwrap())
        .collect()
}

#[test]
fn writing_a_sysctl_is_refused_and_the_host_is_unchanged() {
    if !sandbox_works("writing_a_sysctl_is_refused_and_the_host_is_unchanged") {
        return;
    }
    let before = host_sysctls();
    // Each attack writes back the value already there: refused or not, the host keeps it.
    let mut script = String::new();
    for s in SYSCTLS {
        script.push_str(&format!(
            "v=\"$(cat /proc/sys/{s})\"; if (printf '%s\\n' \"$v\" > /proc/sys/{s}) 2>/dev/null; then echo 'ESCAPED wrote {s}'; else echo 'refused {s}'; fi\n"
        ));
    }
    let r = run(&script, Limits::default(), Vec::new());
    assert_eq!(host_sysctls(), before, "a host sysctl changed");
    for s in SYSCTLS {
        assert!(
            r.stdout.contains(&format!("refused {s}")),
            "{s}: {}",
            r.stdout
        );
    }
    assert!(!r.stdout.contains("ESCAPED"), "{}", r.stdout);
}

#[test]
fn the_host_wide_parts_of_proc_cannot_be_opened_for_writing() {
    if !sandbox_works("the_host_wide_parts_of_proc_cannot_be_opened_for_writing") {
        return;
    }
    // `: >>` opens for writing and writes nothing: a sysrq-trigger opened this way triggers
    // nothing, so a sandbox that let it through still changes nothing.
    let r = run(
        "for f in /proc/sysrq-trigger /proc/sys/kernel/core_pattern /proc/sys/kernel/modprobe; do\n\
           if [ -e \"$f\" ] && (: >> \"$f\") 2>/dev/null; then echo \"ESCAPED $f\"; else echo \"refused $f\"; fi\n\
         done\n",
        Limits::default(),
        Vec::new(),
    );
    assert!(
        r.stdout.contains("refused /proc/sysrq-trigger"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("ESCAPED"), "{}", r.stdout);
}

#[test]
fn the_sandboxed_process_is_an_unprivileged_host_user_with_no_capabilities() {
    if !sandbox_works("the_sandboxed_process_is_an_unprivileged_host_user_with_no_capabilities") {
        return;
    }
    // A host file only its owner (the worker) may read, bound into the sandbox read-only.
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "the worker's secret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let worker_uid = unsafe { libc::geteuid() };
    let r = run(
        &format!(
            "grep -E '^(Uid|Gid|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status\n\
             cat {} 2>/dev/null && echo ESCAPED-read\n\
             echo done\n",
            secret.display()
        ),
        Limits::default(),
        vec![secret.clone()],
    );
    assert!(r.stdout.contains("done"), "{}", r.stdout);
    assert!(!r.stdout.contains("ESCAPED"), "{}", r.stdout);
    let field = |name: &str| -> Vec<String> {
        r.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {}", r.stdout))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    // /proc/self/status shows ids as the host sees them where there is no user namespace,
    // and the same ids where the namespace maps the worker's own uid to itself.
    for id in field("Uid").iter().chain(field("Gid").iter()) {
        assert_ne!(id, "0", "runs as host root: {}", r.stdout);
    }
    if worker_uid != 0 {
        assert_eq!(field("Uid")[0], worker_uid.to_string());
    }
    for cap in ["CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(field(cap), ["0000000000000000"], "{cap}: {}", r.stdout);
    }
    if worker_uid == 0 {
        assert_eq!(field("CapBnd"), ["0000000000000000"], "{}", r.stdout);
        assert_eq!(field("NoNewPrivs"), ["1"], "{}", r.stdout);
    }
}

#[test]
fn a_system_call_on_the_deny_list_fails_with_eperm() {
    if !sandbox_works("a_system_call_on_the_deny_list_fails_with_eperm") {
        return;
    }
    let Some(arch) = Arch::native() else {
        akbench_core::testkit::skip(
            "a_system_call_on_the_deny_list_fails_with_eperm",
            "the seccomp filter does not know this architecture",
        );
        return;
    };
    let nr = |name: &str| {
        let (_, x, a, _) = DENIED.iter().find(|d| d.0 == name).unwrap();
        if arch == Arch::X86_64 {
            *x
        } else {
            *a
        }
    };
    // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 1) works for anyone without the
    // filter; mount inside a fresh user namespace works for anyone without the filter.
    let script = format!(
        "/usr/bin/python3 - <<'EOF'\n\
import ctypes, os\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
r = libc.syscall({keyctl}, 0, ctypes.c_long(-3), 1)\n\
e = ctypes.get_errno()\n\
print('keyctl', 'EPERM' if r == -1 and e == 1 else 'ESCAPED r=%d errno=%d' % (r, e))\n\
EOF\n\
if unshare -Urm sh -c 'mount -t tmpfs none /tmp' 2>/dev/null; then echo 'mount ESCAPED'; else echo 'mount refused'; fi\n",
        keyctl = nr("keyctl")
    );
    let r = run(&script, Limits::default(), Vec::new());
    assert!(r.stdout.contains("keyctl EPERM"), "{}", r.stdout);
    assert!(r.stdout.contains("mount refused"), "{}", r.stdout);
    assert!(!r.stdout.contains("ESCAPED"), "{}", r.stdout);
}

#[test]
fn dev_shm_is_capped_and_counted_in_disk_mb() {
    if !sandbox_works("dev_shm_is_capped_and_counted_in_disk_mb") {
        return;
    }
    let limits = Limits {
        disk_mb: 64,
        ..Limits::default()
    };
    // One file past the cap: the tmpfs refuses the rest.
    let r = run(
        "head -c 200000000 /dev/zero > /dev/shm/fill 2>/dev/null\nstat -c 'size %s' /dev/shm/fill\n",
        limits,
        Vec::new(),
    );
    let size: u64 = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("size "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no size in {}", r.stdout));
    assert!(
        size <= 64 << 20,
        "/dev/shm took {size} bytes with disk_mb = 64"
    );
    // /tmp and /dev/shm together over the limit, each under it: the disk limit stops the
    // agent while it waits (it is killed; the wait is the agent's, the test does not time).
    let r = run(
        "head -c 40000000 /dev/zero > /tmp/a\nhead -c 40000000 /dev/zero > /dev/shm/b\necho wrote\nsleep 60\necho ESCAPED\n",
        limits,
        Vec::new(),
    );
    // (It may be stopped while the second file is still being written.)
    assert!(!r.stdout.contains("ESCAPED"), "{}", r.stdout);
    assert_eq!(
        r.finished.facts.limit_hit.as_deref(),
        Some("disk_mb"),
        "{:?}",
        r.finished
    );
}

/// Runs only when re-executed by [`a_worker_that_is_not_root_runs_the_same_sandbox`], as an
/// unprivileged user: probes the sandbox and, where it works, runs the privilege checks in
/// it; writes what it saw to the file `AKBENCH_PRIV_HELPER` names.
#[test]
fn helper_unprivileged_worker() {
    let Ok(out) = std::env::var("AKBENCH_PRIV_HELPER") else {
        return;
    };
    let report = match sandbox_available() {
        Err(e) => format!("unavailable: {e}\n"),
        Ok(()) => {
            let before = host_sysctls();
            let mut script = String::from(
                "grep -E '^(Uid|CapEff|CapPrm):' /proc/self/status\ncat /proc/self/uid_map\n",
            );
            for s in SYSCTLS {
                script.push_str(&format!(
                    "v=\"$(cat /proc/sys/{s})\"; if (printf '%s\\n' \"$v\" > /proc/sys/{s}) 2>/dev/null; then echo 'ESCAPED wrote {s}'; else echo 'refused {s}'; fi\n"
                ));
            }
            script.push_str("if unshare -Urm sh -c 'mount -t tmpfs none /tmp' 2>/dev/null; then echo 'mount ESCAPED'; else echo 'mount refused'; fi\n");
            let r = run(&script, Limits::default(), Vec::new());
            let same = host_sysctls() == before;
            format!("available\nhost unchanged: {same}\n{}", r.stdout)
        }
    };
    std::fs::write(out, report).unwrap();
}

#[test]
fn a_worker_that_is_not_root_runs_the_same_sandbox_or_names_what_it_lacks() {
    let test = "a_worker_that_is_not_root_runs_the_same_sandbox_or_names_what_it_lacks";
    if unsafe { libc::geteuid() } != 0 {
        akbench_core::testkit::skip(test, "needs root to start the worker as another user");
        return;
    }
    const UID: u32 = unprivileged::UID;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let report = dir.path().join("report");
    // Twice: without a cgroup it may write (the probe must name that), and with one
    // delegated to it (the sandbox must run, unprivileged), where the hierarchy allows.
    for delegated in [false, true] {
        let groups = if delegated {
            match unprivileged::delegate_cgroup(UID) {
                Some(g) => g,
                None => {
                    eprintln!(
                        "{test}: no cgroup hierarchy to delegate; only the refusal was checked"
                    );
                    break;
                }
            }
        } else {
            Vec::new()
        };
        let procs: Vec<std::ffi::CString> = groups
            .iter()
            .map(|d| {
                std::ffi::CString::new(d.join("cgroup.procs").as_os_str().as_encoded_bytes())
                    .unwrap()
            })
            .collect();
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "helper_unprivileged_worker", "--nocapture"])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", dir.path())
            .env("TMPDIR", dir.path())
            .env("AKBENCH_PRIV_HELPER", &report)
            .current_dir(dir.path());
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls (open, write, close, setgroups, setgid,
        // setuid) on data made before fork.
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
        let out = cmd.output().unwrap();
        for d in groups.iter().rev() {
            let _ = std::fs::remove_dir(d.join("akbench"));
            let _ = std::fs::remove_dir(d);
        }
        let seen = std::fs::read_to_string(&report).unwrap_or_else(|_| {
            panic!(
                "the helper wrote no report: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        eprintln!("delegated={delegated}: {seen}");
        if let Some(why) = seen.strip_prefix("unavailable: ") {
            // Named: the missing feature and its fix, never "install bubblewrap".
            assert!(why.contains("fix:"), "{why}");
            assert!(!why.contains("install -y bubblewrap"), "{why}");
            assert!(
                !delegated,
                "with a delegated cgroup the sandbox must work: {why}"
            );
            assert!(
                why.contains("cgroup") || why.contains("user namespace"),
                "{why}"
            );
            continue;
        }
        assert!(seen.contains("host unchanged: true"), "{seen}");
        assert!(seen.contains(&format!("Uid:\t{UID}\t{UID}")), "{seen}");
        assert!(seen.contains("CapEff:\t0000000000000000"), "{seen}");
        // One id mapped into the user namespace: the worker's own uid (bwrap nests a second
        // namespace under the one it set up in, so the outside id read from inside is the
        // first namespace's 0, itself the worker's uid on the host).
        assert!(
            seen.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() == 3 && f[0] == UID.to_string() && f[2] == "1"
            }),
            "{seen}"
        );
        for s in SYSCTLS {
            assert!(seen.contains(&format!("refused {s}")), "{seen}");
        }
        assert!(seen.contains("mount refused"), "{seen}");
        assert!(!seen.contains("ESCAPED"), "{seen}");
    }
}
