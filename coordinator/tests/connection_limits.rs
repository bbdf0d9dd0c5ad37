//! The coordinator's listeners are bounded (issue 49: 20,000 idle connections from one
//! peer exhausted its file limit, `/healthz` and `ListRuns` failed, and its memory went
//! from 31 MB to 766 MB). A real private PostgreSQL and the coordinator served in-process
//! on loopback with short timeouts and a small per-peer limit: one peer (127.0.0.2) opens
//! thousands of idle connections to each port; `/healthz` and a gRPC call from another
//! address still answer, the coordinator holds no more than the peer's share, the HTTP
//! connections over it are answered `503` naming the limit, and every idle connection is
//! closed by the server (its handshake timeout, then its idle timeout), never left open.
#![cfg(target_os = "linux")]

use std::net::SocketAddr;
use std::time::Duration;

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve, Config};
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Idle connections the flooding peer opens to each port.
const FLOOD: usize = 3_000;
/// The per-peer limit configured.
const PER_PEER: usize = 200;
/// A bound on waits that must end (never a timing claim: the timeouts under test are 2 s
/// and 3 s).
const PATIENCE: Duration = Duration::from_secs(120);

/// Raises this process's soft file limit to its hard limit; returns the soft limit.
fn raise_nofile() -> u64 {
    // SAFETY: rlimit is plain data, written by getrlimit and read by setrlimit.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur as u64
    }
}

/// A connection to `to` from 127.0.0.2 (another peer than the test's own requests).
async fn from_flooder(to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}

/// Reads until the server closes the connection (EOF or reset); what was read.
async fn until_closed(mut c: TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf).await {
            Ok(0) | Err(_) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

async fn healthz(http: SocketAddr) -> String {
    get(http, "/healthz").await
}

async fn get(http: SocketAddr, path: &str) -> String {
    let mut c = TcpStream::connect(http).await.unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    String::from_utf8_lossy(&until_closed(c).await).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_is_bounded_and_health_stays_answerable() {
    let nofile = raise_nofile();
    assert!(
        nofile as usize > 2 * FLOOD + 1_000,
        "the file limit {nofile} is too low for {FLOOD} connections per port"
    );
    let url = test_support::fresh_database().await;
    let mut config = Config::local(url);
    config.max_connections_per_peer = PER_PEER;
    config.handshake_timeout = 2.0;
    config.idle_timeout = 3.0;
    config.keepalive = 1.0;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = serve(config, async move {
        let _ = stopped.await;
    })
    .await
    .expect("serves");
    let (grpc, http) = (handle.grpc_addr, handle.http_addr);

    // One peer opens thousands of connections to each port and says nothing.
    let mut http_flood = Vec::with_capacity(FLOOD);
    let mut grpc_flood = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        http_flood.push(from_flooder(http).await);
        grpc_flood.push(from_flooder(grpc).await);
    }

    // Under the flood: health and a gRPC call from another address answer.
    let health = tokio::time::timeout(PATIENCE, healthz(http)).await.unwrap();
    assert!(
        health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"),
        "{health}"
    );
    let channel = tonic::transport::Channel::from_shared(format!("http://{grpc}"))
        .unwrap()
        .connect()
        .await
        .expect("connects under the flood");
    let runs = ControlClient::new(channel)
        .list_runs(pb::ListRunsRequest::default())
        .await;
    assert!(runs.is_ok(), "{runs:?}");
    // The coordinator holds at most the flooder's share (plus this test's own).
    for guard in &handle.connections {
        assert!(guard.held() <= PER_PEER + 2, "held {}", guard.held());
        assert!(guard.shed() > 0, "nothing was shed");
    }

    // Every flood connection is closed by the server: over the limit at once (HTTP with a
    // 503 naming the limit), within it at the handshake timeout.
    let http_reads = tokio::spawn(async move {
        let mut answers = Vec::new();
        for c in http_flood {
            answers.push(until_closed(c).await);
        }
        answers
    });
    let grpc_reads = tokio::spawn(async move {
        for c in grpc_flood {
            until_closed(c).await;
        }
    });
    let answers = tokio::time::timeout(PATIENCE, http_reads)
        .await
        .expect("the server closes every idle HTTP connection")
        .unwrap();
    tokio::time::timeout(PATIENCE, grpc_reads)
        .await
        .expect("the server closes every idle gRPC connection")
        .unwrap();
    let shed: Vec<String> = answers
        .iter()
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(!shed.is_empty(), "no connection was answered 503");
    for a in &shed {
        assert!(
            a.starts_with("HTTP/1.1 503") && a.contains("--max-connections-per-peer"),
            "{a}"
        );
    }
    // The shed connections are counted in /metrics, by listener.
    let metrics = get(http, "/metrics").await;
    let counted: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("akbench_connections_shed_total{listener=\"http\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no http shed counter in /metrics:\n{metrics:.3000}"));
    assert!(
        counted >= shed.len() as u64,
        "counted {counted}, {} answered 503",
        shed.len()
    );
    let admitted = answers.len() - shed.len();
    assert!(
        admitted >= 1,
        "the flooder's share was admitted, then timed out"
    );

    // A connection that finished a request and then stays silent is closed at the idle
    // timeout (keep-alive asked for).
    let mut kept = TcpStream::connect(http).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let got = tokio::time::timeout(PATIENCE, until_closed(kept))
        .await
        .expect("the server closes an idle kept-alive connection");
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));

    // Handshakes that never finish are closed at the handshake timeout, even when their
    // bytes keep coming (below the idle timeout): request headers dripped a byte every
    // 500 ms, and an HTTP/2 preface cut short.
    let drip = TcpStream::connect(http).await.unwrap();
    let (mut r, mut w) = drip.into_split();
    let dripping = tokio::spawn(async move {
        w.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        while w.write_all(b"x").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let mut got = Vec::new();
    tokio::time::timeout(PATIENCE, r.read_to_end(&mut got))
        .await
        .expect("the server closes a request whose headers never end")
        .ok();
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    tokio::time::timeout(PATIENCE, dripping)
        .await
        .unwrap()
        .unwrap();
    let mut partial = TcpStream::connect(grpc).await.unwrap();
    partial.write_all(b"PRI * HTTP/2.0").await.unwrap();
    tokio::time::timeout(PATIENCE, until_closed(partial))
        .await
        .expect("the server closes a connection whose HTTP/2 preface never ends");

    // The flood gone, nothing is held and the coordinator serves as before.
    for guard in &handle.connections {
        tokio::time::timeout(PATIENCE, async {
            while guard.held() > 1 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("every flood connection is given back");
    }
    let health = healthz(http).await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let _ = stop.send(());
    handle.wait().await.unwrap();
}
