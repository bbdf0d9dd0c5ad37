//! Grading in the agent's environment (`[verifier] environment_mode = "shared"`, Harbor's
//! default), under the `container` runtime: one environment per attempt, started before
//! the agent and kept until grading ends, which the agent and then the grader enter as
//! `docker exec` enters a container.
//!
//! The environment ([`Env`]) is a `container` sandbox (bubblewrap over the copy-on-write
//! view of the image, its own cgroup, the limits of the attempt) whose program only keeps
//! it alive (`sleep infinity`, Harbor's command). [`Env::exec`] starts a program inside it:
//! the child joins the environment's network, ipc, uts, mount and pid namespaces as the
//! (root) worker, becomes the sandbox user, enters a user namespace mapping the ids as the
//! environment's does ([`super::subids`]), keeps only [`super::container::ROOT_CAPS`] (none
//! for a non-root image user), sets `no_new_privs` and the sandbox's seccomp filter, then
//! forks the program into the environment's pid namespace and waits for it.
//!
//! - The agent enters the environment's own user namespace and cgroup: what it starts in
//!   the background outlives it (its output keeps being drained, [`Relay`]) and is there
//!   when grading runs.
//! - The grader gets a private mount namespace on top of the environment's, where its
//!   verifier folder (`/logs/verifier`), its copy of the tests (`/tests`) and its home are
//!   bound: no process of the environment can see them, so none can write or replace the
//!   reward. It enters a sibling user namespace with the same maps: the agent's processes
//!   cannot trace it or open its `/proc/PID/root` (that needs `CAP_SYS_PTRACE` in the
//!   grader's namespace), while it sees, reaches and owns what they left. It has a cgroup
//!   and limits of its own, ended with it.
//!
//! - The network: the environment has one network namespace for its whole life, so one
//!   egress proxy at a time serves every process in it. Each program started with a phase's
//!   network ([`Env::exec`]'s `egress`: the agent's, then grading's) gets that phase's proxy
//!   (restarted when the policy changes, which ends its open connections), its variables and
//!   the trusted authorities; what the proxy records from then until the program ends goes
//!   to that program's record, and what it records between programs (the agent's background
//!   processes after the agent ended) to the next phase's. The environment starts with no
//!   proxy (the image's entry point and the healthcheck get none).
//!
//! [`Env::finish`] (also on drop) ends every process of the environment.

use super::{
    bwrap, cgroup, container, egress, net, owner, seccomp, subids, trust, DiskWatch, Exposure,
    Finished, Guard, Limits, RuntimeError, RuntimeKind,
};
use crate::process::{spawn, CancelToken, ProcessSpec, Running};
use akbench_core::egress::Contact;
use akbench_core::record::RuntimeFacts;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The program that keeps the environment alive (Harbor replaces the image's command with
/// it; the image's `Entrypoint`, when it has one, runs first with it as arguments).
pub const KEEPER: [&str; 2] = ["sleep", "infinity"];

/// How long [`Env::start`] waits for the environment to be set up.
const START_WAIT: Duration = Duration::from_secs(60);

/// The namespaces of a running environment, opened from its program's `/proc` entry.
#[derive(Debug)]
struct Namespaces {
    user: OwnedFd,
    mnt: OwnedFd,
    pid: OwnedFd,
    net: OwnedFd,
    ipc: OwnedFd,
    uts: OwnedFd,
}

/// The agent's environment, alive from before the agent until grading ended.
#[derive(Debug)]
pub struct Env {
    running: Option<Running>,
    guard: Option<Guard>,
    ns: Arc<Namespaces>,
    procs: Vec<PathBuf>,
    view: container::View,
    user: owner::SandboxUser,
    /// The subordinate ids the environment's other users map to (a root worker); `None`: a
    /// worker that is not root, whose environment maps only its own uid.
    range: Option<subids::SubIds>,
    /// A worker that is not root: the user namespace its child made (or the network's) and
    /// bwrap made the environment's below ([`super::userns`]); a program joins it first, as
    /// its owner, to enter the environment's namespaces.
    outer: Option<Arc<OwnedFd>>,
    scratch: PathBuf,
    relays: Mutex<Vec<Arc<Relay>>>,
    net: Arc<Mutex<EnvNet>>,
    /// Folders handed to a phase's own user ([`Env::exec_as`]), given back when the
    /// environment ends (before its own hand-over is).
    handed: Mutex<Vec<owner::Handed>>,
    /// How its program ended, once it did ([`Env::wait_exit`], or when the environment
    /// ended).
    ended: Option<crate::process::ProcessEnd>,
    /// The interactive world it is a member of: its sidecars end after it
    /// ([`Env::join_world`]).
    world: Option<super::world::Running>,
}

/// The environment's network across phases (see the module documentation).
#[derive(Debug, Default)]
struct EnvNet {
    /// Its namespace and the proxy of the current phase.
    network: Option<net::Network>,
    /// The endpoints' hosts (served by their forwarders, never through the proxy).
    direct: Vec<String>,
    /// The variables naming the trusted authorities' bundle, when there are extra ones.
    trust_vars: Vec<(&'static str, String)>,
    /// Recorded after one program ended and before the next phase's proxy replaced that
    /// proxy: the next program's.
    between: Vec<Contact>,
}

/// What the environment's proxy recorded for one program, taken when it ends.
#[derive(Debug)]
pub struct PhaseContacts(Arc<Mutex<EnvNet>>);

impl PhaseContacts {
    /// The contacts since the program's phase began (including those between the previous
    /// program and this one).
    pub fn take(self) -> Vec<Contact> {
        let Ok(mut n) = self.0.lock() else {
            return Vec::new();
        };
        let mut out = std::mem::take(&mut n.between);
        if let Some(network) = &n.network {
            out.extend(network.take_contacts());
        }
        out
    }
}

/// What [`Env::start_with`] runs, beyond [`Env::start`].
#[derive(Default)]
pub struct Start<'a> {
    /// The program (a sidecar service's entrypoint and command); `None`: the image's
    /// entrypoint with [`KEEPER`].
    pub program: Option<Vec<String>>,
    /// Called with the environment's network namespace before its program starts (links
    /// it to an interactive world's network).
    #[allow(clippy::type_complexity)]
    pub attach: Option<&'a dyn Fn(&OwnedFd) -> Result<(), String>>,
}

impl std::fmt::Debug for Start<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Start")
            .field("program", &self.program)
            .field("attach", &self.attach.is_some())
            .finish()
    }
}

