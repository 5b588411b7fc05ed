//! Secrets from files and the environment, with real password (SCRAM) authentication; never
//! printed in logs, errors or --help.

mod common;

use common::*;
use std::time::Duration;

const SLOT: &str = "outbox_relay";
const PASSWORD: &str = "Fil3-s3cret:@/pw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_comes_from_a_file_or_the_environment_and_is_never_printed() {
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute(&format!(
            "CREATE ROLE pwrelay LOGIN REPLICATION PASSWORD '{PASSWORD}';
             GRANT SELECT ON outbox TO pwrelay;
             CREATE PUBLICATION outbox_relay FOR TABLE outbox WITH (publish = 'insert');"
        ))
        .await
        .unwrap();
    stack.pg.require_password_for("pwrelay").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pg-password");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let url = format!("postgres://pwrelay@127.0.0.1:{}/postgres", stack.pg.port());

    // Wrong password from the environment: a fatal error that says so, without the secret.
    let mut wrong = stack.spawn_relay_as(
        &url,
        &[],
        &[("OUTBOX_RELAY_POSTGRES_PASSWORD", "not-the-password")],
    );
    let status = wrong.wait_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "log:\n{}",
        wrong.log()
    );
    assert!(
        wrong.log().contains("password authentication failed"),
        "{}",
        wrong.log()
    );
    assert!(!wrong.log().contains("not-the-password"));

    // The right one from a file: streams.
    let relay = stack.spawn_relay_as(
        &url,
        &["--postgres-password-file", file.to_str().unwrap()],
        &[],
    );
    stack.wait_for_slot(SLOT, &relay).await;
    insert_events(&stack.db, 0, 10, 5, 3).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let (lost, _) = lost_and_duplicated(&stack, 10).await;
    assert_eq!(lost, 0);
    assert!(
        !relay.log().contains(PASSWORD),
        "the password appeared in the log"
    );

    let help = std::process::Command::new(RELAY)
        .args(["run", "--help"])
        .env("OUTBOX_RELAY_POSTGRES_PASSWORD", PASSWORD)
        .env(
            "OUTBOX_RELAY_POSTGRES_URL",
            format!("postgres://u:{PASSWORD}@h/d"),
        )
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains(PASSWORD));
}
