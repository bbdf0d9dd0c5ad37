//! Runtimes: how an agent (or the evaluator) process is confined.
//!
//! - `direct`: today's child process group with a reduced environment ([`crate::process`]);
//!   no isolation, and every record made with it says so.
//! - `sandbox`: bubblewrap ([`bwrap`]) with new pid, mount, ipc, uts and network namespaces,
//!   `--die-with-parent`, `--new-session`, an unprivileged host user and no capabilities
//!   whatever user the worker is ([`owner`]), and a seccomp filter ([`seccomp`]); the process
//!   sees its worktree and home read-write, a read-only toolchain, a private size-capped
//!   `/tmp` and `/dev/shm` and its own `/proc` (host-wide parts read-only), nothing else.
//!   Limits come from cgroups ([`cgroup`]); network is only the declared endpoints,
//!   forwarded from the sandbox's own loopback ([`net`]), and, for a phase with a network,
//!   the worker's egress proxy ([`egress`]).
//! - `container`: the same sandbox over the task's image instead of the host's system
//!   folders, through a per-process copy-on-write overlay ([`container`]).
//!
//! [`prepare`] turns a [`ProcessSpec`] into a confined one plus a [`Guard`]; after the process
//! ended, [`Guard::finish`] kills whatever is left of the attempt, waits until every process
//! of it is gone and says which limit, if any, the agent ran into.

pub mod bwrap;
pub mod cgroup;
pub mod container;
pub mod egress;
pub mod health;
pub mod net;
mod net_user;
pub mod owner;
pub mod seccomp;
pub mod shared;
pub mod subids;
pub mod trust;
pub mod userns;
pub mod world;
pub mod world_net;

use crate::process::ProcessSpec;
use akbench_core::endpoint::Endpoint;
pub use akbench_core::manifest::Runtime as RuntimeKind;
use akbench_core::record::RuntimeFacts;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Resource limits of one sandboxed process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Memory (and swap) in MiB; `None`: no limit.
    pub memory_mb: Option<u64>,
    /// CPUs (a CFS quota); `None`: no limit.
    pub cpus: Option<u32>,
    /// Processes and threads alive at once.
    pub pids: u32,
    /// Bytes a run may add to every place it can write (worktree, home, verifier folder,
    /// linked git folder, the container's copy-on-write layer, private /tmp and /dev/shm)
    /// together, over what they held when it started, in MiB (also the largest file, and
    /// the size of each tmpfs).
    pub disk_mb: u64,
    /// Largest diff the agent may leave, MiB (the plan's `compute.diff_mb`); checked when
    /// the diff is collected, under every runtime, so it is not in [`Limits::describe`].
    pub diff_mb: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mb: None,
            cpus: None,
            pids: 1024,
            disk_mb: akbench_core::task::requirements::DISK_MB,
            diff_mb: akbench_core::spec::DEFAULT_DIFF_MB,
        }
    }
}

impl Limits {
    /// `memory_mb=.. cpus=.. pids=.. disk_mb=..` (only what is set).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(m) = self.memory_mb {
            parts.push(format!("memory_mb={m}"));
        }
        if let Some(c) = self.cpus {
            parts.push(format!("cpus={c}"));
        }
        parts.push(format!("pids={}", self.pids));
        parts.push(format!("disk_mb={}", self.disk_mb));
        parts.join(" ")
    }
}

