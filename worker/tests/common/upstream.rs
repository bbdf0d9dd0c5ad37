//! An upstream host for the egress tests: a network namespace this test process creates,
//! serving HTTPS (a certificate from a CA made here, for [`NAMES`]) and plain HTTP with
//! Python's `http.server`, and the "worker" namespace linked to it by a veth pair, so
//! nothing of the machine's own network changes. Files under [`Upstream::www`]`/HOST/PATH`
//! are served as they are (the installers of [`super::installers`]); any other path gets
//! 100000 bytes of `x` (`/fail...`: a 503).
//!
//! Also the runner every egress test uses: [`run_in`] runs a script in a sandbox (or a
//! container) under a policy and returns its output and the proxy's contacts.

use akbench_coordinator::devcerts::{Ca, Validity};
use akbench_core::egress::{AllowedHost, Contact, NetworkMode, Outcome};
use akbench_worker::process::{base_env, spawn, CancelToken, ProcessSpec};
use akbench_worker::runtime::container::{Image, View};
use akbench_worker::runtime::egress::Policy;
use akbench_worker::runtime::{prepare, sandbox_available, Exposure, Limits, RuntimeKind};
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The names the upstream's certificate covers (and [`Upstream::policy`] maps to it).
pub const NAMES: &[&str] = &["up.test", "other.test", "astral.sh", "github.com"];

/// The server (scripts/test-upstream/server.py, which scripts/test_upstream.py runs too).
const SERVER: &str = include_str!("../../../scripts/test-upstream/server.py");

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// The worker's and the upstream host's namespaces, the server, the CA; removed on drop.
pub struct Upstream {
    pub worker_ns: String,
    pub up_ns: String,
    pub addr: IpAddr,
    server: Option<Child>,
    /// The CA and the server's files: `/tmp/akbench-egress-PID`, a path the unprivileged
    /// rerun's child finds from its parent's pid (its environment is cleared).
    pub dir: PathBuf,
    /// Made by this process (removed on drop), not by the parent of an unprivileged rerun.
    owned: bool,
}

impl Upstream {
    /// The names this process's upstream has (`pid`: the process that made it).
    fn named(pid: u32, owned: bool) -> Upstream {
        Upstream {
            worker_ns: format!("akbeW{pid}"),
            up_ns: format!("akbeU{pid}"),
            addr: format!("10.215.{}.2", pid % 250).parse().unwrap(),
            server: None,
            dir: PathBuf::from(format!("/tmp/akbench-egress-{pid}")),
            owned,
        }
    }

    /// The upstream the parent of this unprivileged rerun made (this process is already in
    /// its worker namespace).
    fn of_parent() -> Upstream {
        // SAFETY: getppid has no preconditions.
        let ppid = unsafe { libc::getppid() };
        Upstream::named(u32::try_from(ppid).unwrap(), false)
    }

    pub fn create() -> Result<Upstream, String> {
        Upstream::make(false)
    }

    /// An upstream linked to this machine's own namespace (a veth `akbeH<pid>` here,
    /// removed with the upstream's namespace): the worker stays where it is, with the
    /// machine's real network (Debian's mirrors, PyPI) and the test host besides.
    pub fn create_on_host() -> Result<Upstream, String> {
        Upstream::make(true)
    }

    fn make(on_host: bool) -> Result<Upstream, String> {
        let mut u = Upstream::named(std::process::id(), true);
        std::fs::create_dir_all(&u.dir).map_err(|e| e.to_string())?;
        let (w, up) = (u.worker_ns.clone(), u.up_ns.clone());
        ip(&["netns", "add", &up])?;
        let net = format!("10.215.{}", std::process::id() % 250);
        if on_host {
            let link = format!("akbeH{}", std::process::id());
            ip(&[
                "link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &up,
            ])?;
            ip(&["addr", "add", &format!("{net}.1/24"), "dev", &link])?;
            ip(&["link", "set", &link, "up"])?;
        } else {
            ip(&["netns", "add", &w])?;
            ip(&[
                "-n", &w, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns",
                &up,
            ])?;
        }
        let sides: &[(&String, u8)] = if on_host {
            &[(&up, 2)]
        } else {
            &[(&w, 1), (&up, 2)]
        };
        for (ns, host) in sides {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{net}.{host}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        }
        let ca = Ca::new("akbench egress test CA", Validity::days(1)).map_err(|e| e.to_string())?;
        let cert = ca
            .server(
                &NAMES.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
                Validity::days(1),
            )
            .map_err(|e| e.to_string())?;
        let d = u.dir.as_path();
        std::fs::create_dir_all(d.join("www")).map_err(|e| e.to_string())?;
        for (name, text) in [
            ("ca.pem", &ca.pem().cert),
            ("cert.pem", &cert.cert),
            ("key.pem", &cert.key),
            ("server.py", &SERVER.to_string()),
        ] {
            std::fs::write(d.join(name), text).map_err(|e| e.to_string())?;
        }
        // The sandbox user (a root worker's) reads the CA.
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &up, "/usr/bin/python3"])
            .arg(d.join("server.py"))
            .arg(d.join("cert.pem"))
            .arg(d.join("key.pem"))
            .arg(d.join("www"))
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        u.server = Some(child);
        if line.trim() != "ready" {
            return Err(format!("the upstream server did not start: {line:?}"));
        }
        Ok(u)
    }

    /// Moves the calling thread (and every thread it starts later) into the worker's
    /// namespace.
    pub fn enter_worker(&self) {
        let f = std::fs::File::open(format!("/var/run/netns/{}", self.worker_ns)).unwrap();
        // SAFETY: setns on a namespace file we opened; affects this thread only.
        assert_eq!(
            unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) },
            0,
            "setns: {}",
            std::io::Error::last_os_error()
        );
    }

    /// `mode` with the upstream's range opened and its [`NAMES`] (and one resolving to the
    /// worker's loopback, one to the worker's own address) known to the worker.
    pub fn policy(&self, mode: NetworkMode) -> Policy {
        let mut p = Policy::new(mode);
        p.open_ranges = vec![AllowedHost::parse("10.215.0.0/16").unwrap()];
        p.hosts = NAMES.iter().map(|n| (n.to_string(), self.addr)).collect();
        p.hosts.extend([
            ("sneaky.test".into(), "127.0.0.1".parse().unwrap()),
            // The worker namespace's own address, in the opened range.
            (
                "self.test".into(),
                format!(
                    "10.215.{}.1",
                    self.addr.to_string().split('.').nth(2).unwrap()
                )
                .parse()
                .unwrap(),
            ),
        ]);
        p
    }

    /// The upstream's CA certificate (PEM).
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Where the served files are: `www/HOST/PATH` is `https://HOST/PATH` (and `http://`).
    pub fn www(&self) -> PathBuf {
        self.dir.join("www")
    }

    /// [`NAMES`] as the worker's `AKBENCH_EGRESS_HOSTS` spells them.
    pub fn hosts_env(&self) -> String {
        NAMES
            .iter()
            .map(|n| format!("{n}={}", self.addr))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(c) = &mut self.server {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = ip(&["netns", "del", &self.worker_ns]);
        let _ = ip(&["netns", "del", &self.up_ns]);
    }
}

