//! Refusals only a real Apache Kafka broker makes (its own checks, not the relay's): a
//! create-topic policy the cluster's operator deployed, and a compacted topic refusing a
//! record without a key. The refused event is dead-lettered with the broker's reason and its
//! payload, the others are delivered, and the stream goes on: the slot moves past the refused
//! event only once it is in the dead-letter topic. A topic changed under the relay makes the
//! broker refuse a whole batch for one record: its neighbours still arrive. (A topic's
//! `max.message.bytes`: tests/bad_rows.rs.)

mod common;

use common::*;
use outbox_relay_testkit::{Broker, PgCluster};
use std::time::Duration;

const SLOT: &str = "outbox_relay";

async fn stack_with_broker(broker: Broker) -> Stack {
    let pg = PgCluster::start().unwrap_or_else(|e| panic!("PostgreSQL for this test: {e:#}"));
    Stack::of(pg, broker).await
}

fn reason(record: &outbox_relay_testkit::ConsumedRecord) -> String {
    record.header_str("outbox-relay.error.reason").to_owned()
}

/// The values of `topic`'s records, in order.
async fn values(stack: &Stack, topic: &str) -> Vec<String> {
    stack
        .read_topic(topic)
        .await
        .iter()
        .map(|r| r.value_str().unwrap().to_owned())
        .collect()
}

/// One transaction of three Order events, `first`, `first + 1`, `first + 2` (payloads
/// `{"n": 1}` to `{"n": 3}`): keys o-1, none, o-2.
async fn insert_keyless_between_two(stack: &Stack, first: u32) {
    let id = |n: u32| format!("00000000-0000-0000-0000-{n:012}");
    stack
        .db
        .batch_execute(&format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('{}', 'Order', 'o-1', 'Created', '{{\"n\": 1}}'),
               ('{}', 'Order', NULL, 'Created', '{{\"n\": 2}}'),
               ('{}', 'Order', 'o-2', 'Created', '{{\"n\": 3}}');",
            id(first),
            id(first + 1),
            id(first + 2)
        ))
        .await
        .unwrap();
}