/// What a confined process may see and reach.
#[derive(Debug, Clone, Default)]
pub struct Exposure {
    /// Read-write folders (the worktree, the home, the evaluator's verifier folder).
    pub writable: Vec<PathBuf>,
    /// Read-only files or folders besides the toolchain (the scripted agent's script, the
    /// oracle's solution, the evaluator's copy of the tests).
    pub readable: Vec<PathBuf>,
    /// Endpoints reachable from inside.
    pub endpoints: Vec<Endpoint>,
    /// Folders the disk limit counts (besides the private /tmp, capped on its own): every
    /// writable folder, counted from what it held when the process started.
    pub disk_roots: Vec<PathBuf>,
    /// Where the runtime may keep its own files for this process (outside everything the
    /// process can see), e.g. the generated /etc/hosts.
    pub scratch: PathBuf,
    /// The image and its mounts, for the `container` runtime.
    pub container: Option<container::View>,
    /// The phase's network beyond the endpoints, through the worker's egress proxy
    /// ([`egress`]); `None` (or a policy that reaches nothing): none.
    pub egress: Option<egress::Policy>,
    /// Names `/etc/hosts` gives beyond the endpoints' (the members of an interactive
    /// world's network, [`world`]).
    pub hosts: Vec<(String, std::net::Ipv4Addr)>,
    /// The shared group of an interactive world's members ([`cgroup::Budget`]): the
    /// process's group is nested in it, so the world together keeps the task's limits.
    pub budget: Option<Arc<cgroup::Budget>>,
}

impl Exposure {
    /// Every folder the process writes: the writable ones and its container view's mounts
    /// (`/logs/agent`...), each once.
    pub fn written(&self) -> Vec<PathBuf> {
        let mut out = self.writable.clone();
        for (h, _) in self.container.iter().flat_map(|v| v.mounts.iter()) {
            if !out.contains(h) {
                out.push(h.clone());
            }
        }
        out
    }
}

/// The runtime could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// What the sandbox needs is missing here (bubblewrap, `setpriv`, a kernel feature, a
    /// writable cgroup hierarchy); the reason names it and its fix.
    #[error(
        "failed to start the `sandbox` runtime: {reason}; or choose `runtime: direct` (unisolated)"
    )]
    Unavailable {
        /// What the probe saw, and the fix.
        reason: String,
    },
    /// The `container` runtime cannot run here or was not given an image.
    #[error("failed to start the `container` runtime: {reason}")]
    Container {
        /// What is missing, and the fix.
        reason: String,
    },
    /// A cgroup could not be made or limited (an infrastructure problem).
    #[error("failed to set up the sandbox's cgroups: {0}")]
    Cgroup(String),
    /// The network namespace or a forwarder could not be made.
    #[error("failed to set up the sandbox's network: {0}")]
    Net(String),
    /// Scratch files could not be written.
    #[error("failed to write {}: {source}", path.display())]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// Whether the sandbox works here: probed once per process (bwrap runs `true` with the
/// namespaces the sandbox uses, and a cgroup can be made).
pub fn sandbox_available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            bwrap::probe()?;
            cgroup::probe()
        })
        .clone()
}

/// The runtime `kind` would use here, or why it cannot run.
pub fn check(kind: RuntimeKind) -> Result<(), RuntimeError> {
    match kind {
        RuntimeKind::Direct => Ok(()),
        RuntimeKind::Container => {
            sandbox_available().map_err(|reason| RuntimeError::Unavailable { reason })?;
            if bwrap::is_root() {
                Ok(())
            } else {
                userns::probe_overlay().map_err(|reason| RuntimeError::Container { reason })
            }
        }
        RuntimeKind::Sandbox => {
            sandbox_available().map_err(|reason| RuntimeError::Unavailable { reason })
        }
    }
}

/// A process spec ready to spawn, and what must be done once it ended.
#[derive(Debug)]
pub struct Prepared {
    /// The spec to spawn (for `sandbox`, bwrap wrapping the original argv).
    pub spec: ProcessSpec,
    /// Cleans up and reports after the end.
    pub guard: Guard,
}

/// What the runtime holds for a running process.
#[derive(Debug)]
pub struct Guard {
    facts: RuntimeFacts,
    cgroup: Option<cgroup::Group>,
    net: Option<net::Network>,
    disk: Option<DiskWatch>,
    handed: owner::Handed,
    limits: Limits,
    /// The read end of bwrap's `--json-status-fd` pipe.
    status: Option<std::os::fd::OwnedFd>,
    /// The output of a program started in a shared environment ([`shared::Env::exec`]),
    /// settled once it ended.
    output: Option<Arc<shared::Relay>>,
    /// A program started in a shared environment: what the environment's egress proxy
    /// recorded during its phase, taken when it ends ([`shared::Env::exec`]).
    phase_contacts: Option<shared::PhaseContacts>,
}

