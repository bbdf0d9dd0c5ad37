//! The coordinator's listeners, bounded (`akbench_core::connections` decides; this applies
//! it at accept): [`Guard::accept`] admits a connection only within the listener's total
//! and its peer's share, and wraps it in [`Bounded`], which closes it when its handshake is
//! not done within the handshake timeout or when it carries no traffic for the idle
//! timeout. A connection over a limit is shed at once: the HTTP listener answers it `503`
//! with the reason, the gRPC listener closes it; a warning is logged at most every
//! [`SHED_LOG_EVERY`] with the count. `/healthz` thus stays answerable when one peer opens
//! thousands of connections, and the descriptors and memory they hold stay bounded.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use akbench_core::connections::{ConnectionLimits, Shed};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// The length of the HTTP/2 client preface (`PRI * HTTP/2.0...`).
const H2_PREFACE_BYTES: u64 = 24;

/// How often a warning about shed connections may be logged.
pub const SHED_LOG_EVERY: Duration = Duration::from_secs(10);

/// What a listener serves: decides how a shed connection is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// gRPC over HTTP/2: a shed connection is closed.
    Grpc,
    /// Plain HTTP/1 (status API, health, metrics): a shed connection gets `503`; the
    /// handshake is done once the request's headers are in.
    Http,
    /// HTTP/1 under TLS: a shed connection is closed (it has not spoken TLS yet).
    HttpTls,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
}

/// The admission state of one listener.
#[derive(Debug)]
pub struct Guard {
    limits: ConnectionLimits,
    protocol: Protocol,
    held: Mutex<Held>,
    shed: AtomicU64,
    shed_metric: Option<prometheus_client::metrics::counter::Counter>,
    last_log: Mutex<Option<Instant>>,
    name: &'static str,
}

impl Guard {
    /// A guard for the listener `name` (`grpc`, `http`) with `limits`.
    pub fn new(name: &'static str, protocol: Protocol, limits: ConnectionLimits) -> Arc<Guard> {
        Arc::new(Guard {
            limits,
            protocol,
            held: Mutex::new(Held::default()),
            shed: AtomicU64::new(0),
            shed_metric: None,
            last_log: Mutex::new(None),
            name,
        })
    }

    /// A guard as [`Guard::new`] whose shed connections are also counted in `metric`
    /// (`akbench_connections_shed_total{listener}`).
    pub fn with_metric(
        name: &'static str,
        protocol: Protocol,
        limits: ConnectionLimits,
        metric: prometheus_client::metrics::counter::Counter,
    ) -> Arc<Guard> {
        let mut g =
            Arc::into_inner(Guard::new(name, protocol, limits)).expect("a new guard has one owner");
        g.shed_metric = Some(metric);
        Arc::new(g)
    }

    /// The limits applied.
    pub fn limits(&self) -> ConnectionLimits {
        self.limits
    }

    /// Connections held now.
    pub fn held(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// Connections shed so far.
    pub fn shed(&self) -> u64 {
        self.shed.load(Ordering::Relaxed)
    }

    fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Permit, Shed> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let from_peer = held.per_peer.get(&peer).copied().unwrap_or(0);
        self.limits.admit(held.total, from_peer)?;
        held.total += 1;
        *held.per_peer.entry(peer).or_insert(0) += 1;
        Ok(Permit {
            guard: self.clone(),
            peer,
        })
    }

    fn release(&self, peer: IpAddr) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.total = held.total.saturating_sub(1);
        if let Some(n) = held.per_peer.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                held.per_peer.remove(&peer);
            }
        }
    }

    fn note_shed(&self, peer: SocketAddr, why: Shed) {
        let n = self.shed.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(m) = &self.shed_metric {
            m.inc();
        }
        let mut last = self.last_log.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|t| t.elapsed() >= SHED_LOG_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(listener = self.name, %peer, shed_total = n, "connection refused: {why}");
        }
    }

    /// The next admitted connection of `listener`, wrapped in [`Bounded`]; connections
    /// over a limit are shed on the way (an HTTP one answered `503` in its own task).
    /// Accept errors (out of descriptors) are logged and retried after a pause.
    pub async fn accept(self: &Arc<Self>, listener: &TcpListener) -> Bounded<TcpStream> {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(listener = self.name, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            match self.admit(peer.ip()) {
                Ok(permit) => return Bounded::new(tcp, permit, self.limits, self.protocol),
                Err(why) => {
                    self.note_shed(peer, why);
                    if self.protocol == Protocol::Http {
                        tokio::spawn(unavailable(tcp, why));
                    }
                }
            }
        }
    }
}

