//! The sandbox's network namespace for a worker that is not root.
//!
//! A root worker unshares a network namespace on a throwaway thread ([`super::net`]). A
//! worker that is not root has no `CAP_SYS_ADMIN` there; it may make a network namespace only
//! inside a user namespace of its own, and a multi-threaded process cannot enter a new user
//! namespace. So a forked child (single-threaded, raw system calls only, on buffers prepared
//! before the fork) does it: `unshare(CLONE_NEWUSER | CLONE_NEWNET)`, maps the worker's own
//! uid and gid onto themselves (`setgroups` denied first, as the kernel requires of an
//! unprivileged writer), brings its loopback up, binds one listener per endpoint (and one
//! for the egress proxy, [`super::egress`], when the phase has a network), and sends
//! the user namespace, the network namespace and the listeners back over a socket pair
//! (`SCM_RIGHTS`), then exits. The worker keeps the descriptors (they keep both namespaces
//! alive), forwards from the listeners as a root worker does, and the sandboxed child enters
//! the user namespace and then the network namespace before it execs bwrap (as the owner of
//! that user namespace it holds every capability in it, which `setns` needs).
//!
//! Kernel features needed: unprivileged user namespaces (the sandbox needs them anyway) and
//! one more level of nesting (`user.max_user_namespaces`), nothing else.

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The steps of the child, for the error message (the index it reports).
const STEPS: &[&str] = &[
    "done",
    "unshare(CLONE_NEWUSER | CLONE_NEWNET)",
    "write /proc/self/setgroups",
    "write /proc/self/gid_map",
    "write /proc/self/uid_map",
    "bring the loopback up",
    "bind a listener",
    "open /proc/self/ns/user or /proc/self/ns/net",
    "send the descriptors",
];

/// What the child made: the user and network namespaces and one listener per address.
pub(super) struct Made {
    pub userns: OwnedFd,
    pub netns: OwnedFd,
    pub listeners: Vec<TcpListener>,
}

/// A C string of `s` (no NUL inside: only fixed paths and numbers are passed).
fn c(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s).expect("no NUL")
}

/// Makes the namespaces in a forked child and binds `addrs` (with their ports) there.
pub(super) fn make(addrs: &[(Ipv4Addr, u16)]) -> io::Result<Made> {
    // Everything the child touches is prepared here: it must not allocate.
    // SAFETY: geteuid/getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let uid_map = format!("{uid} {uid} 1\n").into_bytes();
    let gid_map = format!("{gid} {gid} 1\n").into_bytes();
    let setgroups = c("/proc/self/setgroups");
    let uid_map_path = c("/proc/self/uid_map");
    let gid_map_path = c("/proc/self/gid_map");
    let ns_user = c("/proc/self/ns/user");
    let ns_net = c("/proc/self/ns/net");
    let sockaddrs: Vec<libc::sockaddr_in> = addrs
        .iter()
        .map(|(a, port)| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*a).to_be(),
            },
            sin_zero: [0; 8],
        })
        .collect();
    let nfds = 2 + addrs.len();
    if nfds > 253 {
        return Err(io::Error::other("too many endpoints"));
    }
    let fd_bytes = u32::try_from(nfds * std::mem::size_of::<RawFd>()).expect("small");
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    let mut cmsg_buf = vec![0u64; space.div_ceil(8)];
    let mut fds: Vec<RawFd> = vec![-1; nfds];
    let (parent_end, child_end) = socket_pair()?;
    // SAFETY: fork in a multi-threaded process: the child below calls only async-signal-safe
    // system calls on the buffers prepared above, allocates nothing, and ends in _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; every pointer refers to memory prepared before the fork.
        unsafe {
            let (step, errno) = child(
                &setgroups,
                &gid_map_path,
                &gid_map,
                &uid_map_path,
                &uid_map,
                &sockaddrs,
                &ns_user,
                &ns_net,
                &mut fds,
            );
            report(
                std::os::fd::AsRawFd::as_raw_fd(&child_end),
                step,
                errno,
                if step == 0 { &fds[..] } else { &[] },
                cmsg_buf.as_mut_ptr().cast(),
                space,
            );
            libc::_exit(0);
        }
    }
    drop(child_end);
    let received = receive(&parent_end, nfds, space);
    let mut status = 0;
    // SAFETY: reaps the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let (step, errno, got) = received?;
    if step != 0 {
        let what = STEPS
            .get(step as usize)
            .copied()
            .unwrap_or("an unknown step");
        return Err(io::Error::other(format!(
            "as uid {uid} (not root), in a user namespace of its own: failed to {what}: {}",
            io::Error::from_raw_os_error(errno)
        )));
    }
    let mut got = got.into_iter();
    let (Some(userns), Some(netns)) = (got.next(), got.next()) else {
        return Err(io::Error::other("the namespace child sent no descriptors"));
    };
    let listeners = got.map(TcpListener::from).collect::<Vec<_>>();
    if listeners.len() != addrs.len() {
        return Err(io::Error::other(
            "the namespace child sent too few listeners",
        ));
    }
    Ok(Made {
        userns,
        netns,
        listeners,
    })
}

