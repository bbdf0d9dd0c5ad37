//! The sandbox's network: an empty network namespace (only its own loopback) in which the
//! worker binds one listener per declared endpoint; each connection accepted there is
//! forwarded by the worker, from the host's namespace, to the real endpoint.
//!
//! The namespace is made by a short-lived thread of a root worker (`unshare(CLONE_NEWNET)`,
//! loopback up, listeners bound), or, for a worker that is not root, by a forked child inside
//! a user namespace of the worker's own ([`super::net_user`]), so the sockets live inside it
//! while the forwarding runs in ordinary threads outside; the sandboxed process enters the
//! namespace (and that user namespace first) before it execs bwrap. Host names resolve through a generated `/etc/hosts` to the loopback address the
//! endpoint listens on (`127.0.0.2`, `127.0.0.3`, ...), so TLS still sees the real name.
//! Nothing else is reachable: no route leaves the namespace, and the host's loopback
//! (PostgreSQL, the coordinator) is another namespace's. A phase with a network (the task's
//! `network_mode`) gets one more listener there, the egress proxy's ([`super::egress`]), the
//! only way out to other hosts.

use super::egress;
use akbench_core::egress::Contact;
use akbench_core::endpoint::Endpoint;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A prepared network namespace with its forwarders.
#[derive(Debug)]
pub struct Network {
    /// The user namespace owning [`Self::netns`], for a worker that is not root
    /// ([`super::net_user`]); `None`: the worker's own.
    userns: Option<Arc<OwnedFd>>,
    netns: Arc<OwnedFd>,
    bound: Vec<(Endpoint, Ipv4Addr)>,
    listeners: Vec<RawFd>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    proxy: Option<egress::Proxy>,
    /// The policy [`Self::proxy`] serves (`None`: no proxy).
    policy: Option<egress::Policy>,
}

/// The loopback address inside the sandbox each endpoint listens on (pure): a loopback IPv4
/// literal keeps its address; host names get 127.0.0.2, 127.0.0.3, ...
pub fn inside_addresses(endpoints: &[Endpoint]) -> Result<Vec<Ipv4Addr>, String> {
    let mut next = 2u8;
    endpoints
        .iter()
        .map(|e| match e.host.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) if a.is_loopback() => Ok(a),
            Ok(_) => Err(format!(
                "endpoint `{e}`: only host names and 127.x.x.x addresses can be forwarded; fix: write the endpoint's host name"
            )),
            Err(_) => {
                let a = Ipv4Addr::new(127, 0, 0, next);
                next = next.checked_add(1).ok_or("too many endpoints (at most 250)")?;
                Ok(a)
            }
        })
        .collect()
}

/// The sandbox's `/etc/hosts` (pure).
pub fn hosts_file(bound: &[(Endpoint, Ipv4Addr)]) -> String {
    let mut s = String::from("127.0.0.1 localhost akbench-sandbox\n::1 localhost\n");
    for (e, a) in bound {
        if e.host.parse::<IpAddr>().is_err() {
            s.push_str(&format!("{a} {}\n", e.host));
        }
    }
    s
}

