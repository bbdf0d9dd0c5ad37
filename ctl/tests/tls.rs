//! TLS end to end on loopback: a real coordinator (fresh database of a private PostgreSQL
//! cluster) serving gRPC and HTTP over TLS with certificates made by `devcerts`, the real
//! `akbench` binary, raw worker sessions with and without client certificates, and a raw TCP
//! listener that records what a client would have sent.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use akbench_coordinator::auth::{Role, Tokens};
use akbench_coordinator::devcerts::{Ca, Validity};
use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve_with, Config, ServeHandle, Services};
use akbench_coordinator::work_control::NoScheduler;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use akbench_proto::workers_client::WorkersClient;
use akbench_worker::dial::{endpoint, TlsOptions};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Code;

const OPERATOR: &str = "operator-token-tls-0123";

/// A development PKI in a temporary folder.
struct Pki {
    dir: tempfile::TempDir,
    ca: Ca,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("akbench test CA", Validity::days(2)).unwrap();
        std::fs::write(dir.path().join("ca.pem"), &ca.pem().cert).unwrap();
        let server = ca
            .server(&["localhost".into(), "127.0.0.1".into()], Validity::days(2))
            .unwrap();
        std::fs::write(dir.path().join("server.pem"), &server.cert).unwrap();
        std::fs::write(dir.path().join("server.key"), &server.key).unwrap();
        Pki { dir, ca }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `<name>.pem` / `<name>.key` for a worker certificate of `ca`.
    fn worker(&self, ca: &Ca, name: &str, validity: Validity) -> TlsOptions {
        let w = ca.worker(name, validity).unwrap();
        std::fs::write(self.path(&format!("{name}.pem")), &w.cert).unwrap();
        std::fs::write(self.path(&format!("{name}.key")), &w.key).unwrap();
        TlsOptions {
            ca_file: Some(self.path("ca.pem")),
            cert: Some(self.path(&format!("{name}.pem"))),
            key: Some(self.path(&format!("{name}.key"))),
        }
    }

    fn client(&self) -> TlsOptions {
        TlsOptions {
            ca_file: Some(self.path("ca.pem")),
            ..TlsOptions::default()
        }
    }
}

struct Coordinator {
    handle: ServeHandle,
    stop: oneshot::Sender<()>,
}

impl Coordinator {
    async fn start(pki: &Pki, require_worker_certs: bool) -> Coordinator {
        let db = test_support::fresh_database().await;
        let mut config = Config::local(db);
        config.tls_cert = Some(pki.path("server.pem"));
        config.tls_key = Some(pki.path("server.key"));
        config.client_ca = Some(pki.path("ca.pem"));
        config.require_worker_certs = require_worker_certs;
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = serve_with(
            config,
            Services {
                work: Some(Arc::new(NoScheduler)),
                tokens: Some(Tokens::from_pairs([
                    (Role::Operator, OPERATOR),
                    (Role::Worker, "worker-token-tls"),
                ])),
                ..Services::default()
            },
            async move {
                let _ = stopped.await;
            },
        )
        .await
        .expect("serves over TLS");
        Coordinator { handle, stop }
    }