/// How the confined process ended, as the runtime saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The record's runtime facts (with `limit_hit` set when a limit was hit).
    pub facts: RuntimeFacts,
    /// A sentence naming the limit the agent ran into, when it did.
    pub limit_cause: Option<String>,
    /// Processes still alive in the attempt's cgroup after the runtime's process ended,
    /// killed before this returned.
    pub killed_after_end: u32,
    /// Who among the runtime's own watchers ended the tree, when one did: a limit of the
    /// run (`disk_mb` watch, an OOM kill at the run's own `memory_mb`), the host (an OOM
    /// kill outside the run's limits), or the launcher (bwrap failed before the program
    /// started). `None`: the runtime did not end it (it ended itself, or the process
    /// layer's timeout or cancel did).
    pub ended_by: Option<akbench_core::grading::blame::EndedBy>,
}

impl Guard {
    /// Kills every process still left of the confined tree, waits until none is alive,
    /// stops the forwarders and the disk watch, and reads which limit was hit.
    pub fn finish(mut self) -> Finished {
        use akbench_core::grading::blame::{oom_ender, EndedBy};
        let mut killed_after_end = 0;
        let mut cause = None;
        let mut ended_by = None;
        if let Some(o) = self.output.take() {
            o.settle();
        }
        if let Some(d) = self.disk.take() {
            if d.stop() {
                ended_by = Some(EndedBy::Limit);
                cause = Some((
                    "disk_mb",
                    format!(
                        "the agent wrote more than its disk limit (disk_mb = {}) and was stopped",
                        self.limits.disk_mb
                    ),
                ));
            }
        }
        if let Some(g) = self.cgroup.take() {
            killed_after_end = g.kill_all_and_wait(Duration::from_secs(10));
            let hit = g.limits_hit();
            let oom = oom_ender(
                self.limits.memory_mb.is_some(),
                hit.limit_reached,
                hit.oom_kills,
            );
            if cause.is_none() {
                if oom == Some(EndedBy::Host) {
                    ended_by = oom;
                    cause = Some((
                        "host_memory",
                        format!(
                            "the host ran out of memory: its OOM killer killed {} process(es) of the run while the run was within its own memory limit",
                            hit.oom_kills
                        ),
                    ));
                } else if hit.oom_kills > 0 {
                    ended_by = oom;
                    cause = Some((
                        "memory_mb",
                        format!(
                            "the agent went over its memory limit (memory_mb = {}): the kernel killed {} process(es)",
                            self.limits.memory_mb.unwrap_or_default(),
                            hit.oom_kills
                        ),
                    ));
                } else if hit.pids_refused > 0 {
                    cause = Some((
                        "pids",
                        format!(
                            "the agent tried to run more than {} processes at once ({} fork(s) refused)",
                            self.limits.pids, hit.pids_refused
                        ),
                    ));
                }
            }
            g.remove();
        }
        // Every process is gone: the folders go back to their owner.
        std::mem::take(&mut self.handed).restore();
        if let Some(n) = self.net.take() {
            self.facts.egress = n.stop();
        }
        if let Some(p) = self.phase_contacts.take() {
            self.facts.egress = p.take();
        }
        // Every process is gone, so every copy of the pipe's write end is closed.
        if let Some(fd) = self.status.take() {
            if ended_by.is_none() && !bwrap::launched(&read_all(fd)) {
                ended_by = Some(EndedBy::Launcher);
            }
        }
        if let Some((what, _)) = &cause {
            self.facts.limit_hit = Some((*what).to_string());
        }
        Finished {
            facts: self.facts,
            limit_cause: cause.map(|(_, c)| c),
            killed_after_end,
            ended_by,
        }
    }
}