/// A listener at `addr` inside the network namespace `netns` made by [`make`] (owned by
/// `userns`), bound by a forked child that enters both (a worker that is not root cannot
/// enter them on a thread of its own: a multi-threaded process cannot join a user
/// namespace). For a shared environment's later phase ([`super::net::Network::set_egress`]).
pub(super) fn bind_again(
    userns: &OwnedFd,
    netns: &OwnedFd,
    addr: (Ipv4Addr, u16),
) -> io::Result<TcpListener> {
    use std::os::fd::AsRawFd;
    let sockaddr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.1.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr.0).to_be(),
        },
        sin_zero: [0; 8],
    };
    let (user, net) = (userns.as_raw_fd(), netns.as_raw_fd());
    let fd_bytes = u32::try_from(std::mem::size_of::<RawFd>()).expect("small");
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    let mut cmsg_buf = vec![0u64; space.div_ceil(8)];
    let (parent_end, child_end) = socket_pair()?;
    // SAFETY: fork in a multi-threaded process: the child calls only async-signal-safe
    // system calls on data prepared above, allocates nothing, and ends in _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above.
        unsafe {
            let errno = || *libc::__errno_location();
            let mut fds = [-1 as RawFd; 1];
            let (step, e) = if libc::setns(user, libc::CLONE_NEWUSER) != 0
                || libc::setns(net, libc::CLONE_NEWNET) != 0
            {
                (1, errno())
            } else {
                let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
                let one: libc::c_int = 1;
                if l >= 0 {
                    libc::setsockopt(
                        l,
                        libc::SOL_SOCKET,
                        libc::SO_REUSEADDR,
                        (&one as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    );
                }
                if l < 0
                    || libc::bind(
                        l,
                        (&sockaddr as *const libc::sockaddr_in).cast(),
                        std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                    ) != 0
                    || libc::listen(l, 128) != 0
                {
                    (6, errno())
                } else {
                    fds[0] = l;
                    (0, 0)
                }
            };
            report(
                child_end.as_raw_fd(),
                step,
                e,
                if step == 0 { &fds[..] } else { &[] },
                cmsg_buf.as_mut_ptr().cast(),
                space,
            );
            libc::_exit(0);
        }
    }
    drop(child_end);
    let received = receive(&parent_end, 1, space);
    let mut status = 0;
    // SAFETY: reaps the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let (step, errno, got) = received?;
    if step != 0 {
        let what = if step == 1 {
            "enter the namespaces"
        } else {
            "bind a listener"
        };
        return Err(io::Error::other(format!(
            "in the environment's network namespace: failed to {what}: {}",
            io::Error::from_raw_os_error(errno)
        )));
    }
    got.into_iter()
        .next()
        .map(TcpListener::from)
        .ok_or_else(|| io::Error::other("the namespace child sent no listener"))
}

/// The socket pair a forked child reports on (`(parent's end, child's end)`).
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut sv = [0 as RawFd; 2];
    // SAFETY: socketpair writes two descriptors into `sv`.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) })
}

/// Writes `data` to the file `path` (the child's own /proc files).
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> bool {
    // SAFETY: the caller upholds the function's contract (the forked child).
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        n == data.len() as isize
    }
}

