//! Child processes: a child in its own process group with a reduced environment (the
//! `direct` runtime, and the outer bwrap process of the `sandbox` runtime).
//!
//! Output goes to files, each capped (the rest is drained and counted, not stored). On
//! timeout or cancel the group gets SIGTERM, a grace period, then SIGKILL. Whatever way the
//! child ends, the group is then killed and every process still carrying the attempt's tag in
//! its environment (one that left the group with `setsid`) is killed too, so no process of
//! an attempt survives it. A child the runtime marks [`ChildHooks::contained`] (the
//! `sandbox` runtime's bwrap, whose every descendant stays in cgroups the runtime empties
//! afterwards) skips those two host-wide scans of `/proc`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Environment variable carrying the attempt tag, used to find escaped processes.
pub const TAG_VAR: &str = "AKBENCH_ATTEMPT_TAG";

/// Variables copied from the launching environment when set.
pub const ENV_ALLOW_LIST: &[&str] = &[
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
    "SHELL",
    "RUSTUP_TOOLCHAIN",
];

/// A shared cancellation flag, and who stopped the attempt: the coordinator's `Cancel` (a
/// user's cancel, a budget stop) or the worker itself ([`CancelToken::interrupt`]: a drain
/// whose grace ran out), which ends the attempt differently
/// ([`akbench_core::dispatch::Stop`]).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>, Arc<std::sync::Mutex<Option<String>>>);

impl CancelToken {
    /// A fresh, uncancelled token.
    pub fn new() -> Self {
        Self::default()
    }
    /// Requests cancellation (the coordinator's cancel).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Requests cancellation by the worker itself, saying why (`reason`): the attempt ends as
    /// the host's doing, not a cancel. A cancel already requested stays a cancel.
    pub fn interrupt(&self, reason: &str) {
        if let Ok(mut why) = self.1.lock() {
            if !self.is_cancelled() {
                *why = Some(reason.to_string());
            }
        }
        self.cancel();
    }
    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
    /// Who stopped the attempt, once cancelled.
    pub fn stop(&self) -> Option<akbench_core::dispatch::Stop> {
        use akbench_core::dispatch::Stop;
        if !self.is_cancelled() {
            return None;
        }
        let why = self.1.lock().ok().and_then(|w| w.clone());
        Some(why.map_or(Stop::Cancelled, Stop::Interrupted))
    }
}

/// Why this process is shutting down, once it is (a signal to the worker): set by the
/// worker daemon's signal handler ([`note_shutdown`]).
static SHUTDOWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Notes that the worker was told to stop (`why`: the signal's name). A graded process
/// that dies by a signal from then on is the shutdown's doing, never the agent's: a service
/// manager stopping the worker signals every process of its control group, the graded
/// tree's included, before the worker's drain reaches it (core::grading::blame).
pub fn note_shutdown(why: &str) {
    let _ = SHUTDOWN.set(why.to_string());
}

/// Why the worker is shutting down, once [`note_shutdown`] was called.
pub fn shutting_down() -> Option<&'static str> {
    SHUTDOWN.get().map(String::as_str)
}

/// The base environment for a child: the allow-list from this process, plus `HOME`,
/// `TMPDIR`, and toolchain homes (rustup and cargo keep working with a private HOME).
pub fn base_env(home: &Path) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for k in ENV_ALLOW_LIST {
        if let Ok(v) = std::env::var(k) {
            env.insert((*k).to_string(), v);
        }
    }
    let real_home = std::env::var("HOME").ok();
    for (k, sub) in [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")] {
        match std::env::var(k) {
            Ok(v) => {
                env.insert(k.to_string(), v);
            }
            Err(_) => {
                if let Some(h) = &real_home {
                    let p = Path::new(h).join(sub);
                    if p.is_dir() {
                        env.insert(k.to_string(), p.display().to_string());
                    }
                }
            }
        }
    }
    env.entry("PATH".into())
        .or_insert_with(|| "/usr/local/bin:/usr/bin:/bin".into());
    env.insert("HOME".into(), home.display().to_string());
    let tmp = home.join("tmp");
    env.insert("TMPDIR".into(), tmp.display().to_string());
    env
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// The complete environment (nothing else is inherited).
    pub env: BTreeMap<String, String>,
    /// File for stdout.
    pub stdout_path: PathBuf,
    /// File for stderr.
    pub stderr_path: PathBuf,
    /// Bytes kept per stream.
    pub output_cap: u64,
    /// Time limit.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Unique tag of this attempt (put in the environment as [`TAG_VAR`]).
    pub tag: String,
    /// What the child does between fork and exec (set by the runtime).
    pub hooks: ChildHooks,
}

