//! The egress proxy with real components: an upstream host in a network namespace this test
//! creates, serving HTTPS (a certificate from a CA made here) and plain HTTP with
//! Python's `http.server`; the "worker" (this test's thread, and every thread the runtime
//! starts from it) in a second namespace linked to it by a veth pair, so nothing of the
//! machine's own network changes; a sandboxed `sh` running `curl` through the proxy.
//!
//! Checked: a public phase reaches the host by name over HTTPS and HTTP and every
//! connection is recorded with its bytes and (plain HTTP) status; an allowlist reaches only
//! the listed name (the other is refused and recorded `denied`); `no-network` gets no proxy
//! and reaches nothing; the worker's own loopback and an unopened private range are never
//! reached, whatever the mode; loopback inside the sandbox keeps working.
//!
//! The last test runs every other test again with the worker as an unprivileged user (the
//! Kubernetes worker's case: the namespace is made in a user namespace of its own,
//! `net_user.rs`), against the upstream host this process made.
//!
//! Needs root, `ip` (iproute2), `/usr/bin/python3`, `curl` and a working sandbox;
//! otherwise it prints why it skipped.

mod common;

use akbench_coordinator::devcerts::{Ca, Validity};
use akbench_core::egress::{AllowedHost, Contact, NetworkMode, Outcome};
use akbench_worker::process::{base_env, spawn, CancelToken, ProcessSpec};
use akbench_worker::runtime::container::{Image, View};
use akbench_worker::runtime::egress::{Policy, PROXY_ADDR, PROXY_PORT};
use akbench_worker::runtime::{prepare, sandbox_available, Exposure, Limits, RuntimeKind};
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SERVER: &str = r#"
import http.server, ssl, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path.startswith("/fail"):
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"x" * 100000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
plain = http.server.ThreadingHTTPServer(("0.0.0.0", 8080), H)
tls = http.server.ThreadingHTTPServer(("0.0.0.0", 8443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
threading.Thread(target=plain.serve_forever, daemon=True).start()
print("ready", flush=True)
tls.serve_forever()
"#;

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
struct Upstream {
    worker_ns: String,
    up_ns: String,
    addr: IpAddr,
    server: Option<Child>,
    /// The CA and the server's files: `/tmp/akbench-egress-PID`, a path the unprivileged
    /// rerun's child finds from its parent's pid (its environment is cleared).
    dir: PathBuf,
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

    fn create() -> Result<Upstream, String> {
        let mut u = Upstream::named(std::process::id(), true);
        std::fs::create_dir_all(&u.dir).map_err(|e| e.to_string())?;
        let (w, up) = (u.worker_ns.clone(), u.up_ns.clone());
        ip(&["netns", "add", &w])?;
        ip(&["netns", "add", &up])?;
        ip(&[
            "-n", &w, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", &up,
        ])?;
        let net = format!("10.215.{}", std::process::id() % 250);
        for (ns, host) in [(&w, 1), (&up, 2)] {
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
            .server(&["up.test".into(), "other.test".into()], Validity::days(1))
            .map_err(|e| e.to_string())?;
        let d = u.dir.as_path();
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
    fn enter_worker(&self) {
        let f = std::fs::File::open(format!("/var/run/netns/{}", self.worker_ns)).unwrap();
        // SAFETY: setns on a namespace file we opened; affects this thread only.
        assert_eq!(
            unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) },
            0,
            "setns: {}",
            std::io::Error::last_os_error()
        );
    }

    /// `mode` with the upstream's range opened and its two names (and one resolving to the
    /// worker's loopback) known to the worker.
    fn policy(&self, mode: NetworkMode) -> Policy {
        let mut p = Policy::new(mode);
        p.open_ranges = vec![AllowedHost::parse("10.215.0.0/16").unwrap()];
        p.hosts = vec![
            ("up.test".into(), self.addr),
            ("other.test".into(), self.addr),
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
        ];
        p
    }

    fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
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
fn ready(test: &str) -> Option<Upstream> {
    if common::unprivileged::is_child() {
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
fn sandboxed(u: &Upstream, policy: Option<Policy>, script: &str) -> (String, Vec<Contact>) {
    run_in(u, policy, script, None)
}

/// [`sandboxed`], over `image` (the `container` runtime) when given.
fn run_in(
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
        writable: vec![ws.clone(), home.clone()],
        readable: vec![u.dir.clone()],
        endpoints: Vec::new(),
        disk_roots: vec![ws.clone(), home.clone()],
        scratch: dir.path().join("rt"),
        container: image.map(|i| View {
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
fn fetch_all(urls: &[&str]) -> String {
    let mut s = String::new();
    for u in urls {
        s.push_str(&format!(
            "c=$(curl -sS --cacert \"$CA\" -o /dev/null -w '%{{http_code}} %{{http_connect}}' --max-time 60 {u} 2>/dev/null); echo \"{u} $? $c\"\n"
        ));
    }
    s
}

fn line<'a>(out: &'a str, url: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{url} ")))
        .unwrap_or_else(|| panic!("no line for {url} in {out}"))
}

fn contact<'a>(cs: &'a [Contact], host: &str, port: u16, outcome: Outcome) -> &'a Contact {
    cs.iter()
        .find(|c| c.host == host && c.port == port && c.outcome == outcome)
        .unwrap_or_else(|| panic!("no {host}:{port} {outcome:?} in {cs:#?}"))
}

#[test]
fn a_public_phase_reaches_hosts_by_name_and_every_contact_is_recorded() {
    let Some(u) = ready("a_public_phase_reaches_hosts_by_name_and_every_contact_is_recorded")
    else {
        return;
    };
    let urls = [
        "https://up.test:8443/file",
        "https://other.test:8443/file",
        "http://up.test:8080/file",
        "http://up.test:8080/fail",
        "http://sneaky.test:8080/file",
        "http://self.test:8080/file",
    ];
    // Loopback inside the sandbox stays direct (no_proxy) and works.
    let script = format!(
        "echo \"proxy=$https_proxy no=$no_proxy\"\n\
         /usr/bin/python3 -m http.server --bind 127.0.0.1 8000 >/dev/null 2>&1 &\n\
         for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8000/ && break; sleep 0.1; done\n\
         {}\
         {}",
        fetch_all(&urls),
        fetch_all(&["http://127.0.0.1:8000/"]),
    );
    let (out, cs) = sandboxed(&u, Some(u.policy(NetworkMode::Public)), &script);
    assert!(
        out.contains(&format!(
            "proxy=http://{PROXY_ADDR}:{PROXY_PORT} no=localhost,127.0.0.1,::1"
        )),
        "{out}"
    );
    assert_eq!(line(&out, urls[0]), format!("{} 0 200 200", urls[0]));
    assert_eq!(line(&out, urls[1]), format!("{} 0 200 200", urls[1]));
    assert_eq!(line(&out, urls[2]), format!("{} 0 200 000", urls[2]));
    assert_eq!(line(&out, urls[3]), format!("{} 0 503 000", urls[3]));
    // A name that resolves to the worker's own loopback is refused by the proxy.
    assert_eq!(line(&out, urls[4]), format!("{} 0 403 000", urls[4]));
    // So is the worker's own address (a service on 0.0.0.0 there would answer).
    assert_eq!(line(&out, urls[5]), format!("{} 0 403 000", urls[5]));
    assert_eq!(
        line(&out, "http://127.0.0.1:8000/"),
        "http://127.0.0.1:8000/ 0 200 000"
    );
    let tls = contact(&cs, "up.test", 8443, Outcome::Allowed);
    assert_eq!(tls.connections, 1, "{cs:#?}");
    assert!(tls.bytes_down > 100_000 && tls.bytes_up > 0, "{tls:?}");
    assert!(tls.http_statuses.is_empty(), "{tls:?}");
    contact(&cs, "other.test", 8443, Outcome::Allowed);
    let plain = contact(&cs, "up.test", 8080, Outcome::Allowed);
    assert_eq!(plain.connections, 2, "{plain:?}");
    assert_eq!(plain.http_statuses, [200, 503]);
    assert!(plain.bytes_down > 100_000, "{plain:?}");
    let sneaky = contact(&cs, "sneaky.test", 8080, Outcome::Denied);
    assert!(
        sneaky.detail.as_deref().unwrap_or("").contains("loopback"),
        "{sneaky:?}"
    );
    let own = contact(&cs, "self.test", 8080, Outcome::Denied);
    assert!(
        own.detail
            .as_deref()
            .unwrap_or("")
            .contains("the worker's own addresses"),
        "{own:?}"
    );
    // The sandbox's own loopback never goes through the proxy.
    assert!(!cs.iter().any(|c| c.host == "127.0.0.1"), "{cs:#?}");
    // The run's grade would be infrastructure_error without a passing reward: a 5xx.
    let cause = akbench_core::egress::grading_fetch_failure(&cs, false).unwrap();
    assert!(
        cause.contains("up.test:8080") && cause.contains("HTTP 503"),
        "{cause}"
    );
}

#[test]
fn an_allowlist_reaches_only_its_hosts_and_records_the_others_as_denied() {
    let Some(u) = ready("an_allowlist_reaches_only_its_hosts_and_records_the_others_as_denied")
    else {
        return;
    };
    let urls = [
        "https://up.test:8443/file",
        "https://other.test:8443/file",
        "http://other.test:8080/file",
    ];
    let mode = NetworkMode::Allowlist(vec![AllowedHost::parse("up.test").unwrap()]);
    let (out, cs) = sandboxed(&u, Some(u.policy(mode)), &fetch_all(&urls));
    assert_eq!(line(&out, urls[0]), format!("{} 0 200 200", urls[0]));
    // curl: 56 = the proxy answered CONNECT with an error (403).
    assert_eq!(line(&out, urls[1]), format!("{} 56 000 403", urls[1]));
    assert_eq!(line(&out, urls[2]), format!("{} 0 403 000", urls[2]));
    let ok = contact(&cs, "up.test", 8443, Outcome::Allowed);
    assert!(ok.bytes_down > 100_000, "{ok:?}");
    let denied = contact(&cs, "other.test", 8443, Outcome::Denied);
    assert_eq!((denied.bytes_up, denied.bytes_down), (0, 0));
    assert!(
        denied
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("allowed_hosts"),
        "{denied:?}"
    );
    contact(&cs, "other.test", 8080, Outcome::Denied);
    assert!(!cs
        .iter()
        .any(|c| c.host == "other.test" && c.outcome == Outcome::Allowed));
    // Denied hosts are the task's declaration, not an infrastructure fault.
    assert_eq!(
        akbench_core::egress::grading_fetch_failure(&cs, false),
        None
    );
}

#[test]
fn no_network_gets_no_proxy_and_reaches_nothing() {
    let Some(u) = ready("no_network_gets_no_proxy_and_reaches_nothing") else {
        return;
    };
    let script = format!(
        "echo \"proxy=${{https_proxy:-none}}\"\n{}\
         c=$(curl -sS -x http://{PROXY_ADDR}:{PROXY_PORT} --cacert \"$CA\" -o /dev/null -w '%{{http_code}} %{{http_connect}}' https://up.test:8443/file 2>/dev/null); echo \"explicit $? $c\"\n",
        fetch_all(&["https://up.test:8443/file", "http://10.215.0.2:8080/file"])
    );
    for policy in [
        None,
        Some(u.policy(NetworkMode::NoNetwork)),
        Some(u.policy(NetworkMode::Allowlist(Vec::new()))),
    ] {
        let (out, cs) = sandboxed(&u, policy.clone(), &script);
        assert!(out.contains("proxy=none"), "{policy:?}: {out}");
        // 6: could not resolve; 7: could not connect.
        assert_eq!(
            line(&out, "https://up.test:8443/file"),
            "https://up.test:8443/file 6 000 000",
            "{policy:?}"
        );
        assert_eq!(
            line(&out, "http://10.215.0.2:8080/file"),
            "http://10.215.0.2:8080/file 7 000 000",
            "{policy:?}"
        );
        assert_eq!(line(&out, "explicit"), "explicit 7 000 000", "{policy:?}");
        assert!(cs.is_empty(), "{cs:#?}");
    }
}

#[test]
fn the_worker_never_reaches_a_private_range_it_did_not_open() {
    let Some(u) = ready("the_worker_never_reaches_a_private_range_it_did_not_open") else {
        return;
    };
    let mut policy = u.policy(NetworkMode::Public);
    policy.open_ranges.clear();
    let urls = ["https://up.test:8443/file"];
    let (out, cs) = sandboxed(&u, Some(policy), &fetch_all(&urls));
    assert_eq!(line(&out, urls[0]), format!("{} 56 000 403", urls[0]));
    let d = contact(&cs, "up.test", 8443, Outcome::Denied);
    assert!(
        d.detail
            .as_deref()
            .unwrap_or("")
            .contains("private network"),
        "{d:?}"
    );
}

/// Every other test of this file again, with the worker process as an unprivileged user
/// (common::unprivileged), in the worker namespace this process made.
#[test]
fn the_egress_tests_hold_with_an_unprivileged_worker() {
    const THIS: &str = "the_egress_tests_hold_with_an_unprivileged_worker";
    if common::unprivileged::is_child() {
        return;
    }
    let Some(_u) = ready(THIS) else {
        return;
    };
    common::unprivileged::rerun_suite(
        THIS,
        &["a_container_reaches_only_its_allowlist_through_the_proxy"],
    );
}

/// The same proxy under the `container` runtime: Python's `urllib` in the Debian test image
/// (`scripts/build-test-image`, pushed to a loopback registry) reads `https_proxy` and
/// reaches the listed host over HTTPS, not the other.
#[test]
fn a_container_reaches_only_its_allowlist_through_the_proxy() {
    const THIS: &str = "a_container_reaches_only_its_allowlist_through_the_proxy";
    if let Some(why) = common::registry::missing() {
        akbench_core::testkit::skip(THIS, &why);
        return;
    }
    // The registry and the pull on this namespace's loopback, before entering the worker's.
    let tar = common::registry::base_tar();
    let reg = common::registry::Registry::start();
    let digest = reg.push("akbench/base:egress", &[(&tar, "tar")], &[], None, None);
    let dir = tempfile::tempdir().unwrap();
    let mut store = akbench_worker::image::Store::from_env(dir.path().join("images")).unwrap();
    store.insecure = vec![reg.addr.clone()];
    let r = akbench_core::image::ImageRef::parse(&format!("{}/akbench/base@{digest}", reg.addr))
        .unwrap();
    let unpacked = store.ensure(&r).unwrap();
    let image = Image {
        pinned: r.pinned(&digest),
        rootfs: unpacked.rootfs.clone(),
        run: unpacked.run.clone(),
        workdir: "/app".into(),
        user: (0, 0),
    };
    let Some(u) = ready(THIS) else {
        return;
    };
    let script = r#"python3 -c '
import os, ssl, urllib.request
ctx = ssl.create_default_context(cafile=os.environ["CA"])
for u in ["https://up.test:8443/file", "https://other.test:8443/file"]:
    try:
        r = urllib.request.urlopen(u, context=ctx, timeout=60)
        print(u, r.status, len(r.read()))
    except OSError as e:
        print(u, "error", e)
'"#;
    let mode = NetworkMode::Allowlist(vec![AllowedHost::parse("up.test").unwrap()]);
    let (out, cs) = run_in(&u, Some(u.policy(mode)), script, Some(&image));
    assert!(
        out.contains("https://up.test:8443/file 200 100000"),
        "{out}"
    );
    let other = line(&out, "https://other.test:8443/file");
    assert!(other.contains("error") && other.contains("403"), "{out}");
    let ok = contact(&cs, "up.test", 8443, Outcome::Allowed);
    assert!(ok.bytes_down > 100_000, "{ok:?}");
    contact(&cs, "other.test", 8443, Outcome::Denied);
}

/// A tunnel with no byte either way for the idle limit is closed by the proxy (the upstream
/// server would wait for a request forever).
#[test]
fn an_idle_tunnel_is_closed_by_the_proxy() {
    let Some(u) = ready("an_idle_tunnel_is_closed_by_the_proxy") else {
        return;
    };
    let mut policy = u.policy(NetworkMode::Public);
    policy.limits.idle = Duration::from_secs(1);
    let script = format!(
        "/usr/bin/python3 -c '
import socket
s = socket.create_connection((\"{PROXY_ADDR}\", {PROXY_PORT}))
s.sendall(b\"CONNECT up.test:8080 HTTP/1.1\\r\\n\\r\\n\")
head = b\"\"
while b\"\\r\\n\\r\\n\" not in head:
    head += s.recv(1)
print(head.split(b\"\\r\\n\")[0].decode())
print(\"then\", len(s.recv(100)), \"bytes\")
'"
    );
    let (out, cs) = sandboxed(&u, Some(policy), &script);
    assert_eq!(out, "HTTP/1.1 200 Connection established\nthen 0 bytes\n");
    let c = contact(&cs, "up.test", 8080, Outcome::Allowed);
    assert_eq!((c.bytes_up, c.bytes_down), (0, 0), "{c:?}");
}