/// Answers a shed HTTP connection `503` with the reason (bounded: a peer that does not read
/// it is dropped after a second), then closes it.
async fn unavailable(mut tcp: TcpStream, why: Shed) {
    let body = format!("{why}\n");
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = tcp.write_all(reply.as_bytes()).await;
        let _ = tcp.shutdown().await;
    })
    .await;
}

/// A connection's place in its listener's count, given back when it closes.
#[derive(Debug)]
pub struct Permit {
    guard: Arc<Guard>,
    peer: IpAddr,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.guard.release(self.peer);
    }
}

/// An admitted connection: fails its reads and writes with `TimedOut` (which closes it)
/// once its handshake is not done by the handshake deadline, or once it carried no
/// traffic for the idle timeout.
#[derive(Debug)]
pub struct Bounded<S> {
    inner: S,
    _permit: Permit,
    deadline: Pin<Box<Sleep>>,
    idle: Duration,
    protocol: Protocol,
    read: u64,
    wrote_any: bool,
    /// HTTP/1: the last bytes read, to see the end of the request headers.
    tail: [u8; 3],
    headers_in: bool,
}

impl<S> Bounded<S> {
    fn new(inner: S, permit: Permit, limits: ConnectionLimits, protocol: Protocol) -> Self {
        Bounded {
            inner,
            _permit: permit,
            deadline: Box::pin(tokio::time::sleep(limits.handshake)),
            idle: limits.idle,
            protocol,
            read: 0,
            wrote_any: false,
            tail: [0; 3],
            headers_in: false,
        }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Done with its handshake: on plain HTTP/1, the first request's headers are in (the
    /// answer may take a while); on gRPC, the client's HTTP/2 preface is in and the server
    /// has answered; under TLS, both sides have spoken (the TLS handshake has its own
    /// deadline, `tls::HANDSHAKE_TIMEOUT`).
    fn shaken(&self) -> bool {
        match self.protocol {
            Protocol::Http => self.headers_in,
            Protocol::Grpc => self.read >= H2_PREFACE_BYTES && self.wrote_any,
            Protocol::HttpTls => self.read > 0 && self.wrote_any,
        }
    }

    fn saw(&mut self, bytes: &[u8]) {
        if self.protocol != Protocol::Http || self.headers_in || bytes.is_empty() {
            return;
        }
        let mut window = self.tail.to_vec();
        window.extend_from_slice(bytes);
        self.headers_in = window.windows(4).any(|w| w == b"\r\n\r\n");
        let n = window.len();
        self.tail.copy_from_slice(&window[n - 3..]);
    }

    /// After traffic: once shaken, the idle timeout starts again.
    fn progressed(&mut self) {
        if self.shaken() {
            let next = Instant::now() + self.idle;
            self.deadline.as_mut().reset(next);
        }
    }

    /// Pending I/O: an error once the deadline passed (the waker is registered otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.deadline.as_mut().poll(cx).is_ready().then(|| {
            let what = if self.shaken() {
                "no traffic within the idle timeout"
            } else {
                "the handshake was not done within the handshake timeout"
            };
            io::Error::new(io::ErrorKind::TimedOut, what)
        })
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Bounded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let got = &buf.filled()[before..];
                if !got.is_empty() {
                    this.read += got.len() as u64;
                    this.saw(got);
                    this.progressed();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Bounded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, data) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    this.wrote_any = true;
                    this.progressed();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            // A peer that does not read what it is sent holds the connection no longer.
            Poll::Pending => match this.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Bounded<TcpStream> {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// An HTTP listener under a [`Guard`], for `axum::serve`.
#[derive(Debug)]
pub struct GuardedListener {
    /// The listener.
    pub listener: TcpListener,
    /// Its guard.
    pub guard: Arc<Guard>,
}

impl axum::serve::Listener for GuardedListener {
    type Io = Bounded<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let conn = self.guard.accept(&self.listener).await;
        let peer = conn
            .get_ref()
            .peer_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        (conn, peer)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// The admitted connections of a gRPC listener, as a stream for tonic.
pub fn incoming(
    listener: TcpListener,
    guard: Arc<Guard>,
) -> impl tokio_stream::Stream<Item = io::Result<Bounded<TcpStream>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let task = tokio::spawn(async move {
        loop {
            let conn = guard.accept(&listener).await;
            if tx.send(Ok(conn)).await.is_err() {
                return;
            }
        }
    });
    let abort = AbortOnDrop(task);
    tokio_stream::StreamExt::map(tokio_stream::wrappers::ReceiverStream::new(rx), move |c| {
        let _ = &abort;
        c
    })
}

#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
