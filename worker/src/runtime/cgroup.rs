//! Per-sandbox cgroups: memory (with swap), process count and CPU quota.
//!
//! cgroup v1 controllers are used where they are mounted and writable (each group is made
//! below this process's own group of that controller, so host accounting still holds); a v2
//! hierarchy is used where it delegates `memory` and `pids`. The sandboxed process joins the
//! groups before it execs bwrap (so every descendant is inside), the groups tell which limit
//! was hit, and [`Group::kill_all_and_wait`] is how the runtime knows every process of the
//! attempt is gone.
//!
//! A [`Budget`] is one group the members of an interactive world share: the environment
//! (keeper, agent and what it leaves running) and each sidecar service are groups nested in
//! it ([`Group::create_in`]), so the world together stays within the task's limits, as one
//! trial's compute. Each member keeps its own limits and counters (which one was killed);
//! the budget's counts whether the limit reached was the shared one.

use super::Limits;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROOT: &str = "/sys/fs/cgroup";

/// Which hierarchy the groups live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    V1,
    V2,
}

/// The cgroups of one sandbox (cloneable handle).
#[derive(Debug, Clone)]
pub struct Group(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    flavor: Flavor,
    /// memory, pids, cpu folders (v1), or the single folder (v2).
    dirs: Vec<PathBuf>,
    /// The budget this group is nested in, kept until the group is gone.
    budget: Option<Arc<Budget>>,
}

/// The group the members of an interactive world share (see the module's doc): made with
/// the task's limits, removed when the last holder drops it (after its members' groups).
#[derive(Debug)]
pub struct Budget(Group);

impl Budget {
    /// Makes the group `akbench/<tag>` with `limits`, for members to be nested in.
    pub fn create(tag: &str, limits: &Limits) -> Result<Arc<Budget>, String> {
        Group::create(tag, limits).map(|g| Arc::new(Budget(g)))
    }

    /// Pids alive in the budget's own group (members live in theirs).
    pub fn members(&self) -> Vec<i32> {
        self.0.members()
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        self.0.remove();
    }
}

/// Counters read after the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hits {
    /// Processes the kernel killed for going over the memory limit.
    pub oom_kills: u64,
    /// Forks refused by the process limit.
    pub pids_refused: u64,
    /// Times the group's usage reached its own memory limit (v2 `memory.events` `oom`);
    /// `None` on v1, which does not count it. An OOM kill without one was the host's.
    pub limit_reached: Option<u64>,
}

/// The path of this process's group for v1 controller `controller`, from
/// `/proc/self/cgroup` text (pure).
pub fn own_path(proc_self_cgroup: &str, controller: &str) -> Option<String> {
    proc_self_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let _id = f.next()?;
        let ctrls = f.next()?;
        let path = f.next()?;
        if controller.is_empty() {
            (ctrls.is_empty()).then(|| path.to_string())
        } else {
            ctrls
                .split(',')
                .any(|c| c == controller)
                .then(|| path.to_string())
        }
    })
}

/// Reads `key value` from a flat-keyed cgroup file (`memory.oom_control`, `pids.events`).
pub fn keyed(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

fn flavor_and_parents() -> Result<(Flavor, Vec<PathBuf>), String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let v1: Option<Vec<PathBuf>> = ["memory", "pids", "cpu"]
        .iter()
        .map(|c| {
            let base = Path::new(ROOT).join(c);
            let p = own_path(&own, c)?;
            base.join("cgroup.procs")
                .exists()
                .then(|| base.join(p.trim_start_matches('/')))
        })
        .collect();
    if let Some(dirs) = v1 {
        return Ok((Flavor::V1, dirs));
    }
    for base in [PathBuf::from(ROOT), Path::new(ROOT).join("unified")] {
        let ctrls = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
        let has = |c: &str| ctrls.split_whitespace().any(|x| x == c);
        if has("memory") && has("pids") {
            let p = own_path(&own, "").unwrap_or_else(|| "/".into());
            return Ok((Flavor::V2, vec![base.join(p.trim_start_matches('/'))]));
        }
    }
    Err("no writable cgroup hierarchy with memory and pids controllers (v1 memory/pids/cpu or a delegated v2)".into())
}

/// Checks that a group can be made and removed here.
pub fn probe() -> Result<(), String> {
    let g = Group::create(&format!("probe-{}", std::process::id()), &Limits::default())
        .map_err(|e| {
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            format!("{e}: the sandbox needs a cgroup hierarchy this user (uid {uid}) may write (cgroup v1 `memory`, `pids` and `cpu` controllers, or a cgroup v2 subtree with `memory`, `pids` and `cpu` delegated to it); fix: run the worker as root, or delegate its cgroup to it (systemd `Delegate=yes`; in a container, a writable /sys/fs/cgroup)")
        })?;
    g.remove();
    Ok(())
}

