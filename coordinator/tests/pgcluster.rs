//! Private clusters from the system's PostgreSQL binaries: start, connect, create databases,
//! stop; parallel starts; persistent reuse; the shared per-binary test cluster.

use std::os::unix::fs::PermissionsExt;

use akbench_coordinator::pgcluster::{secret, stale, test_support, ClusterError, PrivateCluster};
use tokio_postgres::NoTls;

async fn query_string(url: &str, sql: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connects");
    let driver = tokio::spawn(connection);
    let value: String = client.query_one(sql, &[]).await.expect("query").get(0);
    drop(client);
    driver.await.unwrap().unwrap();
    value
}

#[tokio::test]
async fn starts_connects_creates_two_databases_and_stops() {
    let cluster = PrivateCluster::start(None).expect("cluster starts");
    let data_dir = cluster.data_dir().to_path_buf();
    assert!(data_dir.join("PG_VERSION").exists());
    assert_eq!(
        query_string(&cluster.url("postgres"), "SELECT current_user::text").await,
        "postgres"
    );
    assert_eq!(
        query_string(&cluster.url("postgres"), "SHOW listen_addresses").await,
        "127.0.0.1"
    );
    // DEFAULT_SETTINGS: a million-trial COPY runs without a checkpoint every ~19 s.
    assert_eq!(
        query_string(&cluster.url("postgres"), "SHOW max_wal_size").await,
        "4GB"
    );
    assert_eq!(
        query_string(&cluster.url("postgres"), "SHOW checkpoint_timeout").await,
        "15min"
    );

    let alpha = cluster.create_database("alpha").await.expect("alpha");
    let beta = cluster.create_database("beta").await.expect("beta");
    assert_eq!(
        query_string(&alpha, "SELECT current_database()::text").await,
        "alpha"
    );
    assert_eq!(
        query_string(&beta, "SELECT current_database()::text").await,
        "beta"
    );
    let again = cluster.create_database("alpha").await.unwrap_err();
    assert!(
        again
            .to_string()
            .starts_with("failed to create database alpha"),
        "{again}"
    );
    let bad = cluster.create_database("Robert'); DROP").await.unwrap_err();
    assert!(matches!(bad, ClusterError::InvalidDatabaseName(_)), "{bad}");

    let url = cluster.url("postgres");
    cluster.stop().expect("stops cleanly");
    assert!(
        !data_dir.exists(),
        "a throwaway cluster's folder is removed"
    );
    assert!(
        tokio_postgres::connect(&url, NoTls).await.is_err(),
        "the server is gone"
    );
}

#[tokio::test]
async fn two_clusters_start_in_parallel_on_different_ports() {
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| PrivateCluster::start(None));
        let b = s.spawn(|| PrivateCluster::start(None));
        (
            a.join().unwrap().expect("first"),
            b.join().unwrap().expect("second"),
        )
    });
    assert_ne!(a.port(), b.port());
    assert_ne!(a.data_dir(), b.data_dir());
    for cluster in [&a, &b] {
        let port = query_string(&cluster.url("postgres"), "SHOW port").await;
        assert_eq!(port, cluster.port().to_string());
    }
    a.stop().unwrap();
    drop(b); // stopping on drop
}

#[tokio::test]
async fn a_persistent_cluster_is_reused() {
    let parent = tempfile::tempdir().unwrap();
    // The account PostgreSQL runs as (when this test runs as root) must reach the folder.
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data_dir = parent.path().join("pg");

    let first = PrivateCluster::start(Some(data_dir.clone())).expect("initialises");
    first.create_database("kept").await.unwrap();
    first.stop().unwrap();
    assert!(
        data_dir.join("PG_VERSION").exists(),
        "a persistent cluster is kept"
    );

    let second = PrivateCluster::start(Some(data_dir.clone())).expect("reuses");
    let names = query_string(
        &second.url("postgres"),
        "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database",
    )
    .await;
    assert!(names.split(',').any(|n| n == "kept"), "{names}");
    let busy = PrivateCluster::start(Some(data_dir.clone())).unwrap_err();
    assert!(
        matches!(busy, ClusterError::AlreadyRunning { .. }),
        "{busy}"
    );
    second.stop().unwrap();

    std::fs::write(parent.path().join("junk"), "x").unwrap();
    let junk = PrivateCluster::start(Some(parent.path().to_path_buf())).unwrap_err();
    assert!(matches!(junk, ClusterError::NotACluster(_)), "{junk}");
}

#[tokio::test]
async fn as_root_an_unreachable_folder_is_refused_clearly() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Only root switches accounts; CI runs as root and requires this test to run.
        return akbench_core::testkit::skip(
            "as_root_an_unreachable_folder_is_refused_clearly",
            "not root: run the tests as root to check the account switch",
        );
    }
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let err = PrivateCluster::start(Some(private.path().join("pg"))).unwrap_err();
    assert!(matches!(err, ClusterError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains("cannot traverse"), "{err}");
}

#[tokio::test]
async fn the_shared_cluster_gives_each_test_a_fresh_database() {
    let one = test_support::fresh_database().await;
    let two = test_support::fresh_database().await;
    assert_ne!(one, two);
    assert!(std::ptr::eq(test_support::shared(), test_support::shared()));
    let a = query_string(&one, "SELECT current_database()::text").await;
    let b = query_string(&two, "SELECT current_database()::text").await;
    assert_ne!(a, b);
}

