//! TLS to PostgreSQL with libpq's sslmode values, against a server with its own CA; the
//! test user may connect over TLS only, so a relay that streams is a relay that encrypts.

mod common;

use common::*;
use std::time::Duration;

const SLOT: &str = "outbox_relay";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_streams_over_tls_and_refuses_an_untrusted_server() {
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute(
            "CREATE ROLE tlsrelay LOGIN REPLICATION; GRANT SELECT ON outbox TO tlsrelay;
             CREATE PUBLICATION outbox_relay FOR TABLE outbox WITH (publish = 'insert');",
        )
        .await
        .unwrap();
    let ca = stack.pg.enable_tls_for("tlsrelay").await.unwrap();
    let other_ca = stack.pg.other_ca().unwrap();
    let port = stack.pg.port();
    let spawn = |url: String| stack.spawn_relay_as(&url, &[], &[]);

    // Without TLS the server refuses this user: a fatal error that says why.
    let mut plain = spawn(format!(
        "postgres://tlsrelay@127.0.0.1:{port}/postgres?sslmode=disable"
    ));
    let status = plain.wait_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{}", plain.log());
    assert!(plain.log().contains("no encryption"), "{}", plain.log());

    // A CA that did not sign the server's certificate: refused, fatal, not retried forever;
    // with sslmode=require too, as libpq does once sslrootcert names a file (verify-ca).
    for mode in ["verify-full", "require"] {
        let mut untrusted = spawn(format!(
            "postgres://tlsrelay@localhost:{port}/postgres?sslmode={mode}&sslrootcert={}",
            other_ca.display()
        ));
        let status = untrusted.wait_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(1),
            "{mode}: {}",
            untrusted.log()
        );
        assert!(
            untrusted.log().contains("certificate"),
            "{mode}: {}",
            untrusted.log()
        );
    }

    // verify-full with the right CA: streams (SQL and replication connection both over TLS).
    let mut n = 0;
    for url in [
        format!(
            "postgres://tlsrelay@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={}",
            ca.display()
        ),
        format!(
            "postgres://tlsrelay@127.0.0.1:{port}/postgres?sslmode=verify-ca&sslrootcert={}",
            ca.display()
        ),
        format!("postgres://tlsrelay@127.0.0.1:{port}/postgres?sslmode=require"),
        // require with the right CA: the chain is verified (not the host name, as libpq).
        format!(
            "postgres://tlsrelay@127.0.0.1:{port}/postgres?sslmode=require&sslrootcert={}",
            ca.display()
        ),
    ] {
        let mut relay = spawn(url.clone());
        stack.wait_for_slot(SLOT, &relay).await;
        insert_events(&stack.db, n, 5, 5, 3).await.unwrap();
        n += 5;
        stack
            .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
            .await;
        assert_eq!(
            relay
                .terminate(Duration::from_secs(30))
                .unwrap()
                .and_then(|s| s.code()),
            Some(0),
            "{url}:\n{}",
            relay.log()
        );
    }
    let (lost, _) = lost_and_duplicated(&stack, n).await;
    assert_eq!(lost, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_authenticates_the_relay() {
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute(
            "CREATE ROLE certrelay LOGIN REPLICATION; GRANT SELECT ON outbox TO certrelay;
             CREATE PUBLICATION outbox_relay FOR TABLE outbox WITH (publish = 'insert');",
        )
        .await
        .unwrap();
    let ca = stack.pg.enable_tls_for("nobody").await.unwrap();
    let (cert, key) = stack.pg.require_client_cert_for("certrelay").await.unwrap();
    let port = stack.pg.port();
    let spawn = |url: String| stack.spawn_relay_as(&url, &[], &[]);
    let base = format!(
        "postgres://certrelay@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={}",
        ca.display()
    );

    let mut without = spawn(base.clone());
    let status = without.wait_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "no client certificate, no entry: {}",
        without.log()
    );

    let relay = spawn(format!(
        "{base}&sslcert={}&sslkey={}",
        cert.display(),
        key.display()
    ));
    stack.wait_for_slot(SLOT, &relay).await;
    insert_events(&stack.db, 0, 5, 5, 3).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let (lost, _) = lost_and_duplicated(&stack, 5).await;
    assert_eq!(lost, 0);
}
