//! Each reason PostgreSQL invalidates a slot for, on the server that has it: the
//! relay stops with the reason and the fix that matches it, never retrying, and
//! `--on-missing-slot reread` makes the slot again. (`wal_removed`: tests/hardening.rs.)
//! - `idle_timeout` (PostgreSQL 18's `idle_replication_slot_timeout`);
//! - `rows_removed`: a slot on a standby whose primary vacuumed catalog rows it needed
//!   (no `hot_standby_feedback`);
//! - `wal_level_insufficient`: a slot on a standby whose primary's `wal_level` was lowered
//!   (the relay stops on the primary's `wal_level` itself, checked first).

mod common;

use common::*;
use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::path::Path;
use std::time::{Duration, Instant};

const SLOT: &str = "outbox_relay";

/// Waits until `db` reports `slot` invalidated for `reason`.
async fn wait_invalidated(db: &tokio_postgres::Client, reason: &str, log: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found: Option<String> = db
            .query_opt(
                "SELECT invalidation_reason FROM pg_replication_slots WHERE slot_name = $1",
                &[&SLOT],
            )
            .await
            .unwrap()
            .and_then(|r| r.get(0));
        if found.as_deref() == Some(reason) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "slot not invalidated for {reason} (found {found:?}):\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Runs the relay until it exits (it must, within a minute): whether it succeeded, and its log.
fn run_until_exit(stack: &Stack, url: &str, extra: &[&str]) -> (bool, String) {
    let mut relay =
        RelayProcess::spawn(Path::new(RELAY), &stack.relay_args_as(url, extra), &[]).unwrap();
    let status = relay.wait_timeout(Duration::from_secs(60)).unwrap();
    let log = relay.log();
    let status = status.unwrap_or_else(|| panic!("the relay did not stop:\n{log}"));
    (status.success(), log)
}

fn assert_stops_with(log: &str, reason: &str, fix: &str) {
    assert!(
        log.contains(&format!("was invalidated ({reason})")),
        "the reason:\n{log}"
    );
    assert!(log.contains(fix), "the fix for {reason} ({fix}):\n{log}");
    assert!(
        log.contains("--on-missing-slot reread"),
        "the choices:\n{log}"
    );
    assert!(!log.contains("reconnecting"), "never retried:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timeout_on_postgresql_18() {
    let pg = PgCluster::start_version(18, "idle_replication_slot_timeout = '1s'")
        .unwrap_or_else(|e| panic!("PostgreSQL 18: {e:#}"));
    let broker = Broker::start(Storage::Sqlite).unwrap_or_else(|e| panic!("Apache Kafka: {e:#}"));
    let stack = Stack::of(pg, broker).await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    relay.terminate(Duration::from_secs(30)).unwrap();
    // Idle past the timeout; a checkpoint invalidates it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stack.db.batch_execute("CHECKPOINT").await.unwrap();
    wait_invalidated(&stack.db, "idle_timeout", || stack.pg.log()).await;
    let (ok, log) = run_until_exit(&stack, &stack.pg.url(), &[]);
    assert!(!ok, "{log}");
    assert_stops_with(&log, "idle_timeout", "idle_replication_slot_timeout");
    // The user's choice: the slot made again, the outbox read again.
    insert_events(&stack.db, 0, 20, 10, 5).await.unwrap();
    let relay = stack.spawn_relay(&["--on-missing-slot", "reread"]);
    relay
        .wait_for_log("snapshot complete", Duration::from_secs(60))
        .await;
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    assert_eq!(
        lost_and_duplicated(&stack, 20).await.0,
        0,
        "{}",
        relay.log()
    );
}

/// A PostgreSQL 17 primary, a standby (`standby_extra` in its configuration) and the relay
/// capturing from the standby until its slot exists; the relay is stopped then.
async fn standby_slot(standby_extra: &str) -> (Stack, PgCluster, tokio_postgres::Client) {
    let primary =
        PgCluster::start_version(17, "").unwrap_or_else(|e| panic!("PostgreSQL 17: {e:#}"));
    let standby = primary
        .start_standby("standby1", standby_extra)
        .unwrap_or_else(|e| panic!("a standby: {e:#}\n{}", primary.log()));
    let broker = Broker::start(Storage::Sqlite).unwrap_or_else(|e| panic!("Apache Kafka: {e:#}"));
    let stack = Stack::of(primary, broker).await;
    let standby_db = standby.connect().await.unwrap();
    let mut relay = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args_as(&standby.url(), &["--primary-url", &stack.pg.url()]),
        &[],
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let active: i64 = standby_db
            .query_one(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active",
                &[&SLOT],
            )
            .await
            .unwrap()
            .get(0);
        if active == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no slot on the standby:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    relay.terminate(Duration::from_secs(30)).unwrap();
    (stack, standby, standby_db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_removed_on_a_standby_without_hot_standby_feedback() {
    let (stack, standby, standby_db) = standby_slot("hot_standby_feedback = off").await;
    // Catalog rows the slot still needs, removed by the primary's vacuum.
    for statement in [
        "CREATE TABLE junk (a int)",
        "DROP TABLE junk",
        "VACUUM pg_class",
        "VACUUM pg_attribute",
        "VACUUM pg_type",
    ] {
        stack.db.batch_execute(statement).await.unwrap();
    }
    wait_invalidated(&standby_db, "rows_removed", || standby.log()).await;
    let (ok, log) = run_until_exit(&stack, &standby.url(), &["--primary-url", &stack.pg.url()]);
    assert!(!ok, "{log}");
    assert_stops_with(&log, "rows_removed", "hot_standby_feedback");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_level_insufficient_on_a_standby_whose_primary_lowered_it() {
    let (stack, standby, standby_db) = standby_slot("").await;
    stack
        .db
        .batch_execute("ALTER SYSTEM SET wal_level = replica")
        .await
        .unwrap();
    stack.pg.restart().unwrap();
    wait_invalidated(&standby_db, "wal_level_insufficient", || standby.log()).await;
    // The primary's wal_level is checked first (the publication is made there): the relay
    // stops on the cause itself, with its fix.
    let (ok, log) = run_until_exit(&stack, &standby.url(), &["--primary-url", &stack.pg.url()]);
    assert!(!ok, "{log}");
    assert!(
        log.contains("wal_level = replica") && log.contains("ALTER SYSTEM SET wal_level = logical"),
        "{log}"
    );
    assert!(!log.contains("reconnecting"), "never retried:\n{log}");
}