/// Confines `spec` with runtime `kind`. `tag` names the cgroup (unique per process tree).
pub fn prepare(
    kind: RuntimeKind,
    spec: ProcessSpec,
    exposure: &Exposure,
    limits: Limits,
) -> Result<Prepared, RuntimeError> {
    prepare_with(kind, spec, exposure, limits, None)
}

/// What a shared environment ([`shared::Env`]) needs of [`prepare`] beyond one process's:
/// a network namespace of the worker's even when its first phase has no network (a later
/// phase's proxy is started there: [`net::Network::set_egress`]), and the authorities its
/// later phases' programs trust, written into its file system now.
#[derive(Debug, Clone, Default)]
pub(crate) struct EnvironmentNeeds {
    /// The extra authorities of any phase that will have the proxy.
    pub trust: Option<trust::Extra>,
}

/// [`prepare`], for a shared environment when `environment` is given.
pub(crate) fn prepare_with(
    kind: RuntimeKind,
    mut spec: ProcessSpec,
    exposure: &Exposure,
    limits: Limits,
    environment: Option<EnvironmentNeeds>,
) -> Result<Prepared, RuntimeError> {
    check(kind)?;
    if kind == RuntimeKind::Direct {
        return Ok(Prepared {
            spec,
            guard: Guard {
                facts: RuntimeFacts {
                    name: "direct".into(),
                    isolated: false,
                    limits: String::new(),
                    limit_hit: None,
                    egress: Vec::new(),
                },
                cgroup: None,
                net: None,
                disk: None,
                handed: owner::Handed::none(),
                limits,
                status: None,
                output: None,
                phase_contacts: None,
            },
        });
    }
    let drop_to = bwrap::drop_to().map_err(|reason| RuntimeError::Unavailable { reason })?;
    let seccomp = seccomp::memfd()
        .map_err(|reason| RuntimeError::Unavailable { reason })?
        .map(Arc::new);
    std::fs::create_dir_all(&exposure.scratch).map_err(|source| RuntimeError::Io {
        path: exposure.scratch.clone(),
        source,
    })?;
    let (status_r, status_w) = status_pipe().map_err(|source| RuntimeError::Io {
        path: PathBuf::from("pipe"),
        source,
    })?;
    let group = match &exposure.budget {
        Some(b) => cgroup::Group::create_in(b, &spec.tag, &limits),
        None => cgroup::Group::create(&spec.tag, &limits),
    }
    .map_err(RuntimeError::Cgroup)?;
    let egress = exposure.egress.clone().filter(egress::Policy::needs_proxy);
    let network = if exposure.endpoints.is_empty() && egress.is_none() && environment.is_none() {
        None
    } else {
        match net::Network::start(&exposure.endpoints, egress) {
            Ok(n) => Some(n),
            Err(e) => {
                group.remove();
                return Err(RuntimeError::Net(e));
            }
        }
    };
    let undo = |group: &cgroup::Group, network: Option<net::Network>| {
        group.remove();
        if let Some(n) = network {
            let _ = n.stop();
        }
    };
    let hosts = exposure.scratch.join("hosts");
    let mut hosts_text = net::hosts_file(network.as_ref().map(|n| n.bound()).unwrap_or_default());
    for (name, addr) in &exposure.hosts {
        hosts_text.push_str(&format!("{addr} {name}\n"));
    }
    if let Err(source) = std::fs::write(&hosts, hosts_text) {
        undo(&group, network);
        return Err(RuntimeError::Io {
            path: hosts.clone(),
            source,
        });
    }
    // The extra authorities the programs trust, while the phase has the proxy.
    let trust = match (&network, &environment) {
        (_, Some(env)) => env.trust.clone(),
        (Some(n), None) if n.has_proxy() => {
            exposure.egress.as_ref().and_then(egress::Policy::trust)
        }
        _ => None,
    };
    let mut disk_roots = exposure.disk_roots.clone();
    let mut writable = exposure.writable.clone();
    let container = match (kind, &exposure.container) {
        (RuntimeKind::Container, Some(view)) => {
            // Handed over once (the verifier folder is also bound at its host path).
            writable = exposure.written();
            for (h, _) in &view.mounts {
                if !disk_roots.contains(h) {
                    disk_roots.push(h.clone());
                }
            }
            // A worker that is not root mounts the overlay in a user namespace of its own:
            // the network's when the process has one (made by the worker, entered first),
            // else one its child makes.
            let own_userns = network.as_ref().and_then(net::Network::userns_fd).is_none();
            match container::copy_on_write(exposure, view, drop_to.as_ref(), own_userns) {
                Ok((mount, upper)) => {
                    if let Some(extra) = &trust {
                        let owner = drop_to.as_ref().map(|d| (d.user.uid, d.user.gid));
                        if let Err(source) =
                            trust::for_container(extra, &view.image.rootfs, &upper, owner)
                        {
                            undo(&group, network);
                            return Err(RuntimeError::Io {
                                path: upper,
                                source,
                            });
                        }
                    }
                    disk_roots.push(upper);
                    Some((view, mount))
                }
                Err((path, source)) => {
                    undo(&group, network);
                    return Err(RuntimeError::Io { path, source });
                }
            }
        }
        (RuntimeKind::Container, None) => {
            undo(&group, network);
            return Err(RuntimeError::Container {
                reason: "the task names no image (`environment.image`); fix: name one, or choose `runtime: sandbox`".into(),
            });
        }
        _ => None,
    };
    // The container's own user namespace, with the image's other users mapped to
    // subordinate ids (apt, dpkg, adduser change user and owner inside).
    let userns = match (&container, &drop_to) {
        (Some((view, _)), Some(d)) => {
            let var = std::env::var(subids::VAR).ok();
            let made = subids::parse(var.as_deref(), d.user.uid)
                .and_then(|_| subids::parse(var.as_deref(), d.user.gid))
                .and_then(|range| container::user_namespace(d.user, view.image.user, range));
            match made {
                Ok(fd) => Some(Arc::new(fd)),
                Err(reason) => {
                    undo(&group, network);
                    return Err(RuntimeError::Container { reason });
                }
            }
        }
        _ => None,
    };
    // A root worker's sandbox runs as the sandbox user: it must own what it writes.
    let handed = match &drop_to {
        None => owner::Handed::none(),
        Some(d) => match owner::hand_over(&writable, d.user) {
            Ok(h) => h,
            Err((path, source)) => {
                undo(&group, network);
                return Err(RuntimeError::Io { path, source });
            }
        },
    };
    let ca_bundle = match (&trust, &container) {
        (Some(extra), None) => match trust::for_sandbox(extra, &exposure.scratch) {
            Ok(b) => Some(b),
            Err(source) => {
                undo(&group, network);
                return Err(RuntimeError::Io {
                    path: exposure.scratch.clone(),
                    source,
                });
            }
        },
        _ => None,
    };
    if trust.is_some() {
        let inside = ca_bundle.as_ref().map_or_else(
            || trust::BUNDLE.to_string(),
            |b| b.inside.display().to_string(),
        );
        for (k, v) in trust::env_vars(&inside) {
            spec.env.insert(k.into(), v);
        }
    }
    let plan = bwrap::Plan {
        argv: spec.argv.clone(),
        cwd: spec.cwd.clone(),
        writable: exposure.writable.clone(),
        readable: exposure.readable.clone(),
        toolchain: bwrap::toolchain_dirs(&spec.env),
        hosts_file: hosts,
        ca_bundle,
        own_network: network.is_none(),
        tmp_bytes: limits.disk_mb.saturating_mul(1024 * 1024),
        drop_to,
        seccomp_fd: seccomp.as_ref().map(|f| f.as_raw_fd()),
        status_fd: Some(status_w.as_raw_fd()),
    };
    if network.as_ref().is_some_and(net::Network::has_proxy) {
        // The declared endpoints stay direct: their forwarders serve them.
        let named: Vec<String> = exposure
            .hosts
            .iter()
            .flat_map(|(n, a)| [n.clone(), a.to_string()])
            .collect();
        let direct: Vec<&str> = exposure
            .endpoints
            .iter()
            .map(|e| e.host.as_str())
            .chain(named.iter().map(String::as_str))
            .collect();
        for (k, v) in egress::env_vars(&direct) {
            spec.env.insert(k.into(), v);
        }
    }
    spec.argv = match &container {
        None => bwrap::args(&plan),
        Some((view, mount)) => {
            spec.env = container::env(view, &spec.env);
            spec.hooks.overlay = Some(Arc::new(mount.clone()));
            let fd = userns.as_ref().map(|f| f.as_raw_fd());
            spec.hooks.inherit_fds.extend(userns.clone());
            container::args(&plan, view, &exposure.scratch.join(container::ROOT), fd)
        }
    };
    spec.hooks.cgroup_procs = group.procs_files();
    spec.hooks.netns = network.as_ref().map(|n| n.netns_fd());
    spec.hooks.userns = network.as_ref().and_then(|n| n.userns_fd());
    spec.hooks.max_file_bytes = Some(limits.disk_mb.saturating_mul(1024 * 1024));
    spec.hooks.inherit_fds.extend(seccomp);
    spec.hooks.inherit_fds.push(Arc::new(status_w));
    // Every process of the tree stays in the group (bwrap's pid namespace, no cgroup
    // filesystem, no capabilities); `Guard::finish` kills and waits for all its members.
    spec.hooks.contained = true;
    let disk = DiskWatch::start(disk_roots, limits.disk_mb, group.clone());
    Ok(Prepared {
        spec,
        guard: Guard {
            facts: RuntimeFacts {
                name: kind.as_str().into(),
                isolated: true,
                limits: limits.describe(),
                limit_hit: None,
                egress: Vec::new(),
            },
            cgroup: Some(group),
            net: network,
            disk: Some(disk),
            handed,
            limits,
            status: Some(status_r),
            output: None,
            phase_contacts: None,
        },
    })
}