/// Removes groups left by a worker that was killed (`kill -9` leaves its empty groups):
/// those older than a minute, a [`Budget`]'s members before it (`depth` 1: one level of
/// nesting); a group still in use is never empty that long and the kernel refuses to
/// remove a group with members.
fn remove_stale(dir: &Path, depth: u8) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let old = e
            .metadata()
            .ok()
            .filter(|m| m.is_dir())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(60));
        if old {
            if depth > 0 {
                remove_stale(&e.path(), depth - 1);
            }
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// True at most once a minute per process: stale groups are at least a minute old, so
/// looking for them at every attempt (a listing and a stat per group, per controller) finds
/// nothing a sweep a minute earlier did not.
fn stale_sweep_due() -> bool {
    static LAST: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let due = last.is_none_or(|t| t.elapsed() >= Duration::from_secs(60));
    if due {
        *last = Some(Instant::now());
    }
    due
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value)
        .map_err(|e| format!("cannot write `{value}` to {}: {e}", path.display()))
}

impl Group {
    /// Makes the groups `akbench/<tag>` and sets `limits`.
    pub fn create(tag: &str, limits: &Limits) -> Result<Group, String> {
        let (flavor, parents) = flavor_and_parents()?;
        let sweep_stale = stale_sweep_due();
        let mut dirs = Vec::new();
        for p in &parents {
            if sweep_stale {
                remove_stale(&p.join("akbench"), 1);
            }
            dirs.push(p.join("akbench").join(tag));
        }
        Self::made(flavor, dirs, None, limits)
    }

    /// Makes the group `<budget>/<tag>`, nested in `budget`, with `limits` of its own.
    pub fn create_in(budget: &Arc<Budget>, tag: &str, limits: &Limits) -> Result<Group, String> {
        let b = &budget.0 .0;
        let dirs = b.dirs.iter().map(|d| d.join(tag)).collect();
        Self::made(b.flavor, dirs, Some(budget.clone()), limits)
    }

    fn made(
        flavor: Flavor,
        dirs: Vec<PathBuf>,
        budget: Option<Arc<Budget>>,
        limits: &Limits,
    ) -> Result<Group, String> {
        for d in &dirs {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let g = Group(Arc::new(Inner {
            flavor,
            dirs,
            budget,
        }));
        if let Err(e) = g.set_limits(limits) {
            g.remove();
            return Err(e);
        }
        Ok(g)
    }

    fn set_limits(&self, l: &Limits) -> Result<(), String> {
        let d = &self.0.dirs;
        match self.0.flavor {
            Flavor::V1 => {
                if let Some(m) = l.memory_mb {
                    let bytes = (m * 1024 * 1024).to_string();
                    write(&d[0].join("memory.limit_in_bytes"), &bytes)?;
                    let memsw = d[0].join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write(&memsw, &bytes)?;
                    }
                }
                write(&d[1].join("pids.max"), &l.pids.to_string())?;
                if let Some(c) = l.cpus {
                    write(&d[2].join("cpu.cfs_period_us"), "100000")?;
                    write(
                        &d[2].join("cpu.cfs_quota_us"),
                        &(u64::from(c) * 100_000).to_string(),
                    )?;
                }
            }
            Flavor::V2 => {
                if let Some(m) = l.memory_mb {
                    write(&d[0].join("memory.max"), &(m * 1024 * 1024).to_string())?;
                    let _ = write(&d[0].join("memory.swap.max"), "0");
                }
                write(&d[0].join("pids.max"), &l.pids.to_string())?;
                if let Some(c) = l.cpus {
                    let _ = write(
                        &d[0].join("cpu.max"),
                        &format!("{} 100000", u64::from(c) * 100_000),
                    );
                }
            }
        }
        Ok(())
    }

