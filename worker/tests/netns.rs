//! A multi-host sweep without containers: the coordinator and two workers each in a network
//! namespace this test creates (veth pairs on a bridge in a fourth namespace; the addresses
//! exist only inside them; everything is deleted after), over TLS with worker certificates.
//! One worker's link is cut while it holds a lease: its trial is rescued by the other worker,
//! and when the link comes back its late reports are refused. The sweep ends with valid
//! accounting and one accepted record per trial.
//!
//! Needs root and `ip` (iproute2); otherwise it prints why it skipped. The coordinator reaches
//! the test's private PostgreSQL through its unix socket (a path, not an address, so it
//! crosses namespaces).

mod e2e;

use akbench_coordinator::devcerts::{Ca, Validity};
use akbench_coordinator::pgcluster::test_support;
use e2e::examples;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

const OPERATOR: &str = "netns-operator-token";

/// The namespaces; deleted (with their veths and bridge) on drop.
struct Net {
    prefix: String,
    subnet: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
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

impl Net {
    fn ns(&self, host: &str) -> String {
        format!("{}-{host}", self.prefix)
    }

    fn addr(&self, host: &str) -> String {
        let n = match host {
            "coord" => 1,
            "w1" => 11,
            _ => 12,
        };
        format!("{}.{n}", self.subnet)
    }

