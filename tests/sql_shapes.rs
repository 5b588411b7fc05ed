//! The outbox shapes and cleanup strategies in sql/: the relay still relays every event.

mod common;

use common::*;
use outbox_relay_testkit::Storage;
use std::time::Duration;

const SLOT: &str = "outbox_relay";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_events_is_routed_by_its_topic_column() {
    let stack =
        Stack::start_with_schema(Storage::Sqlite, include_str!("../sql/outbox_events.sql")).await;
    let relay = stack
        .spawn_relay_and_wait_for_slot(
            SLOT,
            &[
                "--table",
                "public.outbox_events",
                "--route-by-column",
                "topic",
                "--topic-template",
                "${routedByValue}",
            ],
        )
        .await;
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox_events (topic, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('orders', 'order', 'o-1', 'OrderCreated', '{\"n\": 1}'),
               ('billing.invoices', 'invoice', 'i-1', 'InvoiceIssued', '{\"n\": 2}'),
               ('orders', 'order', 'o-1', 'OrderShipped', '{\"n\": 3}');",
        )
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let orders: Vec<_> = stack
        .read_topic("orders")
        .await
        .iter()
        .map(|r| r.value_str().unwrap().to_owned())
        .collect();
    assert_eq!(orders, [r#"{"n": 1}"#, r#"{"n": 3}"#]);
    let invoices = stack.read_topic("billing.invoices").await;
    assert_eq!(invoices.len(), 1);
    assert_eq!(invoices[0].key_str(), Some("i-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_deleted_in_their_own_transaction_are_still_relayed() {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    for n in 0..50u64 {
        stack
            .db
            .batch_execute(&format!(
                "BEGIN;
                 INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
                   VALUES ('{id}', 'Order', 'o-{n}', 'E{n}', '{{}}');
                 DELETE FROM outbox WHERE id = '{id}';
                 COMMIT;",
                id = event_uuid(n)
            ))
            .await
            .unwrap();
    }
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let count: i64 = stack
        .db
        .query_one("SELECT count(*) FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 0, "the table stays empty");
    assert_eq!(stack.read_topic("Order.events").await.len(), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_outbox_with_dropped_partitions_is_relayed_whole() {
    let stack = Stack::start_with_schema(
        Storage::Sqlite,
        include_str!("../sql/outbox_partitioned.sql"),
    )
    .await;
    stack
        .db
        .batch_execute(
            "CREATE TABLE outbox_2026_11_20 PARTITION OF outbox FOR VALUES FROM ('2026-11-20') TO ('2026-11-21');
             CREATE TABLE outbox_2026_11_21 PARTITION OF outbox FOR VALUES FROM ('2026-11-21') TO ('2026-11-22');",
        )
        .await
        .unwrap();
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    let insert = |n: u64, day: &str| {
        format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, created_at)
             VALUES ('{}', 'Order', 'o-1', 'E{n}', '{{}}', '{day}')",
            event_uuid(n)
        )
    };
    stack
        .db
        .batch_execute(&insert(1, "2026-11-20 10:00+00"))
        .await
        .unwrap();
    stack
        .db
        .batch_execute(&insert(2, "2026-11-21 10:00+00"))
        .await
        .unwrap();
    stack
        .db
        .batch_execute(&insert(3, "2030-01-01 10:00+00"))
        .await
        .unwrap(); // default partition
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    // Retention: the oldest day is dropped once relayed.
    stack
        .db
        .batch_execute("DROP TABLE outbox_2026_11_20")
        .await
        .unwrap();
    stack
        .db
        .batch_execute(&insert(4, "2026-11-21 11:00+00"))
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;

    let events: Vec<String> = stack
        .read_topic("Order.events")
        .await
        .iter()
        .map(|r| String::from_utf8(r.header("eventType").unwrap().to_vec()).unwrap())
        .collect();
    assert_eq!(
        events,
        ["E1", "E2", "E3", "E4"],
        "rows of every partition arrive as rows of public.outbox"
    );
    let via_root: bool = stack
        .db
        .query_one(
            "SELECT pubviaroot FROM pg_publication WHERE pubname = 'outbox_relay'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(via_root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publication_that_would_hide_partitions_is_refused_with_the_fix() {
    let stack = Stack::start_with_schema(
        Storage::Sqlite,
        include_str!("../sql/outbox_partitioned.sql"),
    )
    .await;
    stack
        .db
        .batch_execute("CREATE PUBLICATION outbox_relay FOR TABLE outbox")
        .await
        .unwrap();
    let mut relay = stack.spawn_relay(&[]);
    let status = relay.wait_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "log:\n{}",
        relay.log()
    );
    assert!(
        relay.log().contains("publish_via_partition_root = true"),
        "{}",
        relay.log()
    );
}