/// A pipe whose ends close on exec (`(read, write)`); the write end is kept across exec by
/// [`crate::process::ChildHooks::inherit_fds`] only.
fn status_pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two-element array; the result is checked.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors this function owns.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// What is in a non-blocking pipe now (at most 64 KiB: bwrap writes two short lines).
fn read_all(fd: std::os::fd::OwnedFd) -> String {
    use std::io::Read;
    let mut text = Vec::new();
    let _ = std::fs::File::from(fd)
        .take(64 * 1024)
        .read_to_end(&mut text);
    String::from_utf8_lossy(&text).into_owned()
}

/// Watches the size of the disk roots while the process runs; over the limit it kills the
/// whole cgroup.
///
/// The limit counts what the run adds: the bytes under the roots beyond what they held when
/// the watch started (before the process), plus the private tmpfs folders (empty at the
/// start). So a grading workspace or a worktree that starts with a large repository is not
/// held against the run, and a run cannot write more than the limit wherever it writes.
#[derive(Debug)]
struct DiskWatch {
    stop: Arc<AtomicBool>,
    hit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    roots: Vec<PathBuf>,
    /// Bytes under the roots when the watch started.
    base: u64,
    limit_bytes: u64,
}

impl DiskWatch {
    fn start(roots: Vec<PathBuf>, disk_mb: u64, group: cgroup::Group) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let hit = Arc::new(AtomicBool::new(false));
        let limit_bytes = disk_mb.saturating_mul(1024 * 1024);
        let base = disk_usage(&roots);
        let (s, h, r) = (stop.clone(), hit.clone(), roots.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let used =
                    disk_usage(&r).saturating_sub(base) + sandbox_tmpfs_usage(&group.members());
                if used > limit_bytes {
                    h.store(true, Ordering::SeqCst);
                    group.kill_all_and_wait(Duration::from_secs(5));
                    return;
                }
                let until = std::time::Instant::now() + Duration::from_millis(500);
                while !s.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                    std::thread::park_timeout(Duration::from_millis(50));
                }
            }
        });
        Self {
            stop,
            hit,
            thread: Some(thread),
            roots,
            base,
            limit_bytes,
        }
    }

    /// Stops watching; true when the limit was exceeded (while running or at the end).
    fn stop(mut self) -> bool {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        self.hit.load(Ordering::SeqCst)
            || disk_usage(&self.roots).saturating_sub(self.base) > self.limit_bytes
    }
}