/// The one record of the dead-letter topic, checked to keep `payload` and name
/// `original_topic`; its reason.
async fn the_dead_letter(stack: &Stack, payload: &str, original_topic: &str, log: &str) -> String {
    let dead = stack.read_topic("outbox-relay.dlq").await;
    assert_eq!(dead.len(), 1, "{dead:?}\n{log}");
    assert_eq!(dead[0].value_str(), Some(payload), "the payload is kept");
    assert_eq!(
        dead[0].header("outbox-relay.original.topic"),
        Some(original_topic.as_bytes())
    );
    reason(&dead[0])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_the_create_topic_policy_refuses_dead_letters_its_events() {
    let broker = Broker::start_private_with(
        "create.topic.policy.class.name=org.outboxrelay.test.RefusePrefixPolicy\n\
         outbox.test.refused.topic.prefix=Forbidden\n",
    )
    .unwrap_or_else(|e| panic!("a broker with a create-topic policy: {e:#}"));
    let stack = stack_with_broker(broker).await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('00000000-0000-0000-0000-000000000001', 'Order', 'o-1', 'Created', '{\"n\": 1}'),
               ('00000000-0000-0000-0000-000000000002', 'Forbidden', 'f-1', 'Created', '{\"n\": 2}'),
               ('00000000-0000-0000-0000-000000000003', 'Order', 'o-1', 'Paid', '{\"n\": 3}');",
        )
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(90), Some(&relay))
        .await;
    let orders = values(&stack, "Order.events").await;
    assert_eq!(orders, [r#"{"n": 1}"#, r#"{"n": 3}"#]);
    assert!(!stack
        .topics()
        .await
        .contains(&"Forbidden.events".to_owned()));
    let why = the_dead_letter(&stack, r#"{"n": 2}"#, "Forbidden.events", &relay.log()).await;
    assert_eq!(
        stack.read_topic("outbox-relay.dlq").await[0].key_str(),
        Some("f-1")
    );
    assert!(
        why.contains("naming policy") || why.to_lowercase().contains("policy"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_refusing_a_null_key_dead_letters_that_event() {
    let stack = Stack::start().await;
    outbox_relay_testkit::kafka::create_topic_with_configs(
        &stack.broker.bootstrap_servers(),
        "Order.events",
        1,
        &[("cleanup.policy", "compact")],
    )
    .await
    .unwrap();
    stack
        .db
        .batch_execute("ALTER TABLE outbox ALTER COLUMN aggregate_id DROP NOT NULL")
        .await
        .unwrap();
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_keyless_between_two(&stack, 1).await;
    stack
        .wait_delivered(SLOT, Duration::from_secs(90), Some(&relay))
        .await;
    let orders: Vec<_> = stack
        .read_topic("Order.events")
        .await
        .iter()
        .map(|r| {
            (
                r.key_str().map(str::to_owned),
                r.value_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        orders,
        [
            (Some("o-1".to_owned()), r#"{"n": 1}"#.to_owned()),
            (Some("o-2".to_owned()), r#"{"n": 3}"#.to_owned())
        ],
        "{}",
        relay.log()
    );
    let why = the_dead_letter(&stack, r#"{"n": 2}"#, "Order.events", &relay.log()).await;
    assert!(why.to_lowercase().contains("key"), "{why}");
}

/// The operator makes a topic compacted while the relay runs (its topic rules, read before,
/// do not say so yet), and one transaction writes an event without a key between two with
/// keys, in one batch (`linger.ms`). The broker refuses the whole batch for the keyless record
/// (KIP-467: it alone is INVALID_RECORD, the others only failed with it). The neighbours are
/// not dead-lettered and not lost: the session starts again, the refused event goes to the
/// dead-letter topic with its payload before it is sent again, and the neighbours arrive once,
/// in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_broker_refuses_for_one_record_delivers_its_neighbours() {
    batch_refused_for_one_record(&[]).await;
}

/// The same with `--exactly-once`: the refusal stops the producer (gap-free partitions), the
/// refused event's dead letter is written before anything after it, and nothing arrives
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_exactly_once_a_batch_refused_for_one_record_delivers_its_neighbours_once() {
    batch_refused_for_one_record(&["--exactly-once"]).await;
}

async fn batch_refused_for_one_record(flags: &[&str]) {
    let stack = Stack::start().await;
    let bootstrap = stack.broker.bootstrap_servers();
    outbox_relay_testkit::kafka::create_topic(&bootstrap, "Order.events", 1)
        .await
        .unwrap();
    stack
        .db
        .batch_execute("ALTER TABLE outbox ALTER COLUMN aggregate_id DROP NOT NULL")
        .await
        .unwrap();
    let mut args = vec!["--producer-property", "linger.ms=300"];
    args.extend_from_slice(flags);
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &args).await;
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('00000000-0000-0000-0000-000000000001', 'Order', 'o-0', 'Created', '{\"n\": 0}');",
        )
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(90), Some(&relay))
        .await;
    outbox_relay_testkit::kafka::alter_topic_configs(
        &bootstrap,
        "Order.events",
        &[("cleanup.policy", "compact")],
    )
    .await
    .unwrap();
    insert_keyless_between_two(&stack, 2).await;
    stack
        .wait_delivered(SLOT, Duration::from_secs(120), Some(&relay))
        .await;
    let orders = values(&stack, "Order.events").await;
    assert_eq!(
        orders,
        [r#"{"n": 0}"#, r#"{"n": 1}"#, r#"{"n": 3}"#],
        "the keyless event's neighbours arrive once, in order\n{}",
        relay.log()
    );
    let log = relay.log();
    the_dead_letter(&stack, r#"{"n": 2}"#, "Order.events", &log).await;
    assert!(
        log.contains("part of a batch"),
        "the batch refusal is what this test exercises:\n{log}"
    );
}