/// The child's work; `(0, 0)` when every step succeeded (`fds` filled), else the failed
/// step's index in [`STEPS`] and errno.
#[allow(clippy::too_many_arguments)]
unsafe fn child(
    setgroups: &std::ffi::CStr,
    gid_map_path: &std::ffi::CStr,
    gid_map: &[u8],
    uid_map_path: &std::ffi::CStr,
    uid_map: &[u8],
    sockaddrs: &[libc::sockaddr_in],
    ns_user: &std::ffi::CStr,
    ns_net: &std::ffi::CStr,
    fds: &mut [RawFd],
) -> (u32, i32) {
    // SAFETY: the caller upholds the function's contract (the forked child).
    unsafe {
        let errno = || *libc::__errno_location();
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
            return (1, errno());
        }
        if !write_file(setgroups, b"deny") {
            return (2, errno());
        }
        if !write_file(gid_map_path, gid_map) {
            return (3, errno());
        }
        if !write_file(uid_map_path, uid_map) {
            return (4, errno());
        }
        // The root worker's own step: plain system calls, nothing allocated.
        if let Err(e) = super::net::loopback_up() {
            return (5, e.raw_os_error().unwrap_or(0));
        }
        for (i, a) in sockaddrs.iter().enumerate() {
            let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if l < 0 {
                return (6, errno());
            }
            let one: libc::c_int = 1;
            libc::setsockopt(
                l,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            if libc::bind(
                l,
                (a as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ) != 0
                || libc::listen(l, 128) != 0
            {
                return (6, errno());
            }
            fds[2 + i] = l;
        }
        fds[0] = libc::open(ns_user.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        fds[1] = libc::open(ns_net.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fds[0] < 0 || fds[1] < 0 {
            return (7, errno());
        }
        (0, 0)
    }
}

/// Sends `[step, errno]` and, on success, `fds` as one message.
unsafe fn report(sock: RawFd, step: u32, errno: i32, fds: &[RawFd], cmsg: *mut u8, space: usize) {
    // SAFETY: the caller upholds the function's contract (the forked child).
    unsafe {
        let mut data = [0u8; 8];
        data[..4].copy_from_slice(&step.to_ne_bytes());
        data[4..].copy_from_slice(&errno.to_ne_bytes());
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let bytes = std::mem::size_of_val(fds) as u32;
            msg.msg_control = cmsg.cast();
            msg.msg_controllen = libc::CMSG_SPACE(bytes) as usize;
            let hdr = libc::CMSG_FIRSTHDR(&msg);
            (*hdr).cmsg_level = libc::SOL_SOCKET;
            (*hdr).cmsg_type = libc::SCM_RIGHTS;
            (*hdr).cmsg_len = libc::CMSG_LEN(bytes) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(hdr),
                bytes as usize,
            );
            let _ = space;
        }
        if libc::sendmsg(sock, &msg, 0) < 0 {
            // The parent sees the socket close with no message: reported as step 8.
            libc::_exit(1);
        }
    }
}

/// Receives the child's message: `(step, errno, descriptors)`.
fn receive(sock: &OwnedFd, nfds: usize, space: usize) -> io::Result<(u32, i32, Vec<OwnedFd>)> {
    use std::os::fd::AsRawFd;
    let mut data = [0u8; 8];
    let mut cmsg = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; recvmsg fills `data` and `cmsg` within their lengths.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let n = loop {
            let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break n;
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fds = Vec::new();
        let mut hdr = libc::CMSG_FIRSTHDR(&msg);
        while !hdr.is_null() {
            if (*hdr).cmsg_level == libc::SOL_SOCKET && (*hdr).cmsg_type == libc::SCM_RIGHTS {
                let len = (*hdr).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let count = len / std::mem::size_of::<RawFd>();
                let p = libc::CMSG_DATA(hdr).cast::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(p.add(i))));
                }
            }
            hdr = libc::CMSG_NXTHDR(&msg, hdr);
        }
        if n == 0 {
            return Ok((8, 0, fds));
        }
        (n, fds)
    };
    let (n, fds) = n;
    if n < 8 {
        return Ok((8, 0, fds));
    }
    let step = u32::from_ne_bytes(data[..4].try_into().expect("4 bytes"));
    let errno = i32::from_ne_bytes(data[4..].try_into().expect("4 bytes"));
    if step == 0 && fds.len() != nfds {
        return Err(io::Error::other(format!(
            "the namespace child sent {} descriptors, {nfds} expected",
            fds.len()
        )));
    }
    Ok((step, errno, fds))
}
