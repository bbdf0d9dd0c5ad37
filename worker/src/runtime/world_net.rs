//! A trial's private network for an interactive world: a network namespace of its own (the
//! hub) holding one bridge, and for each member (the task's environment, each sidecar) a
//! veth pair whose inside end is the member's `eth0` at its address on
//! [`akbench_core::task::world::SUBNET`]. Members reach each other by name (their
//! `/etc/hosts`), and nothing else: the hub has no other link, no member has a default
//! route, and every namespace is owned by the worker (root), so nothing inside can change
//! its links or routes. The namespaces, and the links with them, are gone once the last
//! process in them and the worker's descriptors are.
//!
//! Links are made with iproute2's `ip` (`ip -batch`), entered into a namespace with
//! `nsenter --net=/proc/<worker>/fd/<n>`; only a root worker makes them (the `container`
//! runtime needs one anyway).

use akbench_core::task::world::SUBNET;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The hub of one trial's network.
#[derive(Debug)]
pub struct Hub {
    netns: OwnedFd,
    links: AtomicU32,
}

/// The bridge's name inside the hub.
const BRIDGE: &str = "akb0";

impl Hub {
    /// Makes the hub's namespace and its bridge.
    pub fn new() -> Result<Hub, String> {
        if !super::bwrap::is_root() {
            return Err("a task's sidecar services need a root worker (it makes the trial's private network); fix: run the worker as root".into());
        }
        let (netns, _) = std::thread::spawn(|| super::net::make_namespace(&[]))
            .join()
            .map_err(|_| "the namespace thread panicked".to_string())?
            .map_err(|e| format!("cannot make the trial's network namespace: {e}"))?;
        let hub = Hub {
            netns,
            links: AtomicU32::new(0),
        };
        ip_batch(
            &hub.netns,
            &format!("link add {BRIDGE} type bridge\nlink set {BRIDGE} up\n"),
        )?;
        Ok(hub)
    }

    /// Links the network namespace `member` to the bridge: its new `eth0` gets `addr`.
    pub fn attach(&self, member: &OwnedFd, addr: Ipv4Addr) -> Result<(), String> {
        let n = self.links.fetch_add(1, Ordering::SeqCst);
        let outside = format!("akbv{n}");
        ip_batch(
            &self.netns,
            &format!(
                "link add {outside} type veth peer name eth0 netns {}\nlink set {outside} master {BRIDGE} up\n",
                fd_path(member)
            ),
        )?;
        ip_batch(
            member,
            &format!("addr add {addr}/{} dev eth0\nlink set eth0 up\n", SUBNET.1),
        )
    }
}

/// The path naming the worker's descriptor `fd` (a namespace) to another process.
fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/{}/fd/{}", std::process::id(), fd.as_raw_fd())
}

/// Runs `ip -batch -` with `commands` inside the network namespace `netns`.
fn ip_batch(netns: &OwnedFd, commands: &str) -> Result<(), String> {
    let mut child = Command::new("nsenter")
        .arg(format!("--net={}", fd_path(netns)))
        .args(["ip", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("cannot run `nsenter ... ip` to make the trial's network: {e}; fix: install util-linux and iproute2")
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(commands.as_bytes())
            .map_err(|e| format!("cannot hand `ip` its commands: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`ip` did not finish: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "making the trial's network failed (`ip -batch` of `{}`): {}",
            commands.trim().replace('\n', "; "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two members linked to one hub reach each other at their addresses, and a third
    /// namespace, not linked, reaches neither (a root worker; skipped otherwise).
    #[test]
    fn members_of_one_hub_reach_each_other_and_nothing_else_does() {
        if !super::super::bwrap::is_root() {
            akbench_core::testkit::skip(
                "members_of_one_hub_reach_each_other_and_nothing_else_does",
                "needs root",
            );
            return;
        }
        let make = || {
            std::thread::spawn(|| super::super::net::make_namespace(&[]))
                .join()
                .unwrap()
                .unwrap()
                .0
        };
        let hub = Hub::new().unwrap();
        let (a, b, outsider) = (make(), make(), make());
        hub.attach(&a, Ipv4Addr::new(10, 89, 0, 2)).unwrap();
        hub.attach(&b, Ipv4Addr::new(10, 89, 0, 3)).unwrap();
        let listener = in_ns(&b, || std::net::TcpListener::bind(("0.0.0.0", 7070)));
        let accept = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(b"hi").unwrap();
        });
        let read = in_ns(&a, || {
            use std::io::Read;
            let mut s = std::net::TcpStream::connect_timeout(
                &(Ipv4Addr::new(10, 89, 0, 3), 7070).into(),
                std::time::Duration::from_secs(3),
            )?;
            let mut got = String::new();
            s.read_to_string(&mut got)?;
            Ok(got)
        });
        accept.join().unwrap();
        assert_eq!(read, "hi");
        let refused = std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on this scoped thread only.
                assert_eq!(
                    unsafe { libc::setns(outsider.as_raw_fd(), libc::CLONE_NEWNET) },
                    0
                );
                std::net::TcpStream::connect_timeout(
                    &(Ipv4Addr::new(10, 89, 0, 3), 7070).into(),
                    std::time::Duration::from_millis(500),
                )
            })
            .join()
            .unwrap()
        });
        assert!(refused.is_err(), "an unlinked namespace reached a member");
    }

    fn in_ns<T: Send>(ns: &OwnedFd, f: impl FnOnce() -> std::io::Result<T> + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on this scoped thread only.
                assert_eq!(
                    unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) },
                    0
                );
                f().unwrap()
            })
            .join()
            .unwrap()
        })
    }
}