    /// The `cgroup.procs` files the child writes `0` to before it execs.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.0.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Pids alive in the group (the pids group for v1).
    pub fn members(&self) -> Vec<i32> {
        let d = match self.0.flavor {
            Flavor::V1 => &self.0.dirs[1],
            Flavor::V2 => &self.0.dirs[0],
        };
        std::fs::read_to_string(d.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGKILLs every member until none is left (bounded by `limit`); returns how many
    /// distinct processes were killed. A member that was already on its way out when first
    /// seen (a zombie, exiting, or with a SIGKILL pending, as the kernel sends every process
    /// of a pid namespace whose init ended) is not counted: otherwise the count would
    /// depend on how fast the kernel tears the namespace down, not on what the agent left.
    pub fn kill_all_and_wait(&self, limit: Duration) -> u32 {
        let until = Instant::now() + limit;
        let mut seen: Vec<i32> = Vec::new();
        let mut killed = 0u32;
        loop {
            let m = self.members();
            if m.is_empty() || Instant::now() >= until {
                break;
            }
            for pid in m {
                if !seen.contains(&pid) {
                    seen.push(pid);
                    if !dying(pid) {
                        killed = killed.saturating_add(1);
                    }
                }
                // SAFETY: kill(2) on a pid read from our own cgroup; no memory involved.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        killed
    }

    /// Which limits the group ran into. A member of a [`Budget`]: its own kills and refused
    /// forks (the kernel counts them where the process was), and its limit reached when
    /// either its own or the budget's was (v2 counts `oom` only in the group whose limit it
    /// was, so a world over its shared memory would otherwise look like the host's OOM).
    pub fn limits_hit(&self) -> Hits {
        let own = self.own_hits();
        match &self.0.budget {
            Some(b) => Hits {
                limit_reached: own
                    .limit_reached
                    .zip(b.0.own_hits().limit_reached)
                    .map(|(a, b)| a.saturating_add(b)),
                ..own
            },
            None => own,
        }
    }

    fn own_hits(&self) -> Hits {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let d = &self.0.dirs;
        match self.0.flavor {
            Flavor::V1 => Hits {
                oom_kills: keyed(&read(d[0].join("memory.oom_control")), "oom_kill"),
                pids_refused: keyed(&read(d[1].join("pids.events")), "max"),
                limit_reached: None,
            },
            Flavor::V2 => {
                let events = read(d[0].join("memory.events"));
                Hits {
                    oom_kills: keyed(&events, "oom_kill"),
                    pids_refused: keyed(&read(d[0].join("pids.events")), "max"),
                    limit_reached: Some(keyed(&events, "oom")),
                }
            }
        }
    }

    /// Removes the groups (they must be empty).
    pub fn remove(&self) {
        for d in &self.0.dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_paths_and_counters_parse() {
        let text = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/x\n0::/user.slice\n";
        let cases = [
            ("memory", Some("/process_api/abc")),
            ("pids", Some("/")),
            ("cpu", Some("/x")),
            ("cpuacct", Some("/x")),
            ("", Some("/user.slice")),
            ("blkio", None),
        ];
        for (c, want) in cases {
            assert_eq!(own_path(text, c).as_deref(), want, "{c}");
        }
        assert_eq!(
            keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"),
            3
        );
        assert_eq!(keyed("max 12\n", "max"), 12);
        assert_eq!(keyed("", "max"), 0);
    }
}

/// Whether process `pid` is already ending: a zombie or dead, exiting (`PF_EXITING`), or
/// with SIGKILL pending (`/proc/<pid>/stat` and `status`). A process gone already counts as
/// ending.
fn dying(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return true;
    };
    stat_says_dying(&stat) || status_has_kill_pending(&status)
}

/// `PF_EXITING` in the flags of `/proc/<pid>/stat`.
const PF_EXITING: u64 = 0x4;
/// SIGKILL's bit in the pending masks of `/proc/<pid>/status`.
const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);

fn stat_says_dying(stat: &str) -> bool {
    // After the command name's closing parenthesis: state, ppid, pgrp, session, tty_nr,
    // tpgid, flags, ...
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut f = rest.split_whitespace();
    let state = f.next().unwrap_or("");
    let flags: u64 = f.nth(5).and_then(|v| v.parse().ok()).unwrap_or(0);
    matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0
}

fn status_has_kill_pending(status: &str) -> bool {
    status.lines().any(|l| {
        let (k, v) = l.split_once(':').unwrap_or(("", ""));
        matches!(k, "SigPnd" | "ShdPnd")
            && u64::from_str_radix(v.trim(), 16).is_ok_and(|m| m & SIGKILL_BIT != 0)
    })
}

#[cfg(test)]
mod dying_tests {
    use super::*;

    #[test]
    fn the_stat_and_status_of_an_ending_process_say_so() {
        let alive = "1234 (sleep) S 1 1234 1234 0 -1 4194560 100 0 0 0";
        let zombie = "1234 (a (b) c) Z 1 1234 1234 0 -1 4194560 100 0 0 0";
        let exiting = "1234 (sleep) R 1 1234 1234 0 -1 4194564 100 0 0 0";
        assert!(!stat_says_dying(alive));
        assert!(stat_says_dying(zombie));
        assert!(stat_says_dying(exiting));
        let pending = "Name:\tsleep\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n";
        let none = "Name:\tsleep\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000002\n";
        assert!(status_has_kill_pending(pending));
        assert!(!status_has_kill_pending(none));
        // A live process of this test is not ending; a pid that does not exist is.
        assert!(!dying(std::process::id() as i32));
        assert!(dying(i32::MAX));
    }
}
