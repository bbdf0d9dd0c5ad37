//! Private clusters from the system's PostgreSQL binaries: start, connect, create databases,
//! stop; parallel starts; persistent reuse; the shared per-binary test cluster.

use std::os::unix::fs::PermissionsExt;

use akbench_coordinator::pgcluster::{test_support, ClusterError, PrivateCluster};
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
    assert!(matches!(busy, ClusterError::AlreadyRunning(_)), "{busy}");
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