/// Steps the child takes before it execs, set by [`crate::runtime`].
#[derive(Debug, Clone, Default)]
pub struct ChildHooks {
    /// `cgroup.procs` files the child joins (it writes `0`).
    pub cgroup_procs: Vec<PathBuf>,
    /// A network namespace the child enters.
    pub netns: Option<Arc<std::os::fd::OwnedFd>>,
    /// A user namespace the child enters first (the one owning [`Self::netns`], made by a
    /// worker that is not root).
    pub userns: Option<Arc<std::os::fd::OwnedFd>>,
    /// `RLIMIT_FSIZE`: the largest file the child may write.
    pub max_file_bytes: Option<u64>,
    /// Close-on-exec descriptors the child keeps across exec (by their own numbers; the
    /// sandbox's seccomp program, read by bwrap).
    pub inherit_fds: Vec<Arc<std::os::fd::OwnedFd>>,
    /// Set by a runtime whose processes cannot leave the cgroups in [`Self::cgroup_procs`]
    /// and that kills and waits for every member of them after the end (the `sandbox`
    /// runtime: a pid namespace, no access to the cgroup filesystem, no capabilities).
    /// [`Running::wait`] then only kills the group and reaps the child: it neither waits for
    /// the process group to empty nor sweeps `/proc` for the attempt's tag, both of which
    /// scan every process on the host and are the `direct` runtime's only way to find a
    /// process that left its group.
    pub contained: bool,
    /// An overlay the child mounts in a private mount namespace of its own before it
    /// execs (the `container` runtime's copy-on-write root).
    pub overlay: Option<Arc<dyn PreExec>>,
    /// The steps that start the child inside a shared environment (the `container`
    /// runtime's `environment_mode = "shared"`), registered last.
    pub enter: Option<Arc<dyn PreExec>>,
}

/// Steps a runtime prepares before fork and the child runs between fork and exec
/// ([`ChildHooks::overlay`], [`ChildHooks::enter`]): the runtime implements them, this
/// layer only registers them on the command, in that order, after its own hooks.
pub trait PreExec: std::fmt::Debug + Send + Sync {
    /// Registers the steps on `cmd` (a `pre_exec` of async-signal-safe system calls on data
    /// prepared before fork).
    fn register(self: Arc<Self>, cmd: &mut Command);
}

/// How the process ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessEnd {
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, when one did.
    pub signal: Option<i32>,
    /// Stopped by the timeout.
    pub timed_out: bool,
    /// Stopped by a cancel.
    pub cancelled: bool,
    /// Wall time.
    pub duration: Duration,
    /// Bytes written to stdout.
    pub stdout_bytes: u64,
    /// Bytes written to stderr.
    pub stderr_bytes: u64,
    /// True when a stream exceeded the cap.
    pub truncated: bool,
    /// Escaped processes found by the sweep and killed.
    pub stragglers_killed: u32,
}