impl Network {
    /// Makes the namespace and starts one forwarder per endpoint, and the egress proxy
    /// when `egress` is given.
    pub fn start(
        endpoints: &[Endpoint],
        egress: Option<egress::Policy>,
    ) -> Result<Network, String> {
        let addrs = inside_addresses(endpoints)?;
        let mut at: Vec<(Ipv4Addr, u16)> = addrs
            .iter()
            .zip(endpoints)
            .map(|(a, e)| (*a, e.port))
            .collect();
        if egress.is_some() {
            at.push((egress::PROXY_ADDR, egress::PROXY_PORT));
        }
        let (userns, netns, mut listeners) = if super::bwrap::is_root() {
            let made = std::thread::spawn(move || make_namespace(&at))
                .join()
                .map_err(|_| "the namespace thread panicked".to_string())?
                .map_err(|e| format!("cannot make a network namespace: {e}"))?;
            let (netns, listeners) = made;
            (None, netns, listeners)
        } else {
            let made = super::net_user::make(&at)
                .map_err(|e| format!("cannot make a network namespace: {e}"))?;
            (Some(Arc::new(made.userns)), made.netns, made.listeners)
        };
        let bound: Vec<(Endpoint, Ipv4Addr)> = endpoints.iter().cloned().zip(addrs).collect();
        let policy = egress.clone();
        let proxy = match egress {
            Some(policy) => {
                let l = listeners
                    .pop()
                    .ok_or("the namespace has no listener for the egress proxy")?;
                Some(egress::Proxy::start(l, policy))
            }
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let mut fds = Vec::new();
        let mut threads = Vec::new();
        for (l, (ep, _)) in listeners.into_iter().zip(bound.iter()) {
            fds.push(l.as_raw_fd());
            let (stop, ep) = (stop.clone(), ep.clone());
            threads.push(std::thread::spawn(move || accept_loop(l, ep, stop)));
        }
        Ok(Network {
            userns,
            netns: Arc::new(netns),
            bound,
            listeners: fds,
            stop,
            threads,
            proxy,
            policy,
        })
    }

    /// The policy the egress proxy serves now (`None`: no proxy).
    pub fn policy(&self) -> Option<&egress::Policy> {
        self.policy.as_ref()
    }

    /// What the egress proxy recorded since the last call (empty without one); it keeps
    /// running.
    pub fn take_contacts(&self) -> Vec<Contact> {
        self.proxy
            .as_ref()
            .map(egress::Proxy::take_contacts)
            .unwrap_or_default()
    }

    /// Serves the namespace's next phase under `egress` (`None`, or a policy reaching
    /// nothing: no proxy): the running proxy, if any, is stopped (its open connections end)
    /// and what it recorded since the last take is returned; a proxy for `egress` is started
    /// on the same address inside the namespace. A shared environment's namespace lives
    /// across phases ([`super::shared`]); a worker that is not root enters it again from a
    /// forked child ([`super::net_user::bind_again`]).
    pub fn set_egress(&mut self, egress: Option<egress::Policy>) -> Result<Vec<Contact>, String> {
        let egress = egress.filter(egress::Policy::needs_proxy);
        let contacts = self
            .proxy
            .take()
            .map(egress::Proxy::stop)
            .unwrap_or_default();
        self.policy = None;
        if let Some(policy) = egress {
            let netns = self.netns.clone();
            let at = (egress::PROXY_ADDR, egress::PROXY_PORT);
            let listener = match &self.userns {
                // A worker that is not root: a forked child enters the namespaces.
                Some(userns) => super::net_user::bind_again(userns, &netns, at),
                None => std::thread::spawn(move || bind_in(&netns, at))
                    .join()
                    .map_err(|_| "the namespace thread panicked".to_string())?,
            }
            .map_err(|e| format!("cannot listen for the egress proxy in the namespace: {e}"))?;
            self.proxy = Some(egress::Proxy::start(listener, policy.clone()));
            self.policy = Some(policy);
        }
        Ok(contacts)
    }

    /// Whether the egress proxy runs (the sandboxed programs get its variables).
    pub fn has_proxy(&self) -> bool {
        self.proxy.is_some()
    }

    /// The namespace, for the child to enter before exec.
    pub fn netns_fd(&self) -> Arc<OwnedFd> {
        self.netns.clone()
    }

    /// The user namespace the child enters before the network namespace (a worker that is
    /// not root), if any.
    pub fn userns_fd(&self) -> Option<Arc<OwnedFd>> {
        self.userns.clone()
    }

    /// Endpoints and the inside addresses they listen on.
    pub fn bound(&self) -> &[(Endpoint, Ipv4Addr)] {
        &self.bound
    }

    /// Stops accepting (open connections end with the sandbox's processes) and the egress
    /// proxy; returns what the proxy recorded (empty without one).
    pub fn stop(self) -> Vec<Contact> {
        let contacts = self.proxy.map(egress::Proxy::stop).unwrap_or_default();
        self.stop.store(true, Ordering::SeqCst);
        for fd in &self.listeners {
            // SAFETY: shutting down a listening socket we own wakes its blocked accept().
            unsafe {
                libc::shutdown(*fd, libc::SHUT_RDWR);
            }
        }
        for t in self.threads {
            let _ = t.join();
        }
        contacts
    }
}

pub(crate) type Made = (OwnedFd, Vec<TcpListener>);

/// Runs on a throwaway thread: after `unshare` the thread belongs to the new namespace.
pub(crate) fn make_namespace(addrs: &[(Ipv4Addr, u16)]) -> io::Result<Made> {
    // SAFETY: unshare affects only the calling thread's network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    loopback_up()?;
    let f = std::fs::File::open("/proc/thread-self/ns/net")?;
    let netns = OwnedFd::from(f);
    let listeners = addrs
        .iter()
        .map(|a| TcpListener::bind(*a))
        .collect::<io::Result<Vec<_>>>()?;
    Ok((netns, listeners))
}

/// Runs on a throwaway thread: enters `netns` (the thread's own namespace changes, not the
/// worker's) and listens there.
fn bind_in(netns: &OwnedFd, at: (Ipv4Addr, u16)) -> io::Result<TcpListener> {
    // SAFETY: setns with a namespace file descriptor we own affects only this thread.
    if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    TcpListener::bind(at)
}

/// Brings the calling thread's network namespace's loopback up. Plain system calls on a
/// stack `ifreq`, nothing allocated: also safe in [`super::net_user`]'s forked child.
pub(super) fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain datagram socket used for interface ioctls, closed by OwnedFd.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: raw is a fresh fd we own.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain data; the name is NUL-terminated; the ioctls read/write it.
    unsafe {
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) != 0 {
            return Err(io::Error::last_os_error());
        }
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn accept_loop(l: TcpListener, ep: Endpoint, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let Ok((inside, _)) = l.accept() else {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            continue;
        };
        let target = (ep.host.clone(), ep.port);
        std::thread::spawn(move || {
            let Ok(outside) = TcpStream::connect(target) else {
                let _ = inside.shutdown(Shutdown::Both);
                return;
            };
            pipe_both(inside, outside);
        });
    }
}

