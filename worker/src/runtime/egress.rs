//! The egress proxy: the only way out of a sandbox whose phase has a network.
//!
//! An HTTP proxy the worker runs on one more listener inside the sandbox's network
//! namespace ([`PROXY_ADDR`]:[`PROXY_PORT`], bound with the endpoint listeners by
//! [`super::net`]); it connects out from the worker's own namespace. It serves `CONNECT
//! host:port` (HTTPS and any TLS, tunnelled, never intercepted) and plain requests with an
//! absolute `http://` URI (one request per connection, `Connection: close`). Each connection
//! is decided by the phase's [`NetworkMode::allows`] on the host the client named, then on
//! every address it resolves to ([`address_refusal`]: never the worker's loopback,
//! link-local or an unopened private range; never one of the worker's own interface
//! addresses), and recorded in a [`ContactLog`] returned by
//! [`Proxy::stop`].
//!
//! Bounded: a deadline for the request head, for DNS and for the connect; an idle timeout per
//! tunnel; at most [`Limits::max_tunnels`] connections at once; a head of at most
//! [`request::MAX_HEAD`] bytes. Plain threads (as the endpoint forwarders), two per open
//! tunnel; whatever the client sends ends in an error answer or a closed socket, never a
//! panic of the worker.

use akbench_core::egress::request::{self, address_refusal, Request};
use akbench_core::egress::{AllowedHost, Connection, Contact, ContactLog, NetworkMode, Outcome};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The proxy's address inside the sandbox (past the endpoints' 127.0.0.2 ... 127.0.0.251).
pub const PROXY_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 254);
/// The proxy's port inside the sandbox (not Squid's 3128, which a task may run itself).
pub const PROXY_PORT: u16 = 13128;

/// The variables the sandboxed programs get while a proxy runs: `http_proxy`,
/// `https_proxy` (both spellings) and `no_proxy` (loopback stays direct, and so do the
/// agent's declared endpoints, `direct`, which their own forwarders serve). No `ALL_PROXY`:
/// only HTTP and CONNECT leave the sandbox, and a SOCKS-minded client reading `ALL_PROXY`
/// would only fail differently.
pub fn env_vars(direct: &[&str]) -> Vec<(&'static str, String)> {
    let url = format!("http://{PROXY_ADDR}:{PROXY_PORT}");
    let mut local = "localhost,127.0.0.1,::1".to_string();
    for h in direct {
        if !local.split(',').any(|x| x == *h) {
            local.push(',');
            local.push_str(h);
        }
    }
    vec![
        ("http_proxy", url.clone()),
        ("https_proxy", url.clone()),
        ("HTTP_PROXY", url.clone()),
        ("HTTPS_PROXY", url),
        ("no_proxy", local.clone()),
        ("NO_PROXY", local),
    ]
}

/// The proxy's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// To read the request head.
    pub head: Duration,
    /// To resolve the host's name.
    pub dns: Duration,
    /// To connect (all addresses together).
    pub connect: Duration,
    /// A tunnel with no byte either way for this long is closed.
    pub idle: Duration,
    /// Connections open at once; more are answered 503.
    pub max_tunnels: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            head: Duration::from_secs(30),
            dns: Duration::from_secs(10),
            connect: Duration::from_secs(15),
            idle: Duration::from_secs(300),
            max_tunnels: 64,
        }
    }
}

/// What one phase may reach and how the worker reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The phase's network (the task's `network_mode` / `allowed_hosts`).
    pub mode: NetworkMode,
    /// Private ranges the worker lets the proxy reach (the operator's setting; a cluster's
    /// package mirror, a test's upstream host). Loopback and link-local never.
    pub open_ranges: Vec<AllowedHost>,
    /// Names the worker resolves itself before DNS (the operator's static hosts).
    pub hosts: Vec<(String, IpAddr)>,
    /// Bounds.
    pub limits: Limits,
}

impl Policy {
    /// `mode` with no private range opened, no static host, the default bounds.
    pub fn new(mode: NetworkMode) -> Self {
        Self {
            mode,
            open_ranges: Vec::new(),
            hosts: Vec::new(),
            limits: Limits::default(),
        }
    }