/// For a worktree whose `.git` is a file pointing elsewhere (a linked `git worktree`): its
/// own git folder (read-write: index, HEAD) and the repository it belongs to (read-only: so
/// refs, config, hooks and objects cannot be changed from inside). Empty for a worktree
/// that holds its repository itself.
pub fn linked_git_dirs(worktree: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    // The worktree is the agent's: a FIFO or a link at `.git` is not read.
    let Ok(text) = akbench_core::bounded_read::ReadKind::Config.read_text(
        &worktree.join(".git"),
        akbench_core::bounded_read::Links::Refuse,
    ) else {
        return (Vec::new(), Vec::new());
    };
    let Some(gitdir) = text
        .trim()
        .strip_prefix("gitdir:")
        .map(|s| worktree.join(s.trim()))
    else {
        return (Vec::new(), Vec::new());
    };
    let common = akbench_core::bounded_read::ReadKind::Config
        .read_text(
            &gitdir.join("commondir"),
            akbench_core::bounded_read::Links::Refuse,
        )
        .map(|c| gitdir.join(c.trim()))
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok());
    (vec![gitdir], common.into_iter().collect())
}

/// The sandbox's private tmpfs folders, counted in the disk limit while it runs.
pub const TMPFS_IN_SANDBOX: &[&str] = &["tmp", "dev/shm"];