fn pipe_both(a: TcpStream, b: TcpStream) {
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    let t = std::thread::spawn(move || {
        let (mut r, mut w) = (a2, b2);
        let _ = io::copy(&mut r, &mut w);
        let _ = w.shutdown(Shutdown::Write);
    });
    let (mut r, mut w) = (b, a);
    let _ = io::copy(&mut r, &mut w);
    let _ = w.shutdown(Shutdown::Write);
    let _ = t.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> Endpoint {
        Endpoint::parse(s).unwrap()
    }

    #[test]
    fn endpoints_get_loopback_addresses_and_host_names() {
        let eps = [
            ep("api.anthropic.com:443"),
            ep("127.0.0.1:9000"),
            ep("api.openai.com:443"),
        ];
        let a = inside_addresses(&eps).unwrap();
        assert_eq!(
            a,
            [
                Ipv4Addr::new(127, 0, 0, 2),
                Ipv4Addr::new(127, 0, 0, 1),
                Ipv4Addr::new(127, 0, 0, 3)
            ]
        );
        let bound: Vec<_> = eps.iter().cloned().zip(a).collect();
        let h = hosts_file(&bound);
        assert!(h.contains("127.0.0.2 api.anthropic.com\n"), "{h}");
        assert!(h.contains("127.0.0.3 api.openai.com\n"), "{h}");
        assert!(!h.contains("127.0.0.1 127.0.0.1"), "{h}");
        assert!(inside_addresses(&[ep("10.1.2.3:443")])
            .unwrap_err()
            .contains("10.1.2.3:443"));
    }
}