/// Who [`Env::exec`] starts.
#[derive(Debug, Clone)]
pub enum ExecAs {
    /// The agent: in the environment's user namespace and cgroup, what it leaves running
    /// stays.
    Agent,
    /// The grader: its own cgroup with `limits`; `mounts` (host folder, path inside,
    /// read-only) bound in a mount namespace of its own; `writable` handed to the sandbox
    /// user while it runs.
    Grader {
        /// Host folder, path inside, read-only.
        mounts: Vec<(PathBuf, String, bool)>,
        /// Host folders it writes (handed over, counted in `limits.disk_mb`).
        writable: Vec<PathBuf>,
        /// Its limits.
        limits: Limits,
    },
}

/// The extra authorities any phase of an environment will trust (the agent's network
/// `agent`, grading's `grading`), for [`Env::start`] to write into it before the first.
pub fn phases_trust(
    agent: Option<&egress::Policy>,
    grading: akbench_core::egress::NetworkMode,
) -> Result<Option<trust::Extra>, String> {
    let grading = egress::Policy::for_phase(grading)?;
    let trust = [agent, Some(&grading)]
        .into_iter()
        .flatten()
        .filter(|p| p.needs_proxy())
        .find_map(egress::Policy::trust);
    Ok(trust)
}

fn err(reason: impl Into<String>) -> RuntimeError {
    RuntimeError::Container {
        reason: reason.into(),
    }
}

impl Env {
    /// Starts the environment: `spec` is the agent's (its environment, folders and time),
    /// run as [`KEEPER`] in `exposure` with `limits`, and waits until its namespaces exist.
    /// `trust`: the extra authorities of any phase that will have the proxy (written into the
    /// environment's file system now). The environment's own program gets no proxy: each
    /// phase's program is given its network by [`Env::exec`].
    pub fn start(
        spec: ProcessSpec,
        exposure: &Exposure,
        limits: Limits,
        trust: Option<trust::Extra>,
    ) -> Result<Env, RuntimeError> {
        Self::start_with(spec, exposure, limits, trust, Start::default())
    }