/// Bytes used in the private tmpfs folders ([`TMPFS_IN_SANDBOX`]) of the sandbox whose
/// processes are `members`: read through the first member in another mount namespace
/// (bwrap's first process is still in the host's).
///
/// Only the sandbox's own tmpfs mounts count: a folder that is not a tmpfs, or is the same
/// file system as this process sees at that path, is not yet (or no longer) the sandbox's
/// private mount and counts 0. Before, while bwrap was still setting up its new mount
/// namespace, `/proc/PID/root/tmp` was the host's `/tmp`, and the whole root file system's
/// usage (gigabytes) was counted against the agent's `disk_mb`: the disk watch killed a
/// healthy agent and the trial was recorded as the agent's failure.
pub fn sandbox_tmpfs_usage(members: &[i32]) -> u64 {
    let own = std::fs::read_link("/proc/self/ns/mnt").ok();
    for pid in members {
        let ns = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        if ns.is_none() || ns == own {
            continue;
        }
        let mut total = 0;
        for t in TMPFS_IN_SANDBOX {
            total += private_tmpfs_used(&format!("/proc/{pid}/root/{t}"), &format!("/{t}"));
        }
        return total;
    }
    0
}

/// `statfs(2)`'s magic number of a tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Bytes used on the tmpfs at `path` when it is a tmpfs other than the one this process
/// sees at `host` (see [`sandbox_tmpfs_usage`]), else 0.
fn private_tmpfs_used(path: &str, host: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(inside) = std::fs::metadata(path) else {
        return 0;
    };
    if std::fs::metadata(host).is_ok_and(|h| h.dev() == inside.dev()) {
        return 0;
    }
    let Ok(c) = std::ffi::CString::new(path) else {
        return 0;
    };
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a NUL-terminated path and a buffer of the right type.
    if unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return 0;
    }
    // SAFETY: statfs succeeded and filled the buffer.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between libc targets
    if st.f_type as i64 != TMPFS_MAGIC {
        return 0;
    }
    // The field types differ between libc targets (u64 here, other widths elsewhere).
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let (blocks, free, size) = (
        u64::try_from(st.f_blocks).unwrap_or(0),
        u64::try_from(st.f_bfree).unwrap_or(0),
        u64::try_from(st.f_bsize).unwrap_or(0),
    );
    blocks.saturating_sub(free).saturating_mul(size)
}

