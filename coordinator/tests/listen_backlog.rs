//! The coordinator's listeners take a fleet of workers connecting at once (issue 30: 1,000
//! sessions opening together lost ~10% to "connection reset" with the standard library's
//! backlog of 128). Linux only: the backlog is read back from the kernel.
#![cfg(target_os = "linux")]

use std::os::fd::AsRawFd;

use akbench_coordinator::server::{listen, LISTEN_BACKLOG};
use tokio::task::JoinSet;

// A fleet of 1,000 workers fits.
const _: () = assert!(LISTEN_BACKLOG > 1_000);

/// `net.core.somaxconn`, the kernel's cap on any listen backlog.
fn somaxconn() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .expect("reads net.core.somaxconn")
        .trim()
        .parse()
        .expect("a number")
}

/// The kernel's view of a listening socket: (connections waiting in its accept queue, the
/// queue's limit). For a listener `TCP_INFO` carries them in `tcpi_unacked` / `tcpi_sacked`.
fn accept_queue(fd: i32) -> (u32, u32) {
    // SAFETY: tcp_info is plain data; getsockopt writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `fd` is a live socket, `info` and `len` are valid for writes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    (info.tcpi_unacked, info.tcpi_sacked)
}

/// Raises this process's soft file limit towards its hard limit; returns the soft limit.
fn raise_nofile(want: u64) -> u64 {
    // SAFETY: rlimit is plain data, written by getrlimit and read by setrlimit.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        let soft = want.min(r.rlim_max as u64);
        if soft > r.rlim_cur as u64 {
            r.rlim_cur = soft as libc::rlim_t;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur as u64
    }
}

#[tokio::test]
async fn the_listener_asks_for_the_coordinators_backlog() {
    let listener = listen("127.0.0.1:0".parse().unwrap()).expect("listens");
    let (_, limit) = accept_queue(listener.as_raw_fd());
    assert_eq!(limit, LISTEN_BACKLOG.min(somaxconn()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_connections_at_once_wait_in_the_accept_queue() {
    let listener = listen("127.0.0.1:0".parse().unwrap()).expect("listens");
    let addr = listener.local_addr().unwrap();
    let (_, limit) = accept_queue(listener.as_raw_fd());
    // Each connection is two descriptors here (both ends).
    let nofile = raise_nofile(4_096);
    let n = 1_000usize
        .min(limit as usize)
        .min((nofile.saturating_sub(64) / 2) as usize);
    assert!(
        n > 128,
        "only {n} connections fit (file limit {nofile}, backlog {limit})"
    );
    // Nothing is accepted until every connection is up: with a backlog of 128 the SYNs
    // beyond the queue are dropped and these connects never complete (they fail with a
    // timeout after the kernel's SYN retries).
    let mut connects = JoinSet::new();
    for _ in 0..n {
        connects.spawn(tokio::net::TcpStream::connect(addr));
    }
    let mut clients = Vec::with_capacity(n);
    while let Some(c) = connects.join_next().await {
        clients.push(c.unwrap().expect("connects"));
    }
    let mut accepted = 0;
    while accepted < n {
        listener.accept().await.expect("accepts");
        accepted += 1;
    }
    assert_eq!(accept_queue(listener.as_raw_fd()).0, 0, "none left queued");
}

/// Every accepted gRPC connection has Nagle's algorithm off: with it on, a small message
/// (an assignment) could wait for the peer's delayed ACK, about 40 ms.
#[tokio::test]
async fn accepted_connections_send_small_messages_at_once() {
    use tokio_stream::StreamExt as _;
    let listener = listen("127.0.0.1:0".parse().unwrap()).expect("listens");
    let addr = listener.local_addr().unwrap();
    let mut incoming = Box::pin(akbench_coordinator::server::accepted(listener));
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            tokio::net::TcpStream::connect(addr)
                .await
                .expect("connects"),
        );
        let stream = incoming.next().await.expect("one more").expect("accepted");
        assert!(
            stream.nodelay().unwrap(),
            "TCP_NODELAY on an accepted connection"
        );
    }
}