    /// `mode` with the worker operator's settings from its environment
    /// (`AKBENCH_EGRESS_OPEN_RANGES`, `AKBENCH_EGRESS_HOSTS`:
    /// [`akbench_core::egress::settings`]); the error names the variable, the entry and
    /// the fix.
    pub fn for_phase(mode: NetworkMode) -> Result<Self, String> {
        use akbench_core::egress::{offer, settings};
        let var = |name: &str| std::env::var(name).unwrap_or_default();
        // A worker that gives no network never runs a phase that needs one without it.
        if mode.reaches_anything() && !offer::gives_egress(Some(&var(offer::EGRESS_ENV)))? {
            return Err(format!(
                "the phase needs the network ({mode:?}) and this worker gives none ({}=off); fix: run the task on a worker that gives it, or set its network_mode to `no-network`",
                offer::EGRESS_ENV
            ));
        }
        Ok(Self {
            open_ranges: settings::parse_open_ranges(&var(settings::OPEN_RANGES_ENV))?,
            hosts: settings::parse_hosts(&var(settings::HOSTS_ENV))?,
            ..Self::new(mode)
        })
    }

    /// Whether the phase needs a proxy at all (`no-network` and an empty allowlist do not).
    pub fn needs_proxy(&self) -> bool {
        self.mode.reaches_anything()
    }
}

struct Shared {
    policy: Policy,
    /// The worker's own interface addresses (a service bound to `0.0.0.0` on the worker's
    /// host answers on each of them): never reached.
    own: Vec<IpAddr>,
    stop: AtomicBool,
    log: Mutex<ContactLog>,
    active: Mutex<usize>,
    ended: Condvar,
    open: Mutex<HashMap<u64, Vec<TcpStream>>>,
    next: AtomicU64,
}

