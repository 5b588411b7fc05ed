//! Ways to lose events silently that real deployments hit, each refused or handled.

mod common;

use common::*;
use outbox_relay_testkit::{Lsn, PgCluster, RelayProcess, Storage};
use std::time::Duration;

const SLOT: &str = "outbox_relay";

/// `run` refuses a publication that would let the slot move past events it never sends,
/// exits non-zero with the SQL that fixes it, and `check` says the same.
async fn refused_publication(ddl: &str, expected: &str) {
    let stack = Stack::start().await;
    stack.db.batch_execute(ddl).await.unwrap();
    let (succeeded, log) = stack.run_until_exit(&["--publication", "existing"]);
    assert!(!succeeded, "{log}");
    assert!(log.contains(expected), "{log}");
    assert!(
        log.contains("ALTER PUBLICATION \"existing\""),
        "the fix is printed:\n{log}"
    );
    assert!(
        stack.confirmed_flush_lsn(SLOT).await.is_none(),
        "no slot was created to move past events"
    );
    let (code, stdout) = stack.check(&["--publication", "existing"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("FAIL {expected}")) || stdout.contains(expected),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publication_without_inserts_is_refused_with_the_fix() {
    refused_publication(
        "CREATE PUBLICATION existing FOR TABLE outbox WITH (publish = 'update, delete')",
        "does not publish INSERTs",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publication_with_a_row_filter_is_refused_with_the_fix() {
    refused_publication(
        "CREATE PUBLICATION existing FOR TABLE outbox WHERE (aggregate_type = 'Order')",
        "publishes only the rows of public.outbox WHERE",
    )
    .await;
}

/// A slot invalidated by max_slot_wal_keep_size has lost the WAL of events it never
/// streamed: the relay stops with the cause and the choices instead of retrying forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_invalidated_by_max_slot_wal_keep_size_stops_the_relay_with_the_choices() {
    let stack = Stack::start_with_postgres_config(
        Storage::Sqlite,
        OUTBOX_DDL,
        "max_slot_wal_keep_size = '1MB'\nmin_wal_size = '32MB'\nmax_wal_size = '64MB'",
    )
    .await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    relay.terminate(Duration::from_secs(30)).unwrap();
    // Events written while no relay runs, then WAL past the slot's allowance is recycled.
    for round in 0..6 {
        insert_events(&stack.db, round * 2000, 2000, 100, 10)
            .await
            .unwrap();
        stack
            .db
            .batch_execute("SELECT pg_switch_wal(); CHECKPOINT;")
            .await
            .unwrap();
    }
    let status: String = stack
        .db
        .query_one(
            "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1",
            &[&SLOT],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "lost", "the test needs an invalidated slot");
    let (succeeded, log) = stack.run_until_exit(&[]);
    assert!(!succeeded, "{log}");
    assert!(log.contains("was invalidated (wal_removed)"), "{log}");
    assert!(
        log.contains("pg_drop_replication_slot") && log.contains("--on-missing-slot reread"),
        "the choices are named:\n{log}"
    );
    assert!(
        log.contains("max_slot_wal_keep_size"),
        "the fix for this reason:\n{log}"
    );
    assert!(!log.contains("reconnecting"), "never retried:\n{log}");

    // The user chooses to read the outbox again: the slot is made anew and every event
    // still in the outbox arrives (the ones before the gap come again).
    let relay = stack.spawn_relay(&["--on-missing-slot", "reread"]);
    relay
        .wait_for_log("snapshot complete", Duration::from_secs(120))
        .await;
    stack
        .wait_delivered(SLOT, Duration::from_secs(120), Some(&relay))
        .await;
    let (lost, _) = lost_and_duplicated(&stack, 12_000).await;
    assert_eq!(lost, 0, "{}", relay.log());
    assert!(
        relay.log().contains("--on-missing-slot reread"),
        "{}",
        relay.log()
    );
}

/// A failover to a standby that carries the slot (here a disk copy of the primary, promoted
/// to a new timeline): the old primary had gone on, and the relay had confirmed positions
/// the new timeline never reached. The relay notices the new timeline and resumes from the
/// slot's own position, so events written after the failover — at positions below what it
/// had confirmed before — are not skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_the_relay_resumes_from_the_new_servers_slot() {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    let log = || relay.log();
    insert_events(&stack.db, 0, 100, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    // The standby's disk is the primary's at this point.
    stack.pg.stop().unwrap();
    let standby = stack.pg.copy_stopped().unwrap();
    stack.pg.start_again().unwrap();
    // The old primary goes on: these events reach Kafka and the relay confirms past them,
    // but the standby never gets them.
    let primary = stack.pg.connect().await.unwrap();
    insert_events(&primary, 100, 400, 10, 10).await.unwrap();
    let confirmed_on_old =
        outbox_relay_testkit::wait_delivered(&primary, SLOT, Duration::from_secs(90), log).await;
    drop(primary);
    stack.pg.stop().unwrap();
    standby.start_promoted().unwrap();
    let db = standby.connect().await.unwrap();
    let slot_on_new = outbox_relay_testkit::confirmed_flush_lsn(&db, SLOT)
        .await
        .unwrap();
    assert!(
        slot_on_new < confirmed_on_old,
        "the new server's slot is behind"
    );
    insert_events(&db, 500, 100, 10, 10).await.unwrap();
    let written = outbox_relay_testkit::current_wal_lsn(&db).await;
    assert!(
        written < confirmed_on_old,
        "the new timeline's events lie below the position confirmed on the old one ({written} vs {confirmed_on_old})"
    );
    outbox_relay_testkit::wait_delivered(&db, SLOT, Duration::from_secs(90), log).await;
    let stack = Stack { db, ..stack };
    let (lost, _) = lost_and_duplicated(&stack, 600).await;
    assert_eq!(
        lost,
        0,
        "events written after the failover were skipped:\n{}",
        relay.log()
    );
    let log = relay.log();
    let after_failover = &log[log
        .find("timeline changed")
        .unwrap_or_else(|| panic!("{log}"))..];
    assert!(
        after_failover.contains(&format!("start_lsn={slot_on_new}")),
        "the session after the failover starts at the new server's slot ({slot_on_new}):\n{log}"
    );
    drop(stack);
    drop(standby);
}

/// A slot the relay streamed from is dropped while it is stopped (a DBA, a failover that
/// did not carry it): the relay does not quietly start a new slot at the current position,
/// skipping what was written meanwhile. It stops and names the choices; `reread` relays
/// every row still in the outbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_slot_is_noticed_and_the_user_chooses_what_happens() {
    let stack = Stack::start().await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_events(&stack.db, 0, 100, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    relay.terminate(Duration::from_secs(30)).unwrap();
    stack
        .db
        .batch_execute(&format!("SELECT pg_drop_replication_slot('{SLOT}')"))
        .await
        .unwrap();
    insert_events(&stack.db, 100, 100, 10, 10).await.unwrap();

    let (succeeded, log) = stack.run_until_exit(&[]);
    assert!(!succeeded, "{log}");
    assert!(
        log.contains("replication slot outbox_relay is gone"),
        "{log}"
    );
    assert!(
        log.contains("--on-missing-slot reread") && log.contains("--on-missing-slot accept-gap"),
        "{log}"
    );
    assert!(
        stack.confirmed_flush_lsn(SLOT).await.is_none(),
        "no slot was created"
    );
    let (code, stdout) = stack.check(&[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL slot outbox_relay is gone"),
        "{stdout}"
    );

    let relay = stack.spawn_relay(&["--on-missing-slot", "reread"]);
    stack.wait_for_slot(SLOT, &relay).await;
    insert_events(&stack.db, 200, 50, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let (lost, duplicated) = lost_and_duplicated(&stack, 250).await;
    assert_eq!(
        lost,
        0,
        "the rows written while the slot was gone are re-read:\n{}",
        relay.log()
    );
    assert_eq!(
        duplicated, 100,
        "the rows relayed before come again (documented)"
    );
}

/// The replication connection dies without closing (a lost network path): no error, no
/// data. After a silence the relay checks that the server still streams to it, finds it
/// does not answer, reconnects, ends its own stale walsender (which would hold the slot
/// until the server's wal_sender_timeout) and streams on — well before TCP or the server
/// would notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_dead_replication_connection_is_noticed_and_replaced() {
    let stack = Stack::start().await;
    let target = format!("127.0.0.1:{}", stack.pg.port()).parse().unwrap();
    let proxy = outbox_relay_testkit::proxy::TcpProxy::start(target)
        .await
        .unwrap();
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port());
    let relay = stack.spawn_relay_as(&url, &[], &[]);
    stack.wait_for_slot(SLOT, &relay).await;
    insert_events(&stack.db, 0, 100, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;

    proxy.stall_open_connections();
    let stalled_at = std::time::Instant::now();
    insert_events(&stack.db, 100, 100, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(90), Some(&relay))
        .await;
    let took = stalled_at.elapsed();
    eprintln!("a half-open replication connection was replaced and its events delivered {took:?} after the stall");
    // The test cluster's wal_sender_timeout is 60 s: the relay acts well before the server.
    assert!(
        took < Duration::from_secs(40),
        "took {took:?}:\n{}",
        relay.log()
    );
    let log = relay.log();
    assert!(log.contains("presumed dead"), "{log}");
    assert!(
        log.contains("previous replication connection still holds the slot"),
        "{log}"
    );
    let (lost, _) = lost_and_duplicated(&stack, 200).await;
    assert_eq!(lost, 0);
}

/// A file-level copy of `server` (a VM snapshot, a disk backup) is taken; `server` goes on
/// with events `first..first + count`, which the relay delivers and confirms; then the copy
/// is started in its place, without promotion: same port, same system identifier, same
/// timeline, and WAL that ends before what the relay confirmed. Returns the restored server
/// and the position the relay had confirmed.
async fn restore_an_earlier_copy(
    server: &PgCluster,
    first: u64,
    count: u64,
    relay: &RelayProcess,
) -> (PgCluster, Lsn) {
    server.stop().unwrap();
    let copy = server.copy_stopped().unwrap();
    server.start_again().unwrap();
    let db = server.connect().await.unwrap();
    let identity = |db: tokio_postgres::Client| async move {
        let row = db
            .query_one(
                "SELECT (SELECT system_identifier::text FROM pg_control_system()), \
                        (SELECT timeline_id FROM pg_control_checkpoint())",
                &[],
            )
            .await
            .unwrap();
        (row.get::<_, String>(0), row.get::<_, i32>(1))
    };
    insert_events(&db, first, count, 10, 10).await.unwrap();
    let confirmed =
        outbox_relay_testkit::wait_delivered(&db, SLOT, Duration::from_secs(90), || relay.log())
            .await;
    let before = identity(db).await;
    server.stop().unwrap();
    copy.start_again().unwrap();
    let restored = copy.connect().await.unwrap();
    assert_eq!(
        identity(restored).await,
        before,
        "the restored server keeps its system identifier and timeline"
    );
    (copy, confirmed)
}

/// A server that went back in time: restored from a file-level copy taken before commits the
/// relay confirmed, with the same system identifier and timeline. The relay would resume
/// from what it confirmed, and PostgreSQL would skip every commit the restored server makes
/// below that position. It stops instead, naming what happened and the choices; a relay
/// running with `--on-server-rewind reread` resumes from the server's slot and relays them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restored_to_an_earlier_copy_stops_the_relay_instead_of_skipping() {
    let stack = Stack::start().await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_events(&stack.db, 0, 100, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let (restored, confirmed) = restore_an_earlier_copy(&stack.pg, 100, 300, &relay).await;
    let db = restored.connect().await.unwrap();
    insert_events(&db, 400, 100, 10, 10).await.unwrap();
    let written = outbox_relay_testkit::current_wal_lsn(&db).await;
    assert!(
        written < confirmed,
        "the restored server's new events lie below what the relay confirmed ({written} vs {confirmed})"
    );
    let status = relay
        .wait_timeout(Duration::from_secs(60))
        .unwrap()
        .unwrap_or_else(|| panic!("the relay went on:\n{}", relay.log()));
    assert!(!status.success(), "{}", relay.log());
    let log = relay.log();
    assert!(
        log.contains("PostgreSQL went back in time") && log.contains("but this relay confirmed"),
        "{log}"
    );
    assert!(
        log.contains("--on-server-rewind reread") && log.contains("--on-server-rewind accept-gap"),
        "the choices are named:\n{log}"
    );

    // The choice: a relay with --on-server-rewind reread relays what the server has after its
    // slot's position. Restored once more under it, it does not stop and skips nothing.
    let relay = stack.spawn_relay(&["--on-server-rewind", "reread"]);
    outbox_relay_testkit::wait_delivered(&db, SLOT, Duration::from_secs(90), || relay.log()).await;
    drop(db);
    let (again, confirmed) = restore_an_earlier_copy(&restored, 500, 300, &relay).await;
    let db = again.connect().await.unwrap();
    insert_events(&db, 800, 100, 10, 10).await.unwrap();
    assert!(outbox_relay_testkit::current_wal_lsn(&db).await < confirmed);
    outbox_relay_testkit::wait_delivered(&db, SLOT, Duration::from_secs(90), || relay.log()).await;
    let (lost, _) = lost_and_duplicated(&stack, 900).await;
    assert_eq!(
        lost,
        0,
        "events written on the restored servers were skipped:\n{}",
        relay.log()
    );
    assert!(
        relay.log().contains("(--on-server-rewind reread)"),
        "{}",
        relay.log()
    );
    drop(relay);
    drop(again);
    drop(restored);
}