/// Bytes allocated on disk under `roots` (symlinks not followed).
pub fn disk_usage(roots: &[PathBuf]) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fn walk(p: &Path, total: &mut u64) {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            return;
        };
        *total += m.blocks() * 512;
        if m.is_dir() {
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    walk(&e.path(), total);
                }
            }
        }
    }
    let mut total = 0;
    for r in roots {
        walk(r, &mut total);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process in a new mount namespace that has not mounted the sandbox's tmpfs yet (as
    /// bwrap is while it sets up) sees the host's `/tmp`: that counts nothing against the
    /// agent's disk limit. Before, the whole root file system's usage counted, and the disk
    /// watch killed healthy agents under load (an agent failure by the harness's doing).
    #[test]
    fn a_sandbox_still_setting_up_counts_no_tmpfs() {
        const TEST: &str = "a_sandbox_still_setting_up_counts_no_tmpfs";
        if !bwrap::is_root() {
            akbench_core::testkit::skip(TEST, "`unshare -m` needs root");
            return;
        }
        let mut child = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sleep", "30"])
            .spawn()
            .expect("unshare starts");
        let pid = i32::try_from(child.id()).unwrap();
        // Wait until the child is in its own mount namespace (unshare execs sleep after).
        let own = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let mut entered = false;
        for _ in 0..500 {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let ns = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
            if comm.trim() == "sleep" && ns.is_some_and(|n| n != own) {
                entered = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(entered, "unshare -m never entered a mount namespace");
        let counted = sandbox_tmpfs_usage(&[pid]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(counted, 0, "the host's /tmp and /dev/shm were counted");
    }

    #[test]
    fn errors_name_the_package_and_the_alternative() {
        let e = RuntimeError::Unavailable {
            reason: "user namespaces are disabled (user.max_user_namespaces = 0); fix: ...".into(),
        }
        .to_string();
        assert!(
            e.contains("user.max_user_namespaces = 0") && e.contains("runtime: direct"),
            "{e}"
        );
        assert!(!e.contains("bubblewrap"), "{e}");
        if bwrap::is_root() && sandbox_available().is_ok() {
            assert!(check(RuntimeKind::Container).is_ok());
        } else {
            assert!(check(RuntimeKind::Container).is_err());
        }
        assert!(check(RuntimeKind::Direct).is_ok());
        let l = Limits {
            memory_mb: Some(256),
            cpus: Some(2),
            pids: 64,
            disk_mb: 100,
            diff_mb: 1,
        };
        assert_eq!(l.describe(), "memory_mb=256 cpus=2 pids=64 disk_mb=100");
        assert_eq!(Limits::default().describe(), "pids=1024 disk_mb=4096");
    }

    #[test]
    fn disk_usage_counts_allocated_bytes_under_every_root() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("x"), vec![1u8; 1 << 20]).unwrap();
        std::fs::create_dir(b.path().join("d")).unwrap();
        std::fs::write(b.path().join("d/y"), vec![1u8; 1 << 20]).unwrap();
        let both = disk_usage(&[a.path().to_path_buf(), b.path().to_path_buf()]);
        assert!(both >= 2 << 20, "{both}");
        assert!(disk_usage(&[a.path().to_path_buf()]) < both);
    }
}
