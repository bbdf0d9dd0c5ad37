//! What a persistent data folder's `postmaster.pid` means at start: nothing, a stale file
//! (its pid is dead or is no PostgreSQL on this folder: a killed run's leftover), a server
//! orphaned by a killed akbench (the owner file [`OWNER_FILE`] names a process that is gone:
//! it is stopped), or a live server of someone else's (a clear error naming the folder and
//! the pid). The decision is [`classify`], a pure function over what was read from `/proc`.

use super::{io_err, ClusterError, PrivateCluster};
use std::fs;
use std::path::Path;

/// The file naming the akbench process that started the running server (`<pid> <start
/// time> <postmaster pid>`), written after every start of a persistent cluster.
pub const OWNER_FILE: &str = "akbench.owner";

/// A process identity that survives pid reuse: its pid and its start time (clock ticks
/// since boot, field 22 of `/proc/<pid>/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The akbench process.
    pub pid: i32,
    /// Its start time.
    pub start: u64,
    /// The postmaster it started.
    pub postmaster: i32,
}

/// What to do about a data folder's `postmaster.pid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leftover {
    /// No `postmaster.pid`: start.
    None,
    /// The file's pid is dead or not a PostgreSQL on this folder: remove the file, start.
    StalePidFile,
    /// A server started by an akbench process that is gone: stop it, start.
    Orphan(i32),
    /// A server owned by a live process (or by no akbench): refuse.
    Running(i32),
}

/// The decision, from: the pid in `postmaster.pid`, whether that pid is a PostgreSQL
/// running on this folder, the owner file, and whether the owner process still lives.
pub fn classify(
    postmaster: Option<i32>,
    is_our_postgres: bool,
    owner: Option<Owner>,
    owner_alive: bool,
) -> Leftover {
    let Some(pid) = postmaster else {
        return Leftover::None;
    };
    if !is_our_postgres {
        return Leftover::StalePidFile;
    }
    match owner {
        Some(o) if o.postmaster == pid && !owner_alive => Leftover::Orphan(pid),
        _ => Leftover::Running(pid),
    }
}

/// The pid on the first line of `<data_dir>/postmaster.pid`.
pub fn postmaster_pid(data_dir: &Path) -> Option<i32> {
    let text = fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok().filter(|p| *p > 0)
}

/// True when `pid` is a `postgres` process working in `data_dir` (the postmaster changes
/// into its data folder; when its working folder cannot be read, the name decides).
pub fn is_postgres_on(pid: i32, data_dir: &Path) -> bool {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if comm.trim() != "postgres" {
        return false;
    }
    match fs::read_link(format!("/proc/{pid}/cwd")) {
        Ok(cwd) => {
            let want = fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
            cwd == want
        }
        Err(_) => true,
    }
}

/// The start time of `pid`, if it runs.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Waits until `pid` has exited (a zombie counts as exited), at most `timeout`; true when it
/// did. `pg_ctl stop -w` returns once `postmaster.pid` is removed, a moment before the
/// postmaster process itself ends: waiting for it makes "stopped" mean "gone".
pub fn wait_gone(pid: i32, timeout: std::time::Duration) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let gone = std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        return gone || !runs(pid);
    }
    let fd = fd as libc::c_int;
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd; the descriptor is ours and closed right after.
    let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
    // SAFETY: fd came from pidfd_open above and is closed once.
    unsafe { libc::close(fd) };
    ready > 0 || !runs(pid)
}

/// True when `pid` exists and is not a zombie.
pub fn runs(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 1..].trim_start().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z'))
}

impl Owner {
    /// This process as the owner of `postmaster`.
    pub fn current(postmaster: i32) -> Option<Self> {
        let pid = i32::try_from(std::process::id()).ok()?;
        Some(Self {
            pid,
            start: start_time(pid)?,
            postmaster,
        })
    }

    /// The owner file of `data_dir`, if there is a readable one.
    pub fn read(data_dir: &Path) -> Option<Self> {
        let text = fs::read_to_string(data_dir.join(OWNER_FILE)).ok()?;
        let mut f = text.split_whitespace();
        Some(Self {
            pid: f.next()?.parse().ok()?,
            start: f.next()?.parse().ok()?,
            postmaster: f.next()?.parse().ok()?,
        })
    }

