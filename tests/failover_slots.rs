//! `--slot-failover` (Debezium's `slot.failover`): the slot is a failover slot, synchronized to
//! standbys (PostgreSQL 17+): created so, or an existing slot altered; refused with the reason
//! on an older server.

mod common;

use common::*;
use outbox_relay_testkit::http::{get as http_get, metric, metrics_address};
use outbox_relay_testkit::{Broker, PgCluster, Storage};
use std::time::Duration;

const SLOT: &str = "outbox_relay";

async fn stack_on(major: u32) -> Stack {
    let pg = PgCluster::start_version(major, "")
        .unwrap_or_else(|e| panic!("PostgreSQL {major} for this test: {e:#}"));
    let broker = Broker::start(Storage::Sqlite)
        .unwrap_or_else(|e| panic!("cannot start Apache Kafka for this test: {e:#}"));
    Stack::of(pg, broker).await
}

async fn is_failover_slot(stack: &Stack) -> bool {
    stack
        .db
        .query_one(
            "SELECT failover FROM pg_replication_slots WHERE slot_name = $1",
            &[&SLOT],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_slot_is_created_or_an_existing_slot_altered_on_postgresql_17() {
    let stack = stack_on(17).await;
    // A slot made without the flag (as an earlier deployment left it) ...
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_events(&stack.db, 0, 20, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    relay.terminate(Duration::from_secs(20)).unwrap();
    assert!(!is_failover_slot(&stack).await);
    // ... becomes a failover slot, and the stream goes on from where it was.
    let relay = stack.spawn_relay(&["--slot-failover"]);
    relay
        .wait_for_log("now a failover slot", Duration::from_secs(30))
        .await;
    insert_events(&stack.db, 20, 20, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    assert!(is_failover_slot(&stack).await, "{}", relay.log());
    let (_, body) = http_get(&metrics_address(&relay), "/metrics");
    assert_eq!(metric(&body, "outbox_relay_slot_failover"), 1.0);
    let (lost, duplicated) = lost_and_duplicated(&stack, 40).await;
    assert_eq!((lost, duplicated), (0, 0));
    drop(relay);

    // A new slot is created as a failover slot.
    stack
        .db
        .batch_execute("SELECT pg_drop_replication_slot('fresh') FROM pg_replication_slots WHERE slot_name = 'fresh'")
        .await
        .unwrap();
    let relay = stack
        .spawn_relay_and_wait_for_slot("fresh", &["--slot", "fresh", "--slot-failover"])
        .await;
    let failover: bool = stack
        .db
        .query_one(
            "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fresh'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(failover, "{}", relay.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_failover_is_refused_with_the_reason_before_postgresql_17() {
    let stack = stack_on(16).await;
    let (succeeded, log) = stack.run_until_exit(&["--slot-failover"]);
    assert!(!succeeded, "{log}");
    assert!(
        log.contains("slot-failover: PostgreSQL 16") && log.contains("PostgreSQL 17"),
        "{log}"
    );
    assert!(!log.contains("reconnecting"), "never retried:\n{log}");
}
