//! The core path end to end: real PostgreSQL 15, real tansu broker, the real binary, and
//! a real Kafka consumer reading back what a user's service would read.

mod common;

use common::*;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

const SLOT: &str = "outbox_relay";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outbox_insert_arrives_routed_with_key_value_headers_and_per_key_order() {
    let stack = Stack::start().await;
    // Writes before the relay's slot exists are not events it can see: create the slot
    // first by starting the relay, then write while it streams.
    let mut relay = stack.spawn_relay(&["--topic-partitions", "3"]);
    stack.wait_confirmed(SLOT, 1, Duration::from_secs(30), Some(&relay)).await;

    // Noise that must not become events: another table, and UPDATE/DELETE/TRUNCATE of the outbox.
    stack.db.batch_execute("CREATE TABLE orders (id int PRIMARY KEY, aggregate_type text)").await.unwrap();
    stack.db.batch_execute("INSERT INTO orders SELECT g, 'Order' FROM generate_series(1, 500) g").await.unwrap();

    const EVENTS: u64 = 10_000;
    insert_events(&stack.db, 0, EVENTS / 2, 50, 97).await.unwrap();
    stack.db.batch_execute("UPDATE outbox SET event_type = 'Changed'; DELETE FROM outbox; TRUNCATE outbox;").await.unwrap();
    insert_events(&stack.db, EVENTS / 2, EVENTS / 2, 7, 97).await.unwrap();
    // One event per transaction too, with the business row in the same transaction.
    for i in 0..20u64 {
        let n = EVENTS + i;
        stack
            .db
            .batch_execute(&format!(
                "BEGIN; INSERT INTO orders VALUES ({}, 'x'); \
                 INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
                 VALUES ('{}', '{}', 'agg-{}', 'Event{n}', '{{\"n\": {n}}}'); COMMIT;",
                1000 + i,
                event_uuid(n),
                TYPES[(n % 4) as usize],
                n % 97
            ))
            .await
            .unwrap();
    }
    let total = EVENTS + 20;
    let last_write = stack.current_wal_lsn().await;
    let confirm_time = stack.wait_confirmed(SLOT, last_write, Duration::from_secs(120), Some(&relay)).await;
    eprintln!("confirmed {total} events {confirm_time:?} after the last commit");

    let records = read_all_events(&stack).await.unwrap();
    assert_eq!(records.len() as u64, total, "every event exactly once");
    let mut seen = vec![0u32; total as usize];
    let mut partition_of_key: HashMap<String, i32> = HashMap::new();
    let mut last_n_per_key: BTreeMap<String, u64> = BTreeMap::new();
    for (r, n) in &records {
        seen[*n as usize] += 1;
        let key = format!("agg-{}", n % 97);
        assert_eq!(r.key_str(), Some(key.as_str()), "key of event {n}");
        // jsonb text as PostgreSQL prints it, not double-encoded.
        assert_eq!(r.value_str(), Some(format!("{{\"n\": {n}}}").as_str()), "value of event {n}");
        assert_eq!(r.header("eventType"), Some(format!("Event{n}").as_bytes()));
        assert_eq!(r.headers[0].0, "id", "the id header comes first");
        assert_eq!(r.header("id"), Some(event_uuid(*n).as_bytes()), "id header is the uuid as plain text");
        let p = *partition_of_key.entry(format!("{}/{key}", r.topic)).or_insert(r.partition);
        assert_eq!(p, r.partition, "one key, one partition");
    }
    assert!(seen.iter().all(|c| *c == 1), "no event lost or duplicated");
    // Per-key order: within a partition, offsets follow the commit order of each key.
    let mut by_offset: Vec<_> = records.iter().collect();
    by_offset.sort_by_key(|(r, _)| (r.topic.clone(), r.partition, r.offset));
    for (r, n) in by_offset {
        let k = format!("{}/{}", r.topic, r.key_str().unwrap());
        if let Some(prev) = last_n_per_key.insert(k.clone(), *n) {
            assert!(prev < *n, "key {k}: event {n} after {prev}");
        }
    }
    let partitions_used: std::collections::HashSet<i32> = records.iter().map(|(r, _)| r.partition).collect();
    assert_eq!(partitions_used.len(), 3, "keys spread over the 3 partitions");
    // Only outbox topics exist (no topic for the orders table, no dead letters).
    let mut topics: Vec<String> = stack.topics().await.into_iter().filter(|t| !t.starts_with("__")).collect();
    topics.sort();
    assert_eq!(topics, ["Customer.events", "Invoice.events", "Order.events", "Shipment.events"]);

    let status = relay.terminate(Duration::from_secs(30)).unwrap();
    assert_eq!(status.map(|s| s.code()), Some(Some(0)), "SIGTERM exits 0; log:\n{}", relay.log());
}