/// A folder the PostgreSQL account (as root: `postgres`) can reach, with `pg` inside.
fn reachable_parent() -> (tempfile::TempDir, std::path::PathBuf) {
    let parent = tempfile::tempdir().unwrap();
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data_dir = parent.path().join("pg");
    (parent, data_dir)
}

/// The error of connecting to `url` (it must fail).
async fn refused(url: &str) -> String {
    match tokio_postgres::connect(url, NoTls).await {
        Ok(_) => panic!("{url} connected without the password"),
        Err(e) => format!("{e:?}"),
    }
}

#[tokio::test]
async fn connections_need_the_generated_password_kept_0600() {
    let (_parent, data_dir) = reachable_parent();
    let cluster = PrivateCluster::start(Some(data_dir.clone())).expect("initialises");
    let secret_file = cluster.secret_file();
    assert_eq!(secret_file, data_dir.join(secret::SECRET_FILE));
    let mode = std::fs::metadata(&secret_file)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the secret is private");
    let secret = std::fs::read_to_string(&secret_file).unwrap();
    assert_eq!(secret, cluster.password());
    assert!(secret.len() >= 32, "{secret}");

    // With the password: in. Without it (TCP or the unix socket) or with a wrong one: out.
    assert_eq!(
        query_string(&cluster.url("postgres"), "SELECT current_user::text").await,
        "postgres"
    );
    let port = cluster.port();
    let e = refused(&format!("postgres://postgres@127.0.0.1:{port}/postgres")).await;
    assert!(e.contains("password"), "{e}");
    refused(&format!(
        "postgres://postgres:wrong@127.0.0.1:{port}/postgres"
    ))
    .await;
    let socket = data_dir.display().to_string().replace('/', "%2F");
    refused(&format!("postgres://postgres@{socket}:{port}/postgres")).await;
    let hba = std::fs::read_to_string(data_dir.join("pg_hba.conf")).unwrap();
    assert!(
        !hba.lines()
            .any(|l| !l.starts_with('#') && l.contains("trust")),
        "{hba}"
    );
    assert_eq!(
        query_string(&cluster.url("postgres"), "SHOW password_encryption").await,
        "scram-sha-256"
    );
    cluster.stop().unwrap();
}

#[tokio::test]
async fn a_trust_cluster_of_an_older_version_is_given_a_password() {
    let (_parent, data_dir) = reachable_parent();
    let first = PrivateCluster::start(Some(data_dir.clone())).expect("initialises");
    first.create_database("kept").await.unwrap();
    first.stop().unwrap();
    // What older versions left: every method `trust`, no secret file.
    let hba = data_dir.join("pg_hba.conf");
    let text = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, text.replace("scram-sha-256", "trust")).unwrap();
    std::fs::remove_file(data_dir.join(secret::SECRET_FILE)).unwrap();

    let second = PrivateCluster::start(Some(data_dir.clone())).expect("migrates");
    let mode = std::fs::metadata(second.secret_file())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let names = query_string(
        &second.url("postgres"),
        "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database",
    )
    .await;
    assert!(names.split(',').any(|n| n == "kept"), "{names}");
    refused(&format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        second.port()
    ))
    .await;
    second.stop().unwrap();
}

#[tokio::test]
async fn a_stale_postmaster_pid_or_an_orphaned_server_does_not_block_the_next_start() {
    let (_parent, data_dir) = reachable_parent();
    let first = PrivateCluster::start(Some(data_dir.clone())).expect("initialises");
    first.stop().unwrap();

    // A killed run's postmaster.pid whose pid is now another (live, non-PostgreSQL) process,
    // and one whose pid is dead.
    let pid_file = data_dir.join("postmaster.pid");
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    dead.wait().unwrap();
    for pid in [sleeper.id(), dead.id()] {
        std::fs::write(&pid_file, format!("{pid}\n{}\n", data_dir.display())).unwrap();
        let c = PrivateCluster::start(Some(data_dir.clone())).expect("recovers");
        assert_eq!(
            query_string(&c.url("postgres"), "SELECT 'up'::text").await,
            "up"
        );
        c.stop().unwrap();
    }
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();

    // A server whose akbench was killed (it never stopped it): the next start stops it.
    let orphaned = PrivateCluster::start(Some(data_dir.clone())).expect("starts");
    let orphan_pid = stale::postmaster_pid(&data_dir).expect("running");
    std::mem::forget(orphaned); // no stop, like a SIGKILL
                                // Its owner is gone: a dead pid in the owner file.
    std::fs::write(
        data_dir.join(stale::OWNER_FILE),
        format!("{} 1 {orphan_pid}\n", dead.id()),
    )
    .unwrap();
    let next = PrivateCluster::start(Some(data_dir.clone())).expect("stops the orphan");
    assert!(!stale::runs(orphan_pid), "the orphaned postmaster is gone");
    let pid = stale::postmaster_pid(&data_dir).expect("running");
    assert_ne!(pid, orphan_pid);

    // A server whose owner lives: refused, naming the folder and the pid.
    let err = PrivateCluster::start(Some(data_dir.clone())).unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, ClusterError::AlreadyRunning { pid: p, .. } if p == pid),
        "{message}"
    );
    assert!(
        message.contains(&data_dir.display().to_string()),
        "{message}"
    );
    assert!(message.contains(&format!("pid {pid}")), "{message}");
    next.stop().unwrap();
}