    fn grpc_url(&self) -> String {
        format!("https://localhost:{}", self.handle.grpc_addr.port())
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.handle.wait().await.expect("stops");
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn akbench(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_akbench"));
    c.current_dir(cwd);
    for v in [
        "AKBENCH_COORDINATOR",
        "AKBENCH_TOKEN",
        "AKBENCH_CA_FILE",
        "AKBENCH_ALLOW_PLAINTEXT_TOKEN",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    ] {
        c.env_remove(v);
    }
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run akbench")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Opens a worker session as `worker_id` and returns its first answer (`Ok(())` for a
/// Welcome); the session's sender is returned so the session stays open. Its instance id is
/// `test-<worker id>`: sessions of one id here are one worker process reconnecting.
async fn session(
    url: &str,
    tls: &TlsOptions,
    worker_id: &str,
    token: Option<&str>,
) -> (
    Result<(), String>,
    Option<mpsc::UnboundedSender<pb::WorkerMessage>>,
) {
    let ep = endpoint(url, tls, token.is_some(), false).expect("endpoint");
    let channel = match ep.connect().await {
        Ok(c) => c,
        Err(e) => return (Err(format!("connect: {e:?}")), None),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(pb::WorkerMessage {
        body: Some(pb::worker_message::Body::Hello(pb::Hello {
            worker_id: worker_id.into(),
            slots: 1,
            version: "test".into(),
            instance_id: format!("test-{worker_id}"),
            ..pb::Hello::default()
        })),
    })
    .unwrap();
    let mut req = tonic::Request::new(UnboundedReceiverStream::new(rx));
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let mut stream = match WorkersClient::new(channel).session(req).await {
        Ok(s) => s.into_inner(),
        Err(s) => return (Err(format!("{:?}: {}", s.code(), s.message())), None),
    };
    match stream.message().await {
        Ok(Some(pb::CoordinatorMessage {
            body: Some(pb::coordinator_message::Body::Welcome(_)),
        })) => (Ok(()), Some(tx)),
        Ok(other) => (Err(format!("unexpected {other:?}")), None),
        Err(s) => (Err(format!("{:?}: {}", s.code(), s.message())), None),
    }
}

/// One HTTP/1.1 GET over TLS verified with `ca`; the status line.
async fn https_get(addr: std::net::SocketAddr, ca: &Path, path: &str) -> String {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake with the HTTP listener");
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_and_http_work_over_tls_and_plaintext_is_refused() {
    let pki = Pki::new();
    let c = Coordinator::start(&pki, false).await;
    let dir = tempfile::tempdir().unwrap();
    let root = repo();
    let ca = pki.path("ca.pem");
    let url = c.grpc_url();
    let plan = |extra: &[&str]| {
        let store_root = dir.path().join("runs");
        let mut args = vec!["--coordinator", url.as_str()];
        args.extend_from_slice(extra);
        let config = root.join("examples/experiment.yaml");
        let tasks = root.join("examples/tasks");
        let agents = root.join("examples/agents");
        let owned = [
            "run".to_string(),
            "plan".into(),
            "--config".into(),
            config.display().to_string(),
            "--tasks-root".into(),
            tasks.display().to_string(),
            "--agents-root".into(),
            agents.display().to_string(),
            "--store-root".into(),
            store_root.display().to_string(),
            "--json".into(),
        ];
        let mut all: Vec<&str> = args.clone();
        all.extend(owned.iter().map(String::as_str));
        akbench(dir.path(), &all, &[("AKBENCH_TOKEN", OPERATOR)])
    };
    // The CA file verifies the coordinator: plan and status work over TLS.
    let o = plan(&["--ca-file", ca.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let key = v["run_key"].as_str().unwrap().to_string();
    let o = akbench(
        dir.path(),
        &["--coordinator", &url, "run", "status", &key, "--json"],
        &[
            ("AKBENCH_TOKEN", OPERATOR),
            ("AKBENCH_CA_FILE", ca.to_str().unwrap()),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // Without the CA (system roots only) the certificate is not trusted: exit 3, and no
    // fallback to plaintext.
    let o = plan(&[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("unavailable"), "{}", text(&o));

    // A CA file with an http:// URL is a usage error (it would be ignored).
    let plain = format!("http://127.0.0.1:{}", c.handle.grpc_addr.port());
    let o = akbench(
        dir.path(),
        &[
            "--coordinator",
            &plain,
            "--ca-file",
            ca.to_str().unwrap(),
            "run",
            "status",
            &key,
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--ca-file"), "{}", text(&o));

    // The HTTP listener speaks TLS with the same certificate, and only TLS.
    assert_eq!(
        https_get(c.handle.http_addr, &ca, "/healthz").await,
        "HTTP/1.1 200 OK"
    );
    let mut tcp = tokio::net::TcpStream::connect(c.handle.http_addr)
        .await
        .unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tcp.read_to_end(&mut buf).await;
    assert!(
        !String::from_utf8_lossy(&buf).contains("200 OK"),
        "plaintext was served"
    );

    // A certificate swapped on disk is served by new handshakes without a restart.
    let tls = c.handle.tls.clone().expect("TLS on");
    let before = tls.current_cert();
    let next = pki
        .ca
        .server(&["localhost".into()], Validity::days(3))
        .unwrap();
    std::fs::write(pki.path("server.key"), &next.key).unwrap();
    std::fs::write(pki.path("server.pem"), &next.cert).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while tls.current_cert() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "certificate not reloaded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let served = CertificateDer::from_pem_slice(next.cert.as_bytes()).unwrap();
    assert_eq!(tls.current_cert(), served);
    assert_eq!(
        https_get(c.handle.http_addr, &ca, "/healthz").await,
        "HTTP/1.1 200 OK"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_never_sends_a_token_in_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    // https:// to something that is not TLS: the first bytes are a TLS ClientHello, never
    // the token, and the command fails (exit 3).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let captured = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = s.read(&mut buf).await.unwrap_or(0);
        buf.truncate(n);
        buf
    });
    let url = format!("https://127.0.0.1:{port}");
    let cwd = dir.path().to_path_buf();
    let o = tokio::task::spawn_blocking(move || {
        akbench(
            &cwd,
            &["--coordinator", &url, "run", "status", "some-run"],
            &[("AKBENCH_TOKEN", OPERATOR)],
        )
    })
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let bytes = captured.await.unwrap();
    assert_eq!(bytes.first(), Some(&0x16), "not a TLS record: {bytes:?}");
    let seen = String::from_utf8_lossy(&bytes);
    assert!(
        !seen.contains(OPERATOR) && !seen.contains("Bearer"),
        "{seen}"
    );

    // http:// to a non-loopback address with a token: refused before connecting (exit 2),
    // naming the flag that allows it.
    let o = akbench(
        dir.path(),
        &[
            "--coordinator",
            "http://192.0.2.10:7400",
            "run",
            "status",
            "some-run",
        ],
        &[("AKBENCH_TOKEN", OPERATOR)],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--allow-plaintext-token"), "{}", text(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_certificates_are_required_checked_and_bound_to_ids() {
    const WORKER: Option<&str> = Some("worker-token-tls");
    let pki = Pki::new();
    let c = Coordinator::start(&pki, true).await;
    let url = c.grpc_url();

    // A certificate from the coordinator's CA, named like the worker id, with a worker
    // token (this coordinator has worker tokens) opens a session.
    let alpha = pki.worker(&pki.ca, "alpha-1", Validity::days(1));
    let (r, held) = session(&url, &alpha, "alpha-1", WORKER).await;
    assert_eq!(r, Ok(()));

    // Certificate and token must both be valid: a valid certificate with a bogus token, an
    // operator's token or no token at all is refused.
    let (r, _) = session(&url, &alpha, "alpha-1", Some("bogus-token")).await;
    let e = r.unwrap_err();
    assert!(
        e.contains("Unauthenticated") && e.contains("unknown bearer token"),
        "{e}"
    );
    let (r, _) = session(&url, &alpha, "alpha-1", Some(OPERATOR)).await;
    let e = r.unwrap_err();
    assert!(
        e.contains("PermissionDenied") && e.contains("worker token"),
        "{e}"
    );
    let (r, _) = session(&url, &alpha, "alpha-1", None).await;
    let e = r.unwrap_err();
    assert!(
        e.contains("Unauthenticated") && e.contains("worker token too"),
        "{e}"
    );

    // No certificate (even with a worker token): refused.
    let (r, _) = session(&url, &pki.client(), "nocert-1", WORKER).await;
    let e = r.unwrap_err();
    assert!(
        e.contains("Unauthenticated") && e.contains("worker certificate"),
        "{e}"
    );

    // A certificate from another CA, or an expired one: the handshake refuses it.
    let other = Ca::new("other CA", Validity::days(2)).unwrap();
    let stranger = pki.worker(&other, "stranger-1", Validity::days(1));
    let (r, _) = session(&url, &stranger, "stranger-1", WORKER).await;
    assert!(r.is_err(), "a certificate from another CA was accepted");
    let now = SystemTime::now();
    let expired = pki.worker(
        &pki.ca,
        "expired-1",
        Validity {
            from: now - Duration::from_secs(10 * 86_400),
            until: now - Duration::from_secs(86_400),
        },
    );
    let (r, _) = session(&url, &expired, "expired-1", WORKER).await;
    assert!(r.is_err(), "an expired certificate was accepted");

    // A certificate's name must equal the worker id: beta's certificate claims neither
    // alpha's id (connected or not) nor an id nobody registered, naming both.
    let beta = pki.worker(&pki.ca, "beta-1", Validity::days(1));
    for id in ["alpha-1", "gamma-1"] {
        let (r, _) = session(&url, &beta, id, WORKER).await;
        let e = r.unwrap_err();
        assert!(
            e.contains("PermissionDenied")
                && e.contains("\"beta-1\"")
                && e.contains(&format!("{id:?}")),
            "{e}"
        );
    }
    drop(held);
    let (r, _) = session(&url, &beta, "alpha-1", WORKER).await;
    assert!(r.is_err(), "beta took alpha's id after alpha left");
    // Alpha itself comes back under its id, and beta has its own; gamma's id was never
    // taken by beta, so gamma's own certificate gets it.
    let (r, _alpha_again) = session(&url, &alpha, "alpha-1", WORKER).await;
    assert_eq!(r, Ok(()));
    let (r, _beta) = session(&url, &beta, "beta-1", WORKER).await;
    assert_eq!(r, Ok(()));
    let gamma = pki.worker(&pki.ca, "gamma-1", Validity::days(1));
    let (r, _gamma) = session(&url, &gamma, "gamma-1", WORKER).await;
    assert_eq!(r, Ok(()));

    // A worker certificate cannot call the control API, even with an operator token.
    let channel = endpoint(&url, &alpha, true, false)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut req = tonic::Request::new(pb::ListRunsRequest::default());
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {OPERATOR}").parse().unwrap(),
    );
    let s = ControlClient::new(channel)
        .list_runs(req)
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::PermissionDenied, "{s:?}");
    assert!(s.message().contains("worker certificate"), "{s:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_workers_are_bound_to_their_token() {
    let pki = Pki::new();
    let db = test_support::fresh_database().await;
    let mut config = Config::local(db);
    config.tls_cert = Some(pki.path("server.pem"));
    config.tls_key = Some(pki.path("server.key"));
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = serve_with(
        config,
        Services {
            work: Some(Arc::new(NoScheduler)),
            tokens: Some(Tokens::from_pairs([
                (Role::Worker, "worker-token-one"),
                (Role::Worker, "worker-token-two"),
            ])),
            ..Services::default()
        },
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    let url = format!("https://localhost:{}", handle.grpc_addr.port());
    let tls = pki.client();
    let (r, _one) = session(&url, &tls, "w-1", Some("worker-token-one")).await;
    assert_eq!(r, Ok(()));
    let (r, _) = session(&url, &tls, "w-1", Some("worker-token-two")).await;
    let e = r.unwrap_err();
    assert!(e.contains("PermissionDenied"), "{e}");
    let (r, _two) = session(&url, &tls, "w-2", Some("worker-token-two")).await;
    assert_eq!(r, Ok(()));
    let _ = stop.send(());
    handle.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn akbench_certs_makes_a_pki_the_coordinator_and_workers_use() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let out_s = out.to_str().unwrap();
    let o = akbench(
        dir.path(),
        &[
            "certs",
            "--out",
            out_s,
            "--server-name",
            "localhost",
            "--server-name",
            "127.0.0.1",
            "--worker",
            "w1",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A second call reuses the CA for another worker; an existing file is never overwritten
    // and nothing is written then.
    let o = akbench(
        dir.path(),
        &["certs", "--out", out_s, "--worker", "w2"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = akbench(
        dir.path(),
        &["certs", "--out", out_s, "--worker", "w3", "--worker", "w1"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("worker-w1.pem") && text(&o).contains("already exists"),
        "{}",
        text(&o)
    );
    assert!(!out.join("worker-w3.pem").exists());
    let o = akbench(
        dir.path(),
        &["certs", "--out", out_s, "--worker", "../x"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(out.join("worker-w2.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "a private key is readable by others");

    // The files work: a coordinator with server.pem and ca.pem as client CA accepts w2
    // (signed by the reused CA) as a worker.
    let db = test_support::fresh_database().await;
    let mut config = Config::local(db);
    config.tls_cert = Some(out.join("server.pem"));
    config.tls_key = Some(out.join("server.key"));
    config.client_ca = Some(out.join("ca.pem"));
    config.require_worker_certs = true;
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = serve_with(
        config,
        Services {
            work: Some(Arc::new(NoScheduler)),
            ..Services::default()
        },
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    let url = format!("https://localhost:{}", handle.grpc_addr.port());
    let tls = TlsOptions {
        ca_file: Some(out.join("ca.pem")),
        cert: Some(out.join("worker-w2.pem")),
        key: Some(out.join("worker-w2.key")),
    };
    let (r, _w2) = session(&url, &tls, "w2", None).await;
    assert_eq!(r, Ok(()));
    let _ = stop.send(());
    handle.wait().await.unwrap();
}

/// `http://` to the TLS port is a mistake the command names: the server closes the
/// connection, and the command says so, suggests https:// and exits 3 (it used to die of
/// SIGPIPE, exit 141 and no message, 19 times in 20). Repeated to catch the race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_a_tls_coordinator_says_so_and_exits_3() {
    let pki = Pki::new();
    let c = Coordinator::start(&pki, false).await;
    let plain = format!("http://127.0.0.1:{}", c.handle.grpc_addr.port());
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20 {
        let (cwd, url) = (dir.path().to_path_buf(), plain.clone());
        let o = tokio::task::spawn_blocking(move || {
            akbench(&cwd, &["--coordinator", &url, "run", "list"], &[])
        })
        .await
        .unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(3), "try {i}: {:?}\n{t}", o.status);
        assert!(
            t.contains(&plain) && t.contains("closed the connection") && t.contains("https://"),
            "try {i}: {t}"
        );
    }
    c.stop().await;
}

/// Output to a pipe nobody reads any more (`akbench ... | head` once head exited) is
/// reported on stderr with exit 3, never a silent death by SIGPIPE.
#[test]
fn a_closed_stdout_is_reported_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs");
    std::fs::create_dir_all(&store).unwrap();
    for i in 0..5 {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
            .current_dir(dir.path())
            .env_remove("AKBENCH_COORDINATOR")
            .args(["run", "list", "--store-root"])
            .arg(&store)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "try {i}: {:?}\n{err}", o.status);
        assert!(
            err.contains("failed to write to standard output") && err.contains("closed"),
            "try {i}: {err}"
        );
    }
}