/// The process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program does not exist or is not executable.
    #[error("failed to start `{program}`: {source}")]
    NotFound {
        /// Program.
        program: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Anything else (an infrastructure error).
    #[error("failed to start `{program}`: {source}")]
    Other {
        /// Program.
        program: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// A started process.
#[derive(Debug)]
pub struct Running {
    spec: ProcessSpec,
    pid: i32,
    started: Instant,
    /// The leader, reaped only after its group was killed: while it is an unreaped zombie its
    /// pid (the group id) cannot be reused, so signalling the group never hits a stranger.
    child: Child,
    /// Fires when the leader has exited (observed with `WNOWAIT`, not reaped).
    exited: mpsc::Receiver<()>,
    readers: Vec<std::thread::JoinHandle<(u64, bool)>>,
}

/// Starts `spec` in a new process group.
pub fn spawn(spec: ProcessSpec) -> Result<Running, SpawnError> {
    let program = spec.argv.first().cloned().unwrap_or_default();
    let mut cmd = Command::new(&program);
    cmd.args(&spec.argv[1..])
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(&spec.env)
        .env(TAG_VAR, &spec.tag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    install_hooks(&mut cmd, &spec.hooks)?;
    if let Some(o) = &spec.hooks.overlay {
        o.clone().register(&mut cmd);
    }
    if let Some(e) = &spec.hooks.enter {
        e.clone().register(&mut cmd);
    }
    let mut child: Child = cmd.spawn().map_err(|source| {
        if matches!(
            source.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
        ) {
            SpawnError::NotFound {
                program: program.clone(),
                source,
            }
        } else {
            SpawnError::Other {
                program: program.clone(),
                source,
            }
        }
    })?;
    let started = Instant::now();
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    let mut readers = Vec::new();
    let out = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take().expect("stderr is piped");
    readers.push(pump(out, spec.stdout_path.clone(), spec.output_cap));
    readers.push(pump(err, spec.stderr_path.clone(), spec.output_cap));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        wait_exited_no_reap(pid);
        let _ = tx.send(());
    });
    Ok(Running {
        spec,
        pid,
        started,
        child,
        exited: rx,
        readers,
    })
}

fn install_hooks(cmd: &mut Command, hooks: &ChildHooks) -> Result<(), SpawnError> {
    use std::os::fd::AsRawFd;
    let other = |e: std::io::Error| SpawnError::Other {
        program: "the runtime's pre-exec setup".into(),
        source: e,
    };
    let procs: Vec<std::ffi::CString> = hooks
        .cgroup_procs
        .iter()
        .map(|p| {
            std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)
        })
        .collect::<Result<_, _>>()
        .map_err(other)?;
    let netns = hooks.netns.clone();
    let userns = hooks.userns.clone();
    let fsize = hooks.max_file_bytes;
    let inherit: Vec<i32> = hooks.inherit_fds.iter().map(|f| f.as_raw_fd()).collect();
    if procs.is_empty() && netns.is_none() && fsize.is_none() && inherit.is_empty() {
        return Ok(());
    }
    // SAFETY: the closure only calls async-signal-safe functions (open, write, close, setns,
    // setrlimit, fcntl) on data prepared before fork; it allocates nothing. The inherited
    // descriptors are held open by `hooks` until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            for p in &procs {
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if n != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(ns) = &userns {
                if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWUSER) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(ns) = &netns {
                if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(n) = fsize {
                let lim = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for fd in &inherit {
                if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(())
}

fn pump(
    mut from: impl Read + Send + 'static,
    to: PathBuf,
    cap: u64,
) -> std::thread::JoinHandle<(u64, bool)> {
    std::thread::spawn(move || {
        let mut file = std::fs::File::create(&to).ok();
        let mut total: u64 = 0;
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let keep = cap.saturating_sub(total).min(n as u64) as usize;
                    if keep > 0 {
                        if let Some(f) = file.as_mut() {
                            let _ = f.write_all(&buf[..keep]);
                        }
                    }
                    total += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        (total, total > cap)
    })
}

impl Running {
    /// The child's pid (also its process group id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the leader has exited (it is not reaped until [`Running::wait`]).
    pub fn has_exited(&self) -> bool {
        !matches!(self.exited.try_recv(), Err(mpsc::TryRecvError::Empty))
    }

    /// Waits for the end, enforcing the timeout and watching `cancel`. Always leaves no
    /// process of the attempt alive, except for a [`ChildHooks::contained`] child, whose
    /// runtime kills and waits for what is left (its cgroups) once this returned.
    pub fn wait(mut self, cancel: &CancelToken) -> ProcessEnd {
        let deadline = self.started + self.spec.timeout;
        let mut end = ProcessEnd::default();
        loop {
            let now = Instant::now();
            if cancel.is_cancelled() {
                end.cancelled = true;
                self.stop();
                break;
            }
            if now >= deadline {
                end.timed_out = true;
                self.stop();
                break;
            }
            let tick = (deadline - now).min(Duration::from_millis(50));
            match self.exited.recv_timeout(tick) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
            }
        }
        end.duration = self.started.elapsed();
        // Whatever is left of the group, and anything that escaped it, goes now. The leader
        // is not reaped yet, so the group id is still ours.
        kill_group(self.pid, libc::SIGKILL);
        if !self.spec.hooks.contained {
            // SIGKILL is delivered asynchronously: let the group die before looking for
            // processes that escaped it, so only true escapees count as stragglers.
            wait_group_gone(self.pid, Duration::from_secs(5));
            end.stragglers_killed = sweep(&self.spec.tag);
        }
        let status = self.child.wait().ok();
        if self.spec.hooks.contained {
            end_contained_tree(&self.spec.hooks.cgroup_procs, &self.readers);
        }
        for (i, r) in self.readers.into_iter().enumerate() {
            let (bytes, truncated) = r.join().unwrap_or((0, false));
            if i == 0 {
                end.stdout_bytes = bytes;
            } else {
                end.stderr_bytes = bytes;
            }
            end.truncated |= truncated;
        }
        if let Some(s) = status {
            end.exit_code = s.code();
            end.signal = s.signal();
        }
        end
    }

    /// SIGTERM to the group, a grace period, then SIGKILL; returns once the leader exited.
    fn stop(&self) {
        kill_group(self.pid, libc::SIGTERM);
        if self.exited.recv_timeout(self.spec.grace).is_err() {
            kill_group(self.pid, libc::SIGKILL);
            let _ = self.exited.recv();
        }
    }
}

/// Once a contained child's leader (bwrap) has exited, ends what is left of its tree until
/// the output readers reach the end of their pipes (bounded: 10 s). Normally nothing is left:
/// the sandbox's pid namespace ends with its init, which bwrap ties to the leader with a
/// parent-death signal. But bwrap sets that signal only after it cloned the init, so a leader
/// killed in its first moments (a cancel or timeout just after the start) leaves the tree
/// running, holding the pipes, and the readers would wait for it to end by itself (a
/// `sleep 300` agent cancelled at once waited 300 s). The runtime kills, waits for and counts
/// what is left of the cgroups once [`Running::wait`] returned ([`crate::runtime::Guard`]);
/// these processes are the tree the stop already meant to end, not stragglers, so they are
/// not counted.
fn end_contained_tree(procs_files: &[PathBuf], readers: &[std::thread::JoinHandle<(u64, bool)>]) {
    let until = Instant::now() + Duration::from_secs(10);
    while !readers.iter().all(std::thread::JoinHandle::is_finished) && Instant::now() < until {
        for f in procs_files {
            let listed = std::fs::read_to_string(f).unwrap_or_default();
            for pid in listed.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // SAFETY: kill(2) on a pid read from the attempt's own cgroup; no memory
                // involved.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Blocks until process `pid` (our child) has exited, without reaping it.
fn wait_exited_no_reap(pid: i32) {
    loop {
        // SAFETY: `info` is a plain struct waitid fills in; `pid` is our own child.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

fn kill_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory involved.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// Kills every process whose environment carries `TAG_VAR=tag`; waits (bounded) until they
/// are gone. Returns how many were found.
pub fn sweep(tag: &str) -> u32 {
    let needle = format!("{TAG_VAR}={tag}");
    let mut killed = Vec::new();
    for _ in 0..5 {
        let found = tagged_pids(&needle);
        if found.is_empty() {
            break;
        }
        for pid in &found {
            if kill_if_tagged(*pid, &needle) && !killed.contains(pid) {
                killed.push(*pid);
            }
        }
        wait_gone(&found, Duration::from_secs(2));
    }
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// Waits (bounded) until no live process is left in process group `pgid`.
fn wait_group_gone(pgid: i32, limit: Duration) {
    let until = Instant::now() + limit;
    while Instant::now() < until && !group_members(pgid).is_empty() {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Live (non-zombie) processes whose process group is `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let (_, rest) = s.rsplit_once(')')?;
                    let mut f = rest.split_whitespace();
                    let state = f.next()?;
                    let _ppid = f.next()?;
                    let pgrp: i32 = f.next()?.parse().ok()?;
                    Some(pgrp == pgid && state != "Z")
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Live processes on this host carrying attempt tag `tag` (what [`sweep`] would kill).
pub fn processes_tagged(tag: &str) -> Vec<i32> {
    tagged_pids(&format!("{TAG_VAR}={tag}"))
}

/// SIGKILLs `pid` only if it still carries `needle` in its environment, through a pidfd so
/// that a pid reused by another process between the check and the signal is never hit.
fn kill_if_tagged(pid: i32, needle: &str) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return false;
    }
    let fd = fd as i32;
    let still_ours = std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        .unwrap_or(false);
    let sent = still_ours
        // SAFETY: signals the process the pidfd refers to; the other arguments are null/0.
        && unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        } == 0;
    // SAFETY: closing the fd we opened.
    unsafe {
        libc::close(fd);
    }
    sent
}

fn tagged_pids(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me || is_zombie(pid) {
            continue;
        }
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
            if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
                out.push(pid);
            }
        }
    }
    out
}

/// True when the process does not exist or is a zombie.
pub fn is_gone(pid: i32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid)
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn wait_gone(pids: &[i32], limit: Duration) {
    let until = Instant::now() + limit;
    while Instant::now() < until && !pids.iter().all(|p| is_gone(*p)) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests;
