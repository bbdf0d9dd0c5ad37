//! PostgreSQL over TLS: a private cluster restarted with `ssl = on`, a test certificate from
//! `devcerts` and `hostssl` only, and the coordinator's store connecting with each sslmode.

use akbench_coordinator::devcerts::{Ca, Validity};
use akbench_coordinator::pgcluster::PrivateCluster;
use akbench_coordinator::server::{serve, Config};
use akbench_coordinator::store::Store;

async fn count(store: &Store) -> i64 {
    let client = store.client().await.expect("a pooled connection");
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl WHERE ssl AND pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("query")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_reaches_a_postgresql_that_requires_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("pg test CA", Validity::days(1)).unwrap();
    let server = ca.server(&["127.0.0.1".into()], Validity::days(1)).unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.pem().cert).unwrap();
    let other = Ca::new("other CA", Validity::days(1)).unwrap();
    let other_file = dir.path().join("other.pem");
    std::fs::write(&other_file, &other.pem().cert).unwrap();

    let mut cluster = PrivateCluster::start(None).expect("a private cluster");
    cluster
        .require_tls(&server.cert, &server.key)
        .expect("ssl = on");
    let url = cluster.url("postgres");

    // Plaintext is refused by the server (hostssl only), so what works below is TLS.
    let plain = tokio_postgres::connect(&url, tokio_postgres::NoTls).await;
    assert!(plain.is_err(), "the server accepted plaintext");
    assert!(Store::connect(&format!("{url}?sslmode=disable"))
        .await
        .is_err());

    // require: encrypted, the certificate not checked.
    let store = Store::connect(&format!("{url}?sslmode=require"))
        .await
        .expect("require");
    assert_eq!(count(&store).await, 1, "the session is not encrypted");
    // The default (prefer) takes TLS when the server offers it.
    let store = Store::connect(&url).await.expect("prefer");
    assert_eq!(count(&store).await, 1);

    // verify-full: the CA and the host name (127.0.0.1 is in the certificate).
    let ca_path = ca_file.display().to_string();
    let full = format!("{url}?sslmode=verify-full&sslrootcert={ca_path}");
    let store = Store::connect(&full).await.expect("verify-full");
    assert_eq!(count(&store).await, 1);
    // ... and the coordinator starts on it (migrations over TLS).
    let handle = serve(Config::local(full.clone()), async {})
        .await
        .expect("serves");
    handle.wait().await.expect("stops");

    // Another CA: refused; a name not in the certificate: refused by verify-full only.
    let wrong_ca = format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        other_file.display()
    );
    let e = Store::connect(&wrong_ca).await.unwrap_err().to_string();
    assert!(e.contains("certificate") || e.contains("Unknown"), "{e}");
    let by_name = url.replace("127.0.0.1", "localhost");
    let e = Store::connect(&format!(
        "{by_name}?sslmode=verify-full&sslrootcert={ca_path}"
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.to_lowercase().contains("name") || e.contains("certificate"),
        "{e}"
    );
    Store::connect(&format!(
        "{by_name}?sslmode=verify-ca&sslrootcert={ca_path}"
    ))
    .await
    .expect("verify-ca ignores the name");

    // A bad sslmode is a usage error naming the values.
    let e = Store::connect(&format!("{url}?sslmode=strict"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("verify-full"), "{e}");
    cluster.stop().unwrap();
}
