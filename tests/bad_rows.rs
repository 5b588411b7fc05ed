//! Bad rows never stop the stream and are never dropped silently: they go to the
//! dead-letter topic with headers that say why, and the slot moves on past them only
//! once that write is acknowledged.

mod common;

use common::*;
use std::time::Duration;

const SLOT: &str = "outbox_relay";
const DLQ: &str = "outbox-relay.dlq";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_larger_than_the_producer_accepts_is_dead_lettered_and_the_stream_goes_on() {
    let stack = Stack::start().await;
    let relay = stack
        .spawn_relay_and_wait_for_slot(SLOT, &["--producer-property", "message.max.bytes=4096"])
        .await;
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('00000000-0000-0000-0000-000000000001', 'Order', 'o-1', 'Big', jsonb_build_object('blob', repeat('x', 20000))),
               ('00000000-0000-0000-0000-000000000002', 'Order', 'o-1', 'Small', '{}');",
        )
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;

    let orders = stack.read_topic("Order.events").await;
    assert_eq!(orders.len(), 1, "the small event still arrives");
    assert_eq!(orders[0].header_str("eventType"), "Small");
    let dead = stack.read_topic(DLQ).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].header_str("id"),
        "00000000-0000-0000-0000-000000000001"
    );
    assert!(dead[0]
        .header_str("outbox-relay.error.reason")
        .contains("message.max.bytes"));
    assert_eq!(
        dead[0].header_str("outbox-relay.original.topic"),
        "Order.events"
    );
    assert_eq!(dead[0].header_str("outbox-relay.original.size"), "20012");
    assert_eq!(dead[0].key_str(), Some("o-1"));
    assert_eq!(
        dead[0].value, None,
        "the oversized payload is left out of the dead letter"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_routing_column_dead_letters_rows_until_it_is_back_and_added_columns_are_harmless(
) {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    let insert = |n: u64| {
        format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ('{}', 'Order', 'o-{n}', 'E{n}', '{{}}');",
            event_uuid(n)
        )
    };
    let renamed = |n: u64| {
        format!("INSERT INTO outbox (id, kind, aggregate_id, event_type, payload) VALUES ('{}', 'Order', 'o-{n}', 'E{n}', '{{}}');", event_uuid(n))
    };
    stack.db.batch_execute(&insert(1)).await.unwrap();
    stack
        .db
        .batch_execute("ALTER TABLE outbox RENAME COLUMN aggregate_type TO kind")
        .await
        .unwrap();
    stack.db.batch_execute(&renamed(2)).await.unwrap();
    stack
        .db
        .batch_execute("ALTER TABLE outbox RENAME COLUMN kind TO aggregate_type")
        .await
        .unwrap();
    stack.db.batch_execute(&insert(3)).await.unwrap();
    stack
        .db
        .batch_execute("ALTER TABLE outbox ADD COLUMN tracingspancontext text")
        .await
        .unwrap();
    stack.db.batch_execute(&insert(4)).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;

    let orders: Vec<String> = stack
        .read_topic("Order.events")
        .await
        .iter()
        .map(|r| r.header_str("eventType").to_owned())
        .collect();
    assert_eq!(orders, ["E1", "E3", "E4"]);
    let dead = stack.read_topic(DLQ).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].header_str("id"), event_uuid(2));
    assert!(dead[0]
        .header_str("outbox-relay.error.reason")
        .contains("\"aggregate_type\" is missing"));
    assert_eq!(
        dead[0].value_str(),
        Some("{}"),
        "the payload is kept; reason: {}\n{}",
        dead[0].header_str("outbox-relay.error.reason"),
        relay.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_json_expansion_a_payload_that_is_not_json_is_dead_lettered() {
    let stack = Stack::start().await;
    // A text payload column can hold anything.
    stack
        .db
        .batch_execute("ALTER TABLE outbox ALTER COLUMN payload TYPE text")
        .await
        .unwrap();
    let relay = stack
        .spawn_relay_and_wait_for_slot(SLOT, &["--expand-json-payload"])
        .await;
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('00000000-0000-0000-0000-000000000001', 'Order', 'o-1', 'Good', '{ \"total\" : 1, \"note\": null, \"lines\": [] }'),
               ('00000000-0000-0000-0000-000000000002', 'Order', 'o-1', 'Bad', 'total=1');",
        )
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let orders = stack.read_topic("Order.events").await;
    assert_eq!(orders.len(), 1);
    assert_eq!(
        orders[0].value_str(),
        Some(r#"{"total":1}"#),
        "compact, without null fields and empty arrays"
    );
    let dead = stack.read_topic(DLQ).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].header_str("id"),
        "00000000-0000-0000-0000-000000000002"
    );
    assert!(dead[0]
        .header_str("outbox-relay.error.reason")
        .contains("not JSON"));
    assert_eq!(
        dead[0].value_str(),
        Some("total=1"),
        "the original payload is kept"
    );
}

/// A topic whose `max.message.bytes` is below the producer's batch size: Kafka refuses a
/// batch larger than it whole, every record in it. The relay learns the limit
/// (DescribeConfigs), builds batches no larger, and dead-letters the one record that does
/// not fit by itself: record by record, never a batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_with_a_small_max_message_bytes_dead_letters_only_the_record_that_does_not_fit() {
    let stack = Stack::start().await;
    outbox_relay_testkit::kafka::create_topic_with_configs(
        &stack.broker.bootstrap_servers(),
        "Order.events",
        1,
        &[("max.message.bytes", "16384")],
    )
    .await
    .unwrap();
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
               SELECT ('00000000-0000-0000-0000-' || lpad(to_hex(g), 12, '0'))::uuid, 'Order', 'o-' || (g % 3),
                      CASE WHEN g = 150 THEN 'Big' ELSE 'Small' END,
                      jsonb_build_object('n', g, 'pad', repeat('x', CASE WHEN g = 150 THEN 30000 ELSE 1000 END))
               FROM generate_series(1, 300) g;",
        )
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;

    let orders = stack.read_topic("Order.events").await;
    let ids: Vec<String> = orders
        .iter()
        .map(|r| r.header_str("id").to_owned())
        .collect();
    let expected: Vec<String> = (1..=300u64).filter(|n| *n != 150).map(event_uuid).collect();
    assert_eq!(ids, expected, "every record that fits arrives, in order");
    let dead = stack.read_topic(DLQ).await;
    assert_eq!(dead.len(), 1, "only the record that does not fit");
    assert_eq!(dead[0].header_str("id"), event_uuid(150));
    let reason = dead[0].header_str("outbox-relay.error.reason");
    assert!(
        reason.contains("larger than topic Order.events's max.message.bytes (16384)"),
        "{reason}"
    );
    let log = relay.log();
    assert!(
        log.contains("building batches of at most max.message.bytes"),
        "{log}"
    );
}