    /// [`Env::start`] with `start`'s program and network hook: a sidecar service's program
    /// in place of [`KEEPER`], and its namespace linked to the world's network before it
    /// runs ([`super::world`]).
    pub fn start_with(
        mut spec: ProcessSpec,
        exposure: &Exposure,
        limits: Limits,
        trust: Option<trust::Extra>,
        start: Start<'_>,
    ) -> Result<Env, RuntimeError> {
        let view = exposure
            .container
            .clone()
            .ok_or_else(|| err("grading in the agent's environment (`environment_mode = \"shared\"`) needs `runtime: container`"))?;
        let (user, range) =
            match bwrap::drop_to().map_err(|reason| RuntimeError::Unavailable { reason })? {
                Some(drop_to) => {
                    let var = std::env::var(subids::VAR).ok();
                    let range = subids::parse(var.as_deref(), drop_to.user.uid)
                        .and_then(|_| subids::parse(var.as_deref(), drop_to.user.gid))
                        .map_err(err)?;
                    (drop_to.user, Some(range))
                }
                None => {
                    // SAFETY: geteuid/getegid have no preconditions.
                    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
                    (owner::SandboxUser { uid, gid }, None)
                }
            };
        // The image's ENTRYPOINT keeps running, with Harbor's command in place of `Cmd`.
        let service = start.program.is_some();
        spec.argv = match start.program {
            Some(argv) => argv,
            None => view
                .image
                .run
                .entrypoint
                .iter()
                .cloned()
                .chain(KEEPER.iter().map(|s| (*s).to_string()))
                .collect(),
        };
        if spec.argv.is_empty() {
            return Err(err("the service has no program: its image has no `Entrypoint` or `Cmd` and the compose file no `command`; fix: write `command:` for it"));
        }
        let program_text = spec.argv.join(" ");
        // A service's output goes where its spec says (`runtime::world`: kept with the
        // attempt's output); the environment's keeper's to its scratch.
        if !service {
            spec.stdout_path = exposure.scratch.join("environment.stdout.log");
            spec.stderr_path = exposure.scratch.join("environment.stderr.log");
        }
        spec.timeout = Duration::from_secs(7 * 24 * 3600);
        spec.tag = format!("{}-env", spec.tag);
        let stderr_path = spec.stderr_path.clone();
        let keeper = Exposure {
            egress: None,
            ..exposure.clone()
        };
        let trust_vars = match &trust {
            Some(_) => trust::env_vars(trust::BUNDLE),
            None => Vec::new(),
        };
        let prepared = super::prepare_with(
            RuntimeKind::Container,
            spec,
            &keeper,
            limits,
            Some(super::EnvironmentNeeds { trust }),
        )?;
        let procs = prepared.spec.hooks.cgroup_procs.clone();
        let mut guard = prepared.guard;
        let net = Arc::new(Mutex::new(EnvNet {
            network: guard.net.take(),
            // The world's members are reached directly too, never through the proxy.
            direct: exposure
                .endpoints
                .iter()
                .map(|e| e.host.clone())
                .chain(
                    exposure
                        .hosts
                        .iter()
                        .flat_map(|(n, a)| [n.clone(), a.to_string()]),
                )
                .collect(),
            trust_vars,
            between: Vec::new(),
        }));
        if let Some(attach) = start.attach {
            let netns = net
                .lock()
                .ok()
                .and_then(|n| n.network.as_ref().map(net::Network::netns_fd));
            let linked = match netns {
                Some(fd) => attach(&fd),
                None => Err("the environment has no network namespace".into()),
            };
            if let Err(e) = linked {
                if let Some(n) = net.lock().ok().and_then(|mut n| n.network.take()) {
                    let _ = n.stop();
                }
                guard.finish();
                return Err(err(e));
            }
        }
        let running = match spawn(prepared.spec) {
            Ok(r) => r,
            Err(e) => {
                guard.finish();
                return Err(err(format!("the environment did not start: {e}")));
            }
        };
        let mut env = Env {
            running: Some(running),
            guard: Some(guard),
            ns: Arc::new(Namespaces {
                user: devnull()?,
                mnt: devnull()?,
                pid: devnull()?,
                net: devnull()?,
                ipc: devnull()?,
                uts: devnull()?,
            }),
            procs,
            view,
            user,
            range,
            outer: None,
            scratch: exposure.scratch.clone(),
            relays: Mutex::new(Vec::new()),
            net,
            handed: Mutex::new(Vec::new()),
            ended: None,
            world: None,
        };
        let until = Instant::now() + START_WAIT;
        let pid = loop {
            if let Some(pid) = env.program_pid() {
                break pid;
            }
            if service && env.running.as_ref().is_some_and(Running::has_exited) {
                // A one-shot service ended before it could be entered: its exit is what
                // counts ([`Env::wait_exit`]).
                return Ok(env);
            }
            if Instant::now() > until || env.members().is_empty() {
                let said = akbench_core::bounded_read::ReadKind::Log
                    .read_text(&stderr_path, akbench_core::bounded_read::Links::Refuse)
                    .unwrap_or_default();
                env.end();
                return Err(err(format!(
                    "the environment's program (`{program_text}`) did not start: {}",
                    akbench_core::limits::elide(said.trim())
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let open = |what: &str| {
            std::fs::File::open(format!("/proc/{pid}/ns/{what}"))
                .map(OwnedFd::from)
                .map_err(|e| {
                    err(format!(
                        "cannot open the environment's {what} namespace: {e}"
                    ))
                })
        };
        let ns = (|| {
            Ok::<_, RuntimeError>(Namespaces {
                user: open("user")?,
                mnt: open("mnt")?,
                pid: open("pid")?,
                net: open("net")?,
                ipc: open("ipc")?,
                uts: open("uts")?,
            })
        })();
        match ns {
            Ok(ns) => env.ns = Arc::new(ns),
            Err(e) => {
                env.end();
                return Err(e);
            }
        }
        if env.range.is_none() {
            // bwrap itself (the process started) stays in the user namespace its parent
            // entered or made; the environment's is below it.
            let bwrap = env.running.as_ref().map_or(0, Running::pid);
            match std::fs::File::open(format!("/proc/{bwrap}/ns/user")) {
                Ok(f) => env.outer = Some(Arc::new(OwnedFd::from(f))),
                Err(e) => {
                    env.end();
                    return Err(err(format!(
                        "cannot open the user namespace the environment was made in: {e}"
                    )));
                }
            }
        }
        Ok(env)
    }

    fn members(&self) -> Vec<i32> {
        self.procs
            .iter()
            .flat_map(|f| {
                std::fs::read_to_string(f)
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse::<i32>().ok())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A process of the environment that is its program (set up: in a pid namespace of its
    /// own, not bwrap's init, not bwrap).
    fn program_pid(&self) -> Option<i32> {
        self.members().into_iter().find(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let nspid: Vec<&str> = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .map(|l| l.split_whitespace().collect())
                .unwrap_or_default();
            nspid.len() >= 2 && nspid.last() != Some(&"1") && comm.trim() != "bwrap"
        })
    }

    /// Makes `spec` start inside the environment (see the module documentation), and the
    /// guard that ends it. `egress`: the network of the phase it runs in (the agent's,
    /// grading's); `None` (a healthcheck): the network as it is, no proxy variables, no
    /// contacts of its own.
    pub fn exec(
        &self,
        spec: ProcessSpec,
        who: ExecAs,
        egress: Option<egress::Policy>,
    ) -> Result<super::Prepared, RuntimeError> {
        self.exec_as(spec, who, egress, None, &[])
    }

    /// [`Env::exec`] as `ids` (uid and gid inside: a task's `[agent] user` or `[verifier]
    /// user`, [`container::phase_ids`]) when they are not the image's user: the program
    /// switches to them inside the environment's user namespace (its capabilities go with
    /// root), `own` (the folders the agent writes) and a grader's `writable` are handed to
    /// them, the agent's until the environment ends. Everything else keeps its owner, so a
    /// file of the image only root may read stays so for a non-root phase.
    pub fn exec_as(
        &self,
        mut spec: ProcessSpec,
        who: ExecAs,
        egress: Option<egress::Policy>,
        ids: Option<(u32, u32)>,
        own: &[PathBuf],
    ) -> Result<super::Prepared, RuntimeError> {
        let ids = ids.filter(|i| *i != self.view.image.user);
        if let (Some(i), None) = (ids, self.range) {
            return Err(err(format!(
                "the phase runs as uid {} gid {} inside, not the image's user (uid {}, gid {}), and a worker that is not root maps only its own uid into the environment; fix: run the worker as root (it maps the image's other users to subordinate ids), or remove the task's `[agent] user` / `[verifier] user`",
                i.0, i.1, self.view.image.user.0, self.view.image.user.1
            )));
        }
        let owner = match ids {
            Some(i) => self.host_user(i)?,
            None => self.user,
        };
        if ids.is_some() && !own.is_empty() {
            let handed = owner::hand_over(own, owner)
                .map_err(|(path, source)| RuntimeError::Io { path, source })?;
            self.handed
                .lock()
                .map_err(|e| err(e.to_string()))?
                .push(handed);
        }
        let phase_contacts = match egress {
            Some(policy) => {
                self.enter_phase(policy, &mut spec)?;
                Some(PhaseContacts(self.net.clone()))
            }
            None => None,
        };
        let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(40);
        let keep: u64 = if ids.map_or(self.view.image.user.0, |i| i.0) == 0 {
            container::ROOT_CAPS
                .iter()
                .filter_map(|c| cap_number(c))
                .map(|n| 1u64 << n)
                .sum()
        } else {
            0
        };
        let filter: Vec<libc::sock_filter> = seccomp::Arch::native()
            .map(|a| {
                seccomp::program(a)
                    .into_iter()
                    .map(|i| libc::sock_filter {
                        code: i.code,
                        jt: i.jt,
                        jf: i.jf,
                        k: i.k,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let cstr = |p: &str| CString::new(p).map_err(|e| err(e.to_string()));
        let mut enter = Enter {
            cgroup: None,
            ns: self.ns.clone(),
            userns: None,
            outer: self.outer.clone(),
            own_maps: None,
            mounts: Vec::new(),
            uid: self.user.uid,
            gid: self.user.gid,
            ids,
            workdir: cstr(&self.view.image.workdir)?,
            keep,
            last_cap,
            filter: Arc::new(filter),
            relay: None,
            relay_fds: Vec::new(),
        };
        let facts = |limits: &Limits| RuntimeFacts {
            name: RuntimeKind::Container.as_str().into(),
            isolated: true,
            limits: limits.describe(),
            limit_hit: None,
            egress: Vec::new(),
        };
        let mut tools_view = self.view.clone();
        if matches!(who, ExecAs::Grader { .. }) {
            tools_view.tools = Vec::new();
        }
        spec.env = container::env(&tools_view, &spec.env);
        spec.hooks.contained = true;
        let guard = match who {
            ExecAs::Agent => {
                let procs = self
                    .procs
                    .first()
                    .ok_or_else(|| err("the environment has no cgroup"))?;
                enter.cgroup = Some(cstr(&procs.display().to_string())?);
                let (relay, ends) = Relay::start(
                    [spec.stdout_path.clone(), spec.stderr_path.clone()],
                    spec.output_cap,
                )
                .map_err(|e| err(format!("cannot make the agent's output pipes: {e}")))?;
                let tag = spec.tag.clone();
                spec.stdout_path = self.scratch.join(format!("exec-{tag}.stdout"));
                spec.stderr_path = self.scratch.join(format!("exec-{tag}.stderr"));
                enter.relay = Some((ends[0].as_raw_fd(), ends[1].as_raw_fd()));
                // The write ends stay open in the worker until the child has them (they
                // close on exec; the program gets its copies at 1 and 2).
                enter.relay_fds = ends.into_iter().collect();
                let relay = Arc::new(relay);
                self.relays
                    .lock()
                    .map_err(|e| err(e.to_string()))?
                    .push(relay.clone());
                let limits = self.guard.as_ref().map(|g| g.limits).unwrap_or_default();
                Guard {
                    facts: facts(&limits),
                    cgroup: None,
                    net: None,
                    disk: None,
                    handed: owner::Handed::none(),
                    limits,
                    status: None,
                    output: Some(relay),
                    phase_contacts,
                }
            }
            ExecAs::Grader {
                mounts,
                writable,
                limits,
            } => {
                match self.range {
                    Some(range) => {
                        let userns =
                            container::user_namespace(self.user, self.view.image.user, range)
                                .map_err(err)?;
                        enter.userns = Some(Arc::new(userns));
                    }
                    // A sibling of the environment's, made by the child as the worker.
                    None => {
                        enter.own_maps = Some(super::userns::OwnMaps::to(
                            self.view.image.user,
                            (self.user.uid, self.user.gid),
                        ))
                    }
                }
                if mounts.len() > MAX_GRADER_MOUNTS {
                    return Err(err(format!(
                        "the grader has {} folders to bind, more than {MAX_GRADER_MOUNTS}",
                        mounts.len()
                    )));
                }
                for (host, inside, ro) in &mounts {
                    // A root worker clones the folder now; a child of a worker that is not
                    // root clones it once it is in a mount namespace of its own.
                    let mount = match self.range {
                        Some(_) => {
                            EnterMount::Tree(Arc::new(detached_tree(host, *ro).map_err(|e| {
                                err(format!("cannot bind {} at {inside}: {e}", host.display()))
                            })?))
                        }
                        None => EnterMount::Host {
                            path: cstr(&host.display().to_string())?,
                            ro: *ro,
                        },
                    };
                    let mut prefixes = Vec::new();
                    let mut at = PathBuf::from("/");
                    for c in Path::new(inside).components().skip(1) {
                        at.push(c);
                        prefixes.push(cstr(&at.display().to_string())?);
                    }
                    enter.mounts.push((mount, prefixes));
                }
                let group =
                    cgroup::Group::create(&spec.tag, &limits).map_err(RuntimeError::Cgroup)?;
                let handed = match owner::hand_over(&writable, owner) {
                    Ok(h) => h,
                    Err((path, source)) => {
                        group.remove();
                        return Err(RuntimeError::Io { path, source });
                    }
                };
                spec.hooks.cgroup_procs = group.procs_files();
                let disk = DiskWatch::start(writable.clone(), limits.disk_mb, group.clone());
                Guard {
                    facts: facts(&limits),
                    cgroup: Some(group),
                    net: None,
                    disk: Some(disk),
                    handed,
                    limits,
                    status: None,
                    output: None,
                    phase_contacts,
                }
            }
        };
        spec.hooks.enter = Some(Arc::new(enter));
        Ok(super::Prepared { spec, guard })
    }

    /// The host ids of `ids` inside the environment's user namespace: the image's user is
    /// the sandbox user, any other id `n` the range's `base + n` ([`super::subids`]).
    fn host_user(&self, ids: (u32, u32)) -> Result<owner::SandboxUser, RuntimeError> {
        let host = |inside: u32, image: u32, sandbox: u32| {
            if inside == image {
                Ok(sandbox)
            } else {
                match self.range {
                    Some(r) if inside < r.count => Ok(r.base + inside),
                    Some(r) => Err(err(format!(
                        "id {inside} is past the {} ids the environment maps ({}); fix: a user with a smaller id, or a larger range",
                        r.count,
                        subids::VAR
                    ))),
                    None => Err(err(format!(
                        "id {inside} is not mapped: a worker that is not root maps only its own uid into the environment; fix: run the worker as root"
                    ))),
                }
            }
        };
        Ok(owner::SandboxUser {
            uid: host(ids.0, self.view.image.user.0, self.user.uid)?,
            gid: host(ids.1, self.view.image.user.1, self.user.gid)?,
        })
    }

    /// Gives the environment `policy`'s network (a new proxy when it differs from the
    /// current one) and `spec` its variables.
    fn enter_phase(
        &self,
        policy: egress::Policy,
        spec: &mut ProcessSpec,
    ) -> Result<(), RuntimeError> {
        let mut n = self
            .net
            .lock()
            .map_err(|e| err(format!("the environment's network: {e}")))?;
        let wanted = Some(policy).filter(egress::Policy::needs_proxy);
        let now = n.network.as_ref().and_then(|x| x.policy()).cloned();
        if now != wanted {
            let network = n
                .network
                .as_mut()
                .ok_or_else(|| err("the environment has no network namespace of its own"))?;
            let left = network.set_egress(wanted).map_err(RuntimeError::Net)?;
            n.between.extend(left);
        }
        if n.network.as_ref().is_some_and(net::Network::has_proxy) {
            let direct: Vec<&str> = n.direct.iter().map(String::as_str).collect();
            for (k, v) in egress::env_vars(&direct) {
                spec.env.insert(k.into(), v);
            }
            for (k, v) in &n.trust_vars {
                spec.env.insert((*k).into(), v.clone());
            }
        }
        Ok(())
    }

    fn end(&mut self) -> Option<Finished> {
        let network = self.net.lock().ok().and_then(|mut n| n.network.take());
        let Some(running) = self.running.take() else {
            if let Some(n) = network {
                let _ = n.stop();
            }
            if let Some(world) = self.world.take() {
                world.end();
            }
            return None;
        };
        // A program still running is stopped; one that ended is only reaped.
        let cancel = CancelToken::new();
        if !running.has_exited() {
            cancel.cancel();
        }
        self.ended = Some(running.wait(&cancel));
        if let Ok(mut handed) = self.handed.lock() {
            while let Some(h) = handed.pop() {
                h.restore();
            }
        }
        let finished = self.guard.take().map(Guard::finish);
        // Every process is gone: the proxy stops (what it recorded since the last program
        // ended belongs to no phase).
        if let Some(n) = network {
            let _ = n.stop();
        }
        if let Ok(mut relays) = self.relays.lock() {
            for r in relays.drain(..) {
                r.end();
            }
        }
        if let Some(world) = self.world.take() {
            world.end();
        }
        finished
    }

    /// Makes `world` end with this environment, after its own processes.
    pub fn join_world(&mut self, world: super::world::Running) {
        self.world = Some(world);
    }

    /// Whether the environment's program has ended (a one-shot sidecar service).
    pub fn has_exited(&self) -> bool {
        self.ended.is_some() || self.running.as_ref().is_none_or(Running::has_exited)
    }

    /// How its program ended, once it has ([`Env::has_exited`]); the rest of the
    /// environment's processes end with it.
    pub fn wait_exit(&mut self) -> Option<&crate::process::ProcessEnd> {
        if self.ended.is_none() && self.has_exited() {
            self.end();
        }
        self.ended.as_ref()
    }

    /// Ends the environment like [`Env::finish`] and returns how its program ended.
    pub fn finish_keeping_end(mut self) -> Option<crate::process::ProcessEnd> {
        self.end();
        self.ended.take()
    }

    /// How its program ended, when it has.
    pub fn program_end(&self) -> Option<&crate::process::ProcessEnd> {
        self.ended.as_ref()
    }

    /// Ends every process of the environment (its program, what the agent left running)
    /// and waits until none is alive.
    pub fn finish(mut self) -> Option<Finished> {
        self.end()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.end();
    }
}

fn devnull() -> Result<OwnedFd, RuntimeError> {
    std::fs::File::open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|e| err(format!("cannot open /dev/null: {e}")))
}

/// The number of a capability of [`container::ROOT_CAPS`].
pub fn cap_number(name: &str) -> Option<u32> {
    Some(match name {
        "CAP_CHOWN" => 0,
        "CAP_DAC_OVERRIDE" => 1,
        "CAP_FOWNER" => 3,
        "CAP_FSETID" => 4,
        "CAP_KILL" => 5,
        "CAP_SETGID" => 6,
        "CAP_SETUID" => 7,
        "CAP_SETPCAP" => 8,
        "CAP_NET_BIND_SERVICE" => 10,
        "CAP_SYS_CHROOT" => 18,
        _ => return None,
    })
}

/// A detached copy of the folder `host` (read-only when `ro`), to attach in the grader's
/// mount namespace.
fn detached_tree(host: &Path, ro: bool) -> std::io::Result<OwnedFd> {
    let path = CString::new(host.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // SAFETY: a NUL-terminated path; the result is checked before it is owned.
    let fd = unsafe { super::userns::clone_tree(path.as_ptr(), ro) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The most folders bound for a grader (the child of a worker that is not root keeps their
/// descriptors in a fixed array: it may not allocate).
const MAX_GRADER_MOUNTS: usize = 16;

/// A folder bound for the grader.
#[derive(Debug)]
enum EnterMount {
    /// A detached tree the (root) worker cloned.
    Tree(Arc<OwnedFd>),
    /// A host folder the child of a worker that is not root clones itself.
    Host {
        /// The host path.
        path: CString,
        /// Read-only.
        ro: bool,
    },
}

/// What the child of [`Env::exec`] does before it execs (everything prepared before fork).
#[derive(Debug)]
pub struct Enter {
    cgroup: Option<CString>,
    ns: Arc<Namespaces>,
    /// The grader's own user namespace; `None`: the environment's.
    userns: Option<Arc<OwnedFd>>,
    /// A worker that is not root: the user namespace to join first ([`Env::outer`]).
    outer: Option<Arc<OwnedFd>>,
    /// A worker that is not root, for the grader: the maps of the user namespace the child
    /// makes (a sibling of the environment's) instead of joining one.
    own_maps: Option<super::userns::OwnMaps>,
    /// What is bound for the grader and the folders of its place inside, shortest first.
    mounts: Vec<(EnterMount, Vec<CString>)>,
    uid: u32,
    gid: u32,
    /// The phase's own uid and gid inside, when they are not the image's user.
    ids: Option<(u32, u32)>,
    workdir: CString,
    keep: u64,
    last_cap: u32,
    filter: Arc<Vec<libc::sock_filter>>,
    /// The agent's output pipes' write ends (stdout, stderr).
    relay: Option<(i32, i32)>,
    /// Their descriptors, held open until the child has them.
    relay_fds: Vec<OwnedFd>,
}

/// The program's pid, for the waiting parent's signal handler.
static PROGRAM: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = PROGRAM.load(std::sync::atomic::Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            libc::kill(-pid, sig);
        }
    }
}

impl crate::process::PreExec for Enter {
    fn register(self: Arc<Self>, cmd: &mut std::process::Command) {
        self.install(cmd);
    }
}

impl Enter {
    /// Registers the steps on `cmd` (after every other pre-exec step).
    pub fn install(self: &Arc<Self>, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let e = self.clone();
        // SAFETY: only async-signal-safe system calls on data prepared before fork; nothing
        // is allocated.
        unsafe {
            cmd.pre_exec(move || e.enter());
        }
    }

    /// The steps, between fork and exec.
    fn enter(&self) -> std::io::Result<()> {
        // SAFETY: async-signal-safe system calls only, on descriptors and strings prepared
        // before fork and alive in `self`; between fork and exec, single-threaded.
        unsafe { self.enter_unchecked() }
    }

    /// A root worker's child joins the environment: its namespaces as root, the grader's
    /// folders attached, then the sandbox user in the environment's (or the grader's) user
    /// namespace.
    #[allow(unsafe_op_in_unsafe_fn)]
    unsafe fn join_as_root(&self) -> std::io::Result<()> {
        let fail = || Err(std::io::Error::last_os_error());
        for fd in [&self.ns.net, &self.ns.ipc, &self.ns.uts, &self.ns.mnt] {
            if libc::setns(fd.as_raw_fd(), 0) != 0 {
                return fail();
            }
        }
        if !self.mounts.is_empty() {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            if libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            // The folders are made as the sandbox user (the environment's root): a file
            // system of its user namespace (its /tmp) refuses an owner it cannot map.
            libc::setfsgid(self.gid);
            libc::setfsuid(self.uid);
            for (mount, folders) in &self.mounts {
                if let EnterMount::Tree(tree) = mount {
                    super::userns::attach(tree.as_raw_fd(), folders)?;
                }
            }
        }
        if libc::setns(self.ns.pid.as_raw_fd(), libc::CLONE_NEWPID) != 0 {
            return fail();
        }
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(self.gid, self.gid, self.gid) != 0
            || libc::setresuid(self.uid, self.uid, self.uid) != 0
        {
            return fail();
        }
        let userns = self.userns.as_deref().unwrap_or(&self.ns.user);
        if libc::setns(userns.as_raw_fd(), libc::CLONE_NEWUSER) != 0 {
            return fail();
        }
        Ok(())
    }

    /// The child of a worker that is not root joins the environment ([`super::userns`]): it
    /// enters the user namespace the environment was made in first (as its owner it holds
    /// every capability there and below), clones the grader's folders in a mount namespace
    /// of its own, joins the environment's namespaces and attaches them, then enters the
    /// environment's user namespace (the agent) or makes a sibling of it with the same map
    /// (the grader: the environment's processes hold no capability in it).
    #[allow(unsafe_op_in_unsafe_fn)]
    unsafe fn join_unprivileged(&self) -> std::io::Result<()> {
        let fail = || Err(std::io::Error::last_os_error());
        let Some(outer) = &self.outer else {
            return Ok(());
        };
        // The host's /proc of this process, to write the maps of its own user namespace
        // once it is in the environment's mount namespace.
        let proc_self = match self.own_maps {
            Some(_) => {
                let fd = libc::open(
                    c"/proc/self".as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                );
                if fd < 0 {
                    return fail();
                }
                fd
            }
            None => -1,
        };
        if libc::setns(outer.as_raw_fd(), libc::CLONE_NEWUSER) != 0 {
            return fail();
        }
        let mut trees = [-1i32; MAX_GRADER_MOUNTS];
        if !self.mounts.is_empty() {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            for (i, (mount, _)) in self.mounts.iter().enumerate().take(MAX_GRADER_MOUNTS) {
                if let EnterMount::Host { path, ro } = mount {
                    trees[i] = super::userns::clone_tree(path.as_ptr(), *ro);
                    if trees[i] < 0 {
                        return fail();
                    }
                }
            }
        }
        for fd in [&self.ns.net, &self.ns.ipc, &self.ns.uts, &self.ns.mnt] {
            if libc::setns(fd.as_raw_fd(), 0) != 0 {
                return fail();
            }
        }
        if !self.mounts.is_empty() {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            if libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            for (i, (_, folders)) in self.mounts.iter().enumerate().take(MAX_GRADER_MOUNTS) {
                super::userns::attach(trees[i], folders)?;
                libc::close(trees[i]);
            }
        }
        if libc::setns(self.ns.pid.as_raw_fd(), libc::CLONE_NEWPID) != 0 {
            return fail();
        }
        match &self.own_maps {
            Some(maps) => {
                if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                    return fail();
                }
                let written = maps.write(proc_self, c".".as_ptr());
                libc::close(proc_self);
                written?;
            }
            None => {
                if libc::setns(self.ns.user.as_raw_fd(), libc::CLONE_NEWUSER) != 0 {
                    return fail();
                }
            }
        }
        Ok(())
    }

    #[allow(unsafe_op_in_unsafe_fn)]
    unsafe fn enter_unchecked(&self) -> std::io::Result<()> {
        let fail = || Err(std::io::Error::last_os_error());
        if let Some(p) = &self.cgroup {
            let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return fail();
            }
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
            if n != 1 {
                return fail();
            }
        }
        match self.outer {
            Some(_) => self.join_unprivileged()?,
            None => self.join_as_root()?,
        }
        if libc::chdir(self.workdir.as_ptr()) != 0 && libc::chdir(c"/".as_ptr()) != 0 {
            return fail();
        }
        for cap in 0..=self.last_cap.min(63) {
            if self.keep & (1u64 << cap) == 0
                && libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
            {
                return fail();
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        // The phase's own user: a switch away from root drops every capability.
        if let Some((uid, gid)) = self.ids {
            if libc::setresgid(gid, gid, gid) != 0 || libc::setresuid(uid, uid, uid) != 0 {
                return fail();
            }
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return fail();
        }
        if !self.filter.is_empty() {
            let prog = libc::sock_fprog {
                len: self.filter.len() as libc::c_ushort,
                filter: self.filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
                0,
                0,
            ) != 0
            {
                return fail();
            }
        }
        let child = libc::fork();
        if child < 0 {
            return fail();
        }
        if child == 0 {
            // The program, in the environment's pid namespace: a process group of its own
            // (what it leaves in the background is not ended with the waiting parent's
            // group), killed if the parent dies.
            if let Some((out, err)) = self.relay {
                if libc::dup2(out, 1) < 0 || libc::dup2(err, 2) < 0 {
                    return fail();
                }
            }
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            return Ok(());
        }
        // The waiting parent: forwards the stop signals to the program's group, ends as it
        // ended. It holds no descriptor (so spawn sees the exec and the pipes close with it)
        // and no capability.
        PROGRAM.store(child, std::sync::atomic::Ordering::SeqCst);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(sig, forward as *const () as libc::sighandler_t);
        }
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        let mut status = 0;
        loop {
            let r = libc::waitpid(child, &mut status, 0);
            if r == child || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128
        });
    }
}

/// The agent's output, read from pipes of its own: written to its log files (capped) until
/// the agent's end was [`Relay::settle`]d, then read and dropped until the environment
/// ends, so a process the agent left that still writes to them neither blocks nor dies of
/// a closed pipe.
#[derive(Debug)]
pub struct Relay {
    streams: Vec<Arc<Stream>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    quit: Arc<std::sync::atomic::AtomicBool>,
}

#[derive(Debug)]
struct Stream {
    read: OwnedFd,
    /// The log file while it is written; `None` once settled.
    file: Mutex<Option<(std::fs::File, u64)>>,
}

impl Relay {
    fn start(paths: [PathBuf; 2], cap: u64) -> std::io::Result<(Relay, [OwnedFd; 2])> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let quit = Arc::new(AtomicBool::new(false));
        let mut streams = Vec::new();
        let mut ends = Vec::new();
        let mut threads = Vec::new();
        for p in paths {
            let mut fds = [0i32; 2];
            // SAFETY: pipe2 fills the two-element array; the result is checked.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: two fresh descriptors this function owns.
            let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            // SAFETY: fcntl on a descriptor this function owns.
            unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
            let file = std::fs::File::create(&p)?;
            let s = Arc::new(Stream {
                read: r,
                file: Mutex::new(Some((file, 0))),
            });
            let (s2, q) = (s.clone(), quit.clone());
            threads.push(std::thread::spawn(move || {
                while !q.load(Ordering::SeqCst) {
                    let mut pfd = libc::pollfd {
                        fd: s2.read.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one pollfd.
                    unsafe { libc::poll(&mut pfd, 1, 100) };
                    if s2.pump(cap) == Some(0) {
                        return;
                    }
                }
            }));
            streams.push(s);
            ends.push(w);
        }
        let [o, e]: [OwnedFd; 2] = ends
            .try_into()
            .map_err(|_| std::io::Error::other("two pipes"))?;
        Ok((
            Relay {
                streams,
                threads: Mutex::new(threads),
                quit,
            },
            [o, e],
        ))
    }

    /// Writes what the agent's program left in the pipes to the log files and stops writing
    /// them (what comes later is dropped). Called once the program ended.
    pub fn settle(&self) {
        for s in &self.streams {
            let until = Instant::now() + Duration::from_secs(5);
            loop {
                let mut guard = match s.file.lock() {
                    Ok(g) => g,
                    Err(_) => break,
                };
                let mut n: libc::c_int = 0;
                // SAFETY: FIONREAD into an int.
                unsafe { libc::ioctl(s.read.as_raw_fd(), libc::FIONREAD, &mut n) };
                if n == 0 || Instant::now() > until {
                    *guard = None;
                    break;
                }
                drop(guard);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Stops reading (the environment ended).
    fn end(&self) {
        self.quit.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Ok(mut t) = self.threads.lock() {
            for h in t.drain(..) {
                let _ = h.join();
            }
        }
    }
}

impl Stream {
    /// Reads what is in the pipe (under the file's lock) and writes it while not settled;
    /// `Some(0)` at the end of the pipe.
    fn pump(&self, cap: u64) -> Option<usize> {
        use std::io::Write;
        let mut guard = self.file.lock().ok()?;
        let mut buf = [0u8; 16 * 1024];
        let mut total = 0;
        loop {
            // SAFETY: read into a stack buffer of its length.
            let n =
                unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n == 0 {
                return Some(0);
            }
            if n < 0 {
                return Some(total.max(1));
            }
            let n = n as usize;
            total += n;
            if let Some((f, written)) = guard.as_mut() {
                let keep = cap.saturating_sub(*written).min(n as u64) as usize;
                if keep > 0 {
                    let _ = f.write_all(&buf[..keep]);
                    *written += keep as u64;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capability_the_containers_root_keeps_has_its_number() {
        let bits: Vec<u32> = container::ROOT_CAPS
            .iter()
            .map(|c| cap_number(c).unwrap_or_else(|| panic!("{c}")))
            .collect();
        assert_eq!(bits, [0, 1, 3, 4, 5, 6, 7, 8, 10, 18]);
    }
}