/// A running proxy.
pub struct Proxy {
    shared: Arc<Shared>,
    listener: RawFd,
    accept: std::thread::JoinHandle<()>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("mode", &self.shared.policy.mode)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Serves `listener` (bound inside the sandbox's namespace) under `policy`.
    pub fn start(listener: TcpListener, policy: Policy) -> Proxy {
        let shared = Arc::new(Shared {
            policy,
            own: own_addresses(),
            stop: AtomicBool::new(false),
            log: Mutex::new(ContactLog::default()),
            active: Mutex::new(0),
            ended: Condvar::new(),
            open: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        });
        let fd = listener.as_raw_fd();
        let s = shared.clone();
        let accept = std::thread::spawn(move || accept_loop(listener, s));
        Proxy {
            shared,
            listener: fd,
            accept,
        }
    }

    /// Stops accepting, closes every open connection (the sandbox's processes are gone by
    /// now), waits for their threads (at most 10 s) and returns what was contacted.
    pub fn stop(self) -> Vec<Contact> {
        self.shared.stop.store(true, Ordering::SeqCst);
        // SAFETY: shutting down the listening socket we own wakes its blocked accept().
        unsafe {
            libc::shutdown(self.listener, libc::SHUT_RDWR);
        }
        let _ = self.accept.join();
        for socks in lock(&self.shared.open).values() {
            for s in socks {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        let active = lock(&self.shared.active);
        let _ = self
            .shared
            .ended
            .wait_timeout_while(active, Duration::from_secs(10), |n| *n > 0);
        lock(&self.shared.log).contacts()
    }
}

/// An IPv4-mapped IPv6 address as IPv4.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The addresses of every interface of the calling thread's network namespace (the
/// worker's); empty when they cannot be listed.
fn own_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below by freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned; its address, when set,
        // points to a sockaddr of the family it names.
        unsafe {
            let a = (*p).ifa_addr;
            if !a.is_null() {
                match i32::from((*a).sa_family) {
                    libc::AF_INET => {
                        let v4 = &*(a as *const libc::sockaddr_in);
                        out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(a as *const libc::sockaddr_in6);
                        out.push(IpAddr::V6(std::net::Ipv6Addr::from(v6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            p = (*p).ifa_next;
        }
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// A poisoned lock still holds usable data here (counters and sockets).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts a connection as open until dropped (also when its thread panics).
struct Active {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Active {
    fn drop(&mut self) {
        lock(&self.shared.open).remove(&self.id);
        let mut n = lock(&self.shared.active);
        *n = n.saturating_sub(1);
        self.shared.ended.notify_all();
    }
}

fn accept_loop(l: TcpListener, shared: Arc<Shared>) {
    loop {
        let accepted = l.accept();
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok((inside, _)) = accepted else {
            // EMFILE and the like: do not spin.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let max = shared.policy.limits.max_tunnels;
        {
            let mut n = lock(&shared.active);
            if *n >= max {
                drop(n);
                let _ = inside.set_write_timeout(Some(Duration::from_secs(1)));
                let why = format!("more than {max} connections at once through the proxy");
                answer(&inside, 503, &why, false);
                record(&shared, "-", 0, Outcome::ProxyError, Some(why));
                continue;
            }
            *n += 1;
        }
        let id = shared.next.fetch_add(1, Ordering::SeqCst);
        if let Ok(c) = inside.try_clone() {
            lock(&shared.open).insert(id, vec![c]);
        }
        let guard = Active {
            shared: shared.clone(),
            id,
        };
        let spawned = std::thread::Builder::new()
            .name("akbench-egress".into())
            .spawn(move || {
                let g = guard;
                serve(inside, &g);
            });
        if spawned.is_err() {
            // The guard went with the closure and was dropped: the count is right.
            continue;
        }
    }
}

fn record(shared: &Shared, host: &str, port: u16, outcome: Outcome, detail: Option<String>) {
    lock(&shared.log).add(Connection {
        host: host.into(),
        port,
        outcome,
        bytes_up: 0,
        bytes_down: 0,
        http_status: None,
        detail,
    });
}

/// A short plain-text answer from the proxy itself, then the end of the connection.
fn answer(mut s: &TcpStream, status: u16, why: &str, drain: bool) {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let body = format!("akbench egress proxy: {why}\n");
    let _ = write!(
        s,
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.shutdown(Shutdown::Write);
    // What the client still sends is read and dropped (a bounded while): closing a socket
    // with unread bytes resets it, and the client would lose the answer. Not on the accept
    // loop's own thread (`drain` false), which must not wait.
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut sink = [0u8; 4096];
    let mut left: usize = if drain { 64 * 1024 } else { 0 };
    while left > 0 {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
    let _ = s.shutdown(Shutdown::Both);
}

/// A request head and the bytes read past it.
type HeadRead = (Vec<u8>, Vec<u8>);

/// Reads the head: `(head, bytes read past it)`, or the answer to give (`None`: the
/// client left or went quiet; nothing to answer or record).
fn read_head(
    inside: &mut TcpStream,
    deadline: Duration,
) -> Result<HeadRead, Option<(u16, String)>> {
    let until = Instant::now() + deadline;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || inside.set_read_timeout(Some(left)).is_err() {
            return Err(None);
        }
        match inside.read(&mut chunk) {
            Ok(0) => return Err(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(None),
        }
        if let Some(end) = request::head_end(&buf) {
            if end > request::MAX_HEAD {
                break;
            }
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        if buf.len() > request::MAX_HEAD {
            break;
        }
    }
    Err(Some((
        431,
        format!("the request head is over {} bytes", request::MAX_HEAD),
    )))
}

fn serve(mut inside: TcpStream, active: &Active) {
    let shared = &*active.shared;
    let limits = shared.policy.limits;
    let (head, rest) = match read_head(&mut inside, limits.head) {
        Ok(h) => h,
        Err(None) => return,
        Err(Some((status, why))) => {
            answer(&inside, status, &why, true);
            record(shared, "-", 0, Outcome::ProxyError, Some(why));
            return;
        }
    };
    let (host, port, upstream_head) = match request::parse_head(&head) {
        Ok(Request::Connect { host, port }) => (host, port, None),
        Ok(Request::Forward { host, port, head }) => (host, port, Some(head)),
        Err(e) => {
            answer(&inside, e.status, &e.reason, true);
            record(shared, "-", 0, Outcome::ProxyError, Some(e.reason));
            return;
        }
    };
    let fail = |status: u16, outcome: Outcome, why: String| {
        answer(&inside, status, &why, true);
        record(shared, &host, port, outcome, Some(why));
    };
    if !shared.policy.mode.allows(&host) {
        return fail(
            403,
            Outcome::Denied,
            format!("{host} is not in this phase's network (the task's allowed_hosts)"),
        );
    }
    let addrs = match resolve(&shared.policy, &host, port, limits.dns) {
        Ok(a) => a,
        Err(why) => return fail(502, Outcome::DnsFailed, why),
    };
    let mut refused = None;
    let reachable: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| {
            let why = address_refusal(a.ip(), &shared.policy.open_ranges).or_else(|| {
                shared
                    .own
                    .contains(&unmapped(a.ip()))
                    .then_some("one of the worker's own addresses")
            });
            match why {
                None => true,
                Some(why) => {
                    refused.get_or_insert(format!("{host} resolves to {}: {why}", a.ip()));
                    false
                }
            }
        })
        .collect();
    if reachable.is_empty() {
        return fail(
            403,
            Outcome::Denied,
            refused.unwrap_or_else(|| format!("{host} has no address")),
        );
    }
    let outside = match connect(&reachable, limits.connect) {
        Ok(s) => s,
        Err((Outcome::Timeout, why)) => return fail(504, Outcome::Timeout, why),
        Err((o, why)) => return fail(502, o, why),
    };
    if let Ok(c) = outside.try_clone() {
        if let Some(v) = lock(&shared.open).get_mut(&active.id) {
            v.push(c);
        }
    }
    let mut up = 0u64;
    let first = match &upstream_head {
        None => {
            if (&inside)
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_err()
            {
                return;
            }
            rest
        }
        Some(h) => [h.as_slice(), rest.as_slice()].concat(),
    };
    if !first.is_empty() && (&outside).write_all(&first).is_ok() {
        up += first.len() as u64;
    }
    let (more_up, down, status) = pipe(inside, outside, limits.idle, upstream_head.is_some());
    lock(&shared.log).add(Connection {
        host: host.clone(),
        port,
        outcome: Outcome::Allowed,
        bytes_up: up + more_up,
        bytes_down: down,
        http_status: status,
        detail: None,
    });
}

/// The host's addresses: an IP literal as is, a static host, else DNS within `deadline`.
fn resolve(
    policy: &Policy,
    host: &str,
    port: u16,
    deadline: Duration,
) -> Result<Vec<SocketAddr>, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let fixed: Vec<SocketAddr> = policy
        .hosts
        .iter()
        .filter(|(h, _)| h.eq_ignore_ascii_case(host))
        .map(|(_, ip)| SocketAddr::new(*ip, port))
        .collect();
    if !fixed.is_empty() {
        return Ok(fixed);
    }
    let (tx, rx) = mpsc::channel();
    let name = host.to_string();
    let spawned = std::thread::Builder::new()
        .name("akbench-egress-dns".into())
        .spawn(move || {
            let _ = tx.send(
                (name.as_str(), port)
                    .to_socket_addrs()
                    .map(|a| a.collect::<Vec<_>>()),
            );
        });
    if spawned.is_err() {
        return Err(format!("cannot resolve {host}: no thread for the resolver"));
    }
    match rx.recv_timeout(deadline) {
        Ok(Ok(a)) if !a.is_empty() => Ok(a),
        Ok(Ok(_)) => Err(format!("{host} has no address")),
        Ok(Err(e)) => Err(format!("cannot resolve {host}: {e}")),
        Err(_) => Err(format!(
            "cannot resolve {host}: no answer within {} s",
            deadline.as_secs()
        )),
    }
}

/// Connects to the first address that answers within `deadline` (all together).
fn connect(addrs: &[SocketAddr], deadline: Duration) -> Result<TcpStream, (Outcome, String)> {
    let until = Instant::now() + deadline;
    let mut last = None;
    let mut all_timed_out = true;
    for a in addrs {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(a, left) {
            Ok(s) => return Ok(s),
            Err(e) => {
                all_timed_out &= e.kind() == io::ErrorKind::TimedOut;
                last = Some(format!("connect to {a}: {e}"));
            }
        }
    }
    let why = last.unwrap_or_else(|| format!("no connection within {} s", deadline.as_secs()));
    if all_timed_out {
        Err((
            Outcome::Timeout,
            format!("{why} (deadline {} s)", deadline.as_secs()),
        ))
    } else {
        Err((Outcome::ConnectFailed, why))
    }
}

/// Milliseconds since `base`, for the idle clock.
fn now_ms(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Copies both ways until both ends closed, an error, or `idle` without a byte: `(bytes
/// up, bytes down, the response's status when `status`)`.
fn pipe(
    inside: TcpStream,
    outside: TcpStream,
    idle: Duration,
    status: bool,
) -> (u64, u64, Option<u16>) {
    let base = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let (Ok(in2), Ok(out2)) = (inside.try_clone(), outside.try_clone()) else {
        return (0, 0, None);
    };
    let l = last.clone();
    let up = std::thread::Builder::new()
        .name("akbench-egress-up".into())
        .spawn(move || copy(in2, out2, idle, base, &l, false).0);
    let (down, code) = copy(outside, inside, idle, base, &last, status);
    let up = match up {
        Ok(t) => t.join().unwrap_or(0),
        Err(_) => 0,
    };
    (up, down, code)
}

/// One direction of [`pipe`].
fn copy(
    mut from: TcpStream,
    mut to: TcpStream,
    idle: Duration,
    base: Instant,
    last: &AtomicU64,
    status: bool,
) -> (u64, Option<u16>) {
    let _ = from.set_read_timeout(Some(idle));
    let _ = to.set_write_timeout(Some(idle));
    let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    let mut buf = vec![0u8; 32 * 1024];
    let mut total = 0u64;
    let mut prefix: Vec<u8> = Vec::new();
    let mut code = None;
    let end_both = |a: &TcpStream, b: &TcpStream| {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
    };
    loop {
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                break;
            }
            Ok(n) => {
                if status && code.is_none() && prefix.len() < 16 {
                    prefix.extend_from_slice(&buf[..n.min(16)]);
                    code = request::response_status(&prefix);
                }
                if to.write_all(&buf[..n]).is_err() {
                    end_both(&from, &to);
                    break;
                }
                total += n as u64;
                last.store(now_ms(base), Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if now_ms(base).saturating_sub(last.load(Ordering::Relaxed)) >= idle_ms {
                    end_both(&from, &to);
                    break;
                }
            }
            Err(_) => {
                end_both(&from, &to);
                break;
            }
        }
    }
    (total, code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A proxy on this namespace's loopback (no sandbox: what a client sends is the test).
    fn proxy(limits: Limits) -> (Proxy, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let mut p = Policy::new(NetworkMode::Allowlist(vec![
            AllowedHost::parse("allowed.invalid").unwrap(),
            AllowedHost::parse("127.0.0.1").unwrap(),
        ]));
        p.limits = limits;
        (Proxy::start(l, p), at)
    }

    /// Sends `bytes`, reads the answer to its end.
    fn ask(at: SocketAddr, bytes: &[u8]) -> String {
        let mut s = TcpStream::connect(at).unwrap();
        let _ = s.write_all(bytes);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn find(cs: &[Contact], host: &str, outcome: Outcome) -> Contact {
        cs.iter()
            .find(|c| c.host == host && c.outcome == outcome)
            .cloned()
            .unwrap_or_else(|| panic!("no {host} {outcome:?} in {cs:#?}"))
    }

    #[test]
    fn whatever_a_client_sends_ends_in_an_answer_and_a_record() {
        let limits = Limits {
            dns: Duration::from_secs(3),
            ..Limits::default()
        };
        let (p, at) = proxy(limits);
        let cases: &[(&[u8], &str)] = &[
            (b"\x00\x01\x02\r\n\r\n", "400 Bad Request"),
            (b"GET /relative HTTP/1.1\r\n\r\n", "501 Not Implemented"),
            (b"CONNECT nope HTTP/1.1\r\n\r\n", "400 Bad Request"),
            (&[b'a'; 20 * 1024], "431 Request Header Fields Too Large"),
            (
                b"CONNECT elsewhere.invalid:443 HTTP/1.1\r\n\r\n",
                "403 Forbidden",
            ),
            (
                b"GET http://elsewhere.invalid/ HTTP/1.1\r\n\r\n",
                "403 Forbidden",
            ),
            // Allowed by the task, but the worker's own loopback: never.
            (b"CONNECT 127.0.0.1:5432 HTTP/1.1\r\n\r\n", "403 Forbidden"),
            // Allowed, but the name does not resolve (.invalid never does).
            (
                b"CONNECT allowed.invalid:443 HTTP/1.1\r\n\r\n",
                "502 Bad Gateway",
            ),
        ];
        for (bytes, want) in cases {
            let got = ask(at, bytes);
            assert!(
                got.starts_with(&format!("HTTP/1.1 {want}\r\n"))
                    && got.contains("akbench egress proxy: "),
                "{:?}: {got}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(40)])
            );
        }
        // A client that leaves without a word is not a contact.
        drop(TcpStream::connect(at).unwrap());
        let cs = p.stop();
        assert_eq!(
            find(&cs, "-", Outcome::ProxyError).connections,
            4,
            "{cs:#?}"
        );
        assert_eq!(
            find(&cs, "elsewhere.invalid", Outcome::Denied).connections,
            1
        );
        let lo = find(&cs, "127.0.0.1", Outcome::Denied);
        assert!(lo.detail.unwrap().contains("loopback"));
        find(&cs, "allowed.invalid", Outcome::DnsFailed);
        assert_eq!(cs.len(), 5, "{cs:#?}");
    }

    #[test]
    fn connections_past_the_cap_are_refused_and_stop_closes_the_rest() {
        let (p, at) = proxy(Limits {
            max_tunnels: 2,
            ..Limits::default()
        });
        // Two clients that never finish their head hold both places.
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect(at).unwrap();
            s.write_all(b"CONNECT allowed.invalid:443 HTTP/1.1\r\n")
                .unwrap();
            held.push(s);
        }
        let third = ask(at, b"CONNECT allowed.invalid:443 HTTP/1.1\r\n\r\n");
        assert!(third.starts_with("HTTP/1.1 503 "), "{third}");
        assert!(third.contains("more than 2 connections"), "{third}");
        let cs = p.stop();
        // The held ones were closed by stop: they read the end, no answer.
        for mut s in held {
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            assert_eq!(out, "");
        }
        assert_eq!(
            find(&cs, "-", Outcome::ProxyError).connections,
            1,
            "{cs:#?}"
        );
        assert_eq!(cs.len(), 1, "{cs:#?}");
    }

    #[test]
    fn the_proxy_variables_name_the_inside_address() {
        let vars = env_vars(&[]);
        let get = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        for k in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"] {
            assert_eq!(get(k), Some("http://127.0.0.254:13128"), "{k}");
        }
        assert_eq!(get("no_proxy"), Some("localhost,127.0.0.1,::1"));
        assert_eq!(get("ALL_PROXY"), None);
        let with = env_vars(&["api.anthropic.com", "127.0.0.1"]);
        assert!(with.contains(&(
            "NO_PROXY",
            "localhost,127.0.0.1,::1,api.anthropic.com".into()
        )));
        assert!(!Policy::new(NetworkMode::NoNetwork).needs_proxy());
        assert!(!Policy::new(NetworkMode::Allowlist(Vec::new())).needs_proxy());
        assert!(Policy::new(NetworkMode::Public).needs_proxy());
    }
}