/// Whether this test can run here; prints why not.
pub fn ready(test: &str) -> Option<Upstream> {
    if super::unprivileged::is_child() {
        return Some(Upstream::of_parent());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        akbench_core::testkit::skip(test, "network namespaces need root");
        return None;
    }
    for tool in ["/usr/bin/python3", "/usr/bin/curl"] {
        if !Path::new(tool).exists() {
            akbench_core::testkit::skip(test, &format!("{tool} is missing"));
            return None;
        }
    }
    if let Err(e) = sandbox_available() {
        akbench_core::testkit::skip(test, &format!("no sandbox here: {e}"));
        return None;
    }
    match Upstream::create() {
        Ok(u) => {
            u.enter_worker();
            Some(u)
        }
        Err(e) => {
            akbench_core::testkit::skip(test, &format!("cannot make the namespaces: {e}"));
            None
        }
    }
}

/// Runs `script` with `sh` in the sandbox under `policy`: its stdout and the contacts.
pub fn sandboxed(u: &Upstream, policy: Option<Policy>, script: &str) -> (String, Vec<Contact>) {
    run_in(u, policy, script, None)
}

/// [`sandboxed`], over `image` (the `container` runtime) when given.
pub fn run_in(
    u: &Upstream,
    policy: Option<Policy>,
    script: &str,
    image: Option<&Image>,
) -> (String, Vec<Contact>) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let mut env = base_env(&home);
    env.insert("CA".into(), u.ca().display().to_string());
    let spec = ProcessSpec {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: ws.clone(),
        env,
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
        writable: vec![ws.clone(), home.clone()],
        readable: vec![u.dir.clone()],
        endpoints: Vec::new(),
        disk_roots: vec![ws.clone(), home.clone()],
        scratch: dir.path().join("rt"),
        container: image.map(|i| View {
            workspace: true,
            image: i.clone(),
            mounts: Vec::new(),
            ro_mounts: Vec::new(),
            tools: Vec::new(),
        }),
        egress: policy,
    };
    let kind = match image {
        Some(_) => RuntimeKind::Container,
        None => RuntimeKind::Sandbox,
    };
    let p = prepare(kind, spec, &exposure, Limits::default()).unwrap();
    let end = spawn(p.spec).unwrap().wait(&CancelToken::new());
    let fin = p.guard.finish();
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap_or_default();
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap_or_default();
    assert_eq!(end.exit_code, Some(0), "stdout: {out}\nstderr: {err}");
    (out, fin.facts.egress)
}

/// `URL curl's-exit-code http-code connect-code` per line, for each URL (the connect code
/// is the proxy's answer to CONNECT).
pub fn fetch_all(urls: &[&str]) -> String {
    let mut s = String::new();
    for u in urls {
        s.push_str(&format!(
            "c=$(curl -sS --cacert \"$CA\" -o /dev/null -w '%{{http_code}} %{{http_connect}}' --max-time 60 {u} 2>/dev/null); echo \"{u} $? $c\"\n"
        ));
    }
    s
}

pub fn line<'a>(out: &'a str, url: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{url} ")))
        .unwrap_or_else(|| panic!("no line for {url} in {out}"))
}

pub fn contact<'a>(cs: &'a [Contact], host: &str, port: u16, outcome: Outcome) -> &'a Contact {
    cs.iter()
        .find(|c| c.host == host && c.port == port && c.outcome == outcome)
        .unwrap_or_else(|| panic!("no {host}:{port} {outcome:?} in {cs:#?}"))
}