    /// coord, w1 and w2 on a bridge in `hub`.
    fn create() -> Result<Net, String> {
        let pid = std::process::id();
        let net = Net {
            prefix: format!("akb{pid}"),
            subnet: format!("10.213.{}", pid % 250),
        };
        let hub = net.ns("hub");
        ip(&["netns", "add", &hub])?;
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        for host in ["coord", "w1", "w2"] {
            let ns = net.ns(host);
            ip(&["netns", "add", &ns])?;
            let port = format!("v{host}");
            ip(&[
                "-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ])?;
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", net.addr(host)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        }
        Ok(net)
    }

    /// Takes `host`'s link down (`false`) or up again (`true`).
    fn link(&self, host: &str, up: bool) {
        ip(&[
            "-n",
            &self.ns("hub"),
            "link",
            "set",
            &format!("v{host}"),
            if up { "up" } else { "down" },
        ])
        .unwrap();
    }

    /// `program args` inside `host`'s namespace.
    fn command(&self, host: &str, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(host)]).arg(program);
        c
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for host in ["coord", "w1", "w2", "hub"] {
            let _ = ip(&["netns", "del", &self.ns(host)]);
        }
    }
}

struct Procs(Vec<Child>);

impl Procs {
    /// Fails the test at once when one of the processes has exited (a worker that refused to
    /// start would otherwise leave the test waiting for work until its bound).
    fn all_running(&mut self) {
        for c in &mut self.0 {
            if let Some(status) = c.try_wait().unwrap() {
                panic!("process {} exited early: {status}", c.id());
            }
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_across_network_namespaces_over_tls_survives_a_cut_link() {
    if unsafe { libc::geteuid() } != 0 {
        return akbench_core::testkit::skip(
            "a_sweep_across_network_namespaces_over_tls_survives_a_cut_link",
            "network namespaces need root",
        );
    }
    let net = match Net::create() {
        Ok(n) => n,
        Err(e) => {
            return akbench_core::testkit::skip(
                "a_sweep_across_network_namespaces_over_tls_survives_a_cut_link",
                &format!("cannot create network namespaces here: {e}"),
            );
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    // Certificates: the coordinator's for its namespace address, one per worker.
    let ca = Ca::new("netns CA", Validity::days(1)).unwrap();
    let ca_file = write(dir, "ca.pem", &ca.pem().cert);
    let server = ca.server(&[net.addr("coord")], Validity::days(1)).unwrap();
    let server_cert = write(dir, "server.pem", &server.cert);
    let server_key = write(dir, "server.key", &server.key);
    for w in ["w1", "w2"] {
        let p = ca.worker(w, Validity::days(1)).unwrap();
        write(dir, &format!("{w}.pem"), &p.cert);
        write(dir, &format!("{w}.key"), &p.key);
    }
    let tokens = write(dir, "tokens", &format!("operator:{OPERATOR}\n"));

    // The database through its unix socket.
    let tcp_url = test_support::fresh_database().await;
    let cluster = test_support::shared();
    let socket_dir = cluster.data_dir().display().to_string().replace('/', "%2F");
    let socket_url = tcp_url.replace("127.0.0.1", &socket_dir);
    let (db, conn) = tokio_postgres::connect(&tcp_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);

    let grpc = format!("{}:7400", net.addr("coord"));
    let url = format!("https://{grpc}");
    let mut procs = Procs(Vec::new());
    procs.0.push(
        net.command("coord", &e2e::workspace_bin("akbench-coordinator"))
            .arg("--database-url")
            .arg(&socket_url)
            .args(["--grpc-listen", &grpc])
            .args(["--http-listen", &format!("{}:7401", net.addr("coord"))])
            .arg("--tls-cert")
            .arg(&server_cert)
            .arg("--tls-key")
            .arg(&server_key)
            .arg("--client-ca")
            .arg(&ca_file)
            .arg("--require-worker-certs")
            .arg("--token-file")
            .arg(&tokens)
            .args(["--lease-ttl-ms", "3000"])
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    let ctl = e2e::workspace_bin("akbench");
    let akbench = |args: &[&str]| -> Output {
        net.command("coord", &ctl)
            .current_dir(dir)
            .args(["--coordinator", &url, "--ca-file"])
            .arg(&ca_file)
            .args(args)
            .env("AKBENCH_TOKEN", OPERATOR)
            .env_remove("AKBENCH_COORDINATOR")
            .output()
            .unwrap()
    };
    let manifest = write(
        dir,
        "experiment.yaml",
        // `direct`: `ip netns exec` gives each worker a fresh /sys without the cgroup
        // hierarchies the sandbox runtime limits attempts with; this test is about the network.
        "experiment: netns\ntasks:\n  include: [\"pyslug-*\"]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: fail\nrepetitions: 2\nexecution:\n  runtime: direct\n  infrastructure_retries: 2\n",
    );
    // Plan (the coordinator may still be starting: retry while it is unavailable).
    let until = Instant::now() + Duration::from_secs(60);
    let key = loop {
        let o = akbench(&[
            "run",
            "plan",
            "--config",
            manifest.to_str().unwrap(),
            "--tasks-root",
            examples().join("tasks").to_str().unwrap(),
            "--agents-root",
            examples().join("agents").to_str().unwrap(),
            "--store-root",
            dir.join("runs").to_str().unwrap(),
            "--json",
        ]);
        if o.status.code() == Some(0) {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            break v["run_key"].as_str().unwrap().to_string();
        }
        assert_eq!(o.status.code(), Some(3), "{}", text(&o));
        assert!(
            Instant::now() < until,
            "the coordinator never answered: {}",
            text(&o)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let o = akbench(&["run", "start", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    for w in ["w1", "w2"] {
        let wd = dir.join(w);
        procs.0.push(
            net.command(w, env!("CARGO_BIN_EXE_akbench-worker").as_ref())
                .args(["--coordinator", &url, "--worker-id", w, "--slots", "2"])
                .args(["--grace", "5"])
                // The plan is `runtime: direct` (above): a worker in a fresh network
                // namespace has no cgroup to sandbox with, and says so at start unless told
                // it serves only direct plans.
                .arg("--allow-unsandboxed")
                .arg("--ca-file")
                .arg(&ca_file)
                .arg("--tls-cert")
                .arg(dir.join(format!("{w}.pem")))
                .arg("--tls-key")
                .arg(dir.join(format!("{w}.key")))
                .arg("--cache")
                .arg(wd.join("cache"))
                .arg("--out")
                .arg(wd.join("out"))
                .arg("--tasks-root")
                .arg(examples().join("tasks"))
                .arg("--agents-root")
                .arg(examples().join("agents"))
                .env("AKBENCH_LOG", "error")
                .spawn()
                .unwrap(),
        );
    }

    // Cut w1's link while it holds a lease; keep it cut until the coordinator has taken that
    // lease back (the attempt is fenced), then restore it: w1 reconnects with a stale lease.
    let count = |sql: &'static str| {
        let db = &db;
        async move { db.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let until = Instant::now() + Duration::from_secs(300);
    while count("SELECT count(*) FROM leases WHERE worker_id = 'w1'").await == 0 {
        procs.all_running();
        assert!(Instant::now() < until, "w1 never took work");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    net.link("w1", false);
    let until = Instant::now() + Duration::from_secs(120);
    while count("SELECT count(*) FROM attempts WHERE worker_id = 'w1' AND fenced").await == 0 {
        assert!(Instant::now() < until, "w1's lease was never taken back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    net.link("w1", true);

    let o = akbench(&["run", "status", &key, "--watch", "--json"]);
    assert_eq!(o.status.code(), Some(0), "accounting: {}", text(&o));
    let o = akbench(&["run", "reconcile", &key, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(report["counts"]["succeeded"], 8, "{report}");
    assert_eq!(report["counts"]["failed"], 8, "{report}");

    // The cut attempts are infrastructure errors (lease expired); none of w1's late reports
    // about them was accepted; every trial has exactly one accepted record; both workers
    // did work.
    let fenced: Vec<(String, Option<String>)> = db
        .query(
            "SELECT terminal_state, cause FROM attempts WHERE worker_id = 'w1' AND fenced",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(!fenced.is_empty());
    for (state, cause) in &fenced {
        assert_eq!(state, "infrastructure_error", "{cause:?}");
    }
    assert_eq!(
        count(
            "SELECT count(*) FROM submissions s JOIN attempts a USING (attempt_id) \
             WHERE a.worker_id = 'w1' AND a.fenced"
        )
        .await,
        0,
        "a late report of the cut worker was accepted"
    );
    let run_id: uuid::Uuid = db
        .query_one("SELECT run_id FROM run_catalog WHERE run_key = $1", &[&key])
        .await
        .unwrap()
        .get(0);
    let per_trial = e2e::accepted_records_per_trial(&db, run_id).await;
    assert_eq!(per_trial.len(), 16);
    assert!(per_trial.iter().all(|n| *n == 1), "{per_trial:?}");
    // Both workers took leases (w1's may all have been taken back by the cut: whether it
    // finished one before depends on timing, and is not what this test is about).
    assert!(
        count("SELECT count(DISTINCT worker_id) FROM attempts").await >= 2,
        "both workers took trials"
    );
    drop(procs);
    drop(net);
}