    /// True when the owner process still runs (same pid, same start time).
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

impl PrivateCluster {
    /// Deals with a `postmaster.pid` left in a persistent data folder (see the module doc).
    pub(super) fn clear_leftover(&self) -> Result<(), ClusterError> {
        let postmaster = postmaster_pid(&self.data_dir);
        let ours = postmaster.is_some_and(|p| is_postgres_on(p, &self.data_dir));
        let owner = Owner::read(&self.data_dir);
        let owner_alive = owner.is_some_and(|o| o.alive());
        match classify(postmaster, ours, owner, owner_alive) {
            Leftover::None => Ok(()),
            Leftover::StalePidFile => {
                let path = self.data_dir.join("postmaster.pid");
                tracing::warn!(path = %path.display(), "removing a stale postmaster.pid");
                fs::remove_file(&path).map_err(io_err(format!("remove {}", path.display())))
            }
            Leftover::Orphan(pid) => {
                tracing::warn!(pid, data_dir = %self.data_dir.display(),
                    "stopping a PostgreSQL left running by a killed akbench");
                let output = self
                    .pg_command(&self.binaries.pg_ctl)
                    .arg("stop")
                    .arg("-D")
                    .arg(&self.data_dir)
                    .args(["-m", "fast", "-w", "-s"])
                    .output()
                    .map_err(io_err("run pg_ctl stop"))?;
                super::check(
                    output,
                    &format!("stop the orphaned PostgreSQL (pid {pid})"),
                    &self.binaries.pg_ctl,
                )?;
                wait_gone(pid, std::time::Duration::from_secs(30));
                Ok(())
            }
            Leftover::Running(pid) => Err(ClusterError::AlreadyRunning {
                data_dir: self.data_dir.clone(),
                pid,
            }),
        }
    }

    /// Records this process as the owner of the running server.
    pub(super) fn write_owner(&self) -> Result<(), ClusterError> {
        let Some(pid) = postmaster_pid(&self.data_dir) else {
            return Ok(());
        };
        let Some(o) = Owner::current(pid) else {
            return Ok(());
        };
        let path = self.data_dir.join(OWNER_FILE);
        fs::write(&path, format!("{} {} {}\n", o.pid, o.start, o.postmaster))
            .map_err(io_err(format!("write {}", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_postmaster_pid_means() {
        let owner = |postmaster| {
            Some(Owner {
                pid: 10,
                start: 5,
                postmaster,
            })
        };
        let cases = [
            (None, false, None, false, Leftover::None),
            (None, false, owner(7), false, Leftover::None),
            (Some(7), false, None, false, Leftover::StalePidFile),
            (Some(7), false, owner(7), true, Leftover::StalePidFile),
            (Some(7), true, owner(7), false, Leftover::Orphan(7)),
            (Some(7), true, owner(7), true, Leftover::Running(7)),
            (Some(7), true, owner(8), false, Leftover::Running(7)),
            (Some(7), true, None, false, Leftover::Running(7)),
        ];
        for (pm, ours, o, alive, want) in cases {
            assert_eq!(
                classify(pm, ours, o, alive),
                want,
                "{pm:?} {ours} {o:?} {alive}"
            );
        }
    }

    #[test]
    fn waits_for_a_process_to_end() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(runs(pid));
        assert!(
            !wait_gone(pid, std::time::Duration::from_millis(50)),
            "still runs"
        );
        child.kill().unwrap();
        // Not reaped yet: a zombie has ended.
        assert!(wait_gone(pid, std::time::Duration::from_secs(30)));
        assert!(!runs(pid));
        child.wait().unwrap();
        assert!(
            wait_gone(pid, std::time::Duration::from_millis(1)),
            "reaped: gone"
        );
    }

    #[test]
    fn this_process_is_alive_and_has_a_start_time() {
        let me = Owner::current(1).unwrap();
        assert!(me.alive());
        let reused = Owner {
            start: me.start + 1,
            ..me
        };
        assert!(!reused.alive(), "a reused pid is another process");
        assert!(!is_postgres_on(me.pid, Path::new("/")));
    }
}
