//! `run --mode polling` (the seeds' SELECT ... FOR UPDATE SKIP LOCKED relay), tested like
//! the CDC mode: every event delivered, per-aggregate order, nothing lost to kill -9, a
//! broker outage or several instances polling at once; rows leave the outbox only after
//! Kafka acknowledged them.

mod common;

use common::*;
use outbox_relay_testkit::Storage;
use rand::RngExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const POLLING: [&str; 4] = ["--mode", "polling", "--poll-interval-ms", "50"];

async fn outbox_rows(stack: &Stack, table: &str, pending: &str) -> i64 {
    stack
        .db
        .query_one(
            &format!("SELECT count(*) FROM {table} WHERE {pending}"),
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

async fn wait_drained(
    stack: &Stack,
    relay: &outbox_relay_testkit::RelayProcess,
    timeout: Duration,
) {
    let start = Instant::now();
    while outbox_rows(stack, "outbox", "true").await > 0 {
        assert!(
            start.elapsed() < timeout,
            "outbox not drained in {timeout:?}; relay log:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// For each (topic, aggregate), event numbers in the order a consumer reads them
/// (partition order), first deliveries only: duplicates after a crash re-send a batch,
/// they do not reorder it.
fn first_delivery_order(
    records: &[(outbox_relay_testkit::ConsumedRecord, u64)],
) -> HashMap<(String, String), Vec<u64>> {
    let mut seen = std::collections::HashSet::new();
    let mut order: HashMap<(String, String), Vec<u64>> = HashMap::new();
    for (r, n) in records {
        if seen.insert(*n) {
            order
                .entry((r.topic.clone(), r.key_str().unwrap().to_owned()))
                .or_default()
                .push(*n);
        }
    }
    order
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_relays_every_event_once_in_order_and_empties_the_outbox() {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay(&POLLING);
    insert_events(&stack.db, 0, 3000, 10, 50).await.unwrap();
    wait_drained(&stack, &relay, Duration::from_secs(60)).await;
    let (lost, duplicated) = lost_and_duplicated(&stack, 3000).await;
    assert_eq!((lost, duplicated), (0, 0));
    let records = read_all_events(&stack).await.unwrap();
    for (key, ns) in first_delivery_order(&records) {
        assert!(
            ns.windows(2).all(|w| w[0] < w[1]),
            "aggregate {key:?} out of order: {ns:?}"
        );
    }
    // Same bytes as the CDC mode: key, raw payload, id and eventType headers.
    let (r, n) = &records[0];
    assert_eq!(r.value_str(), Some(format!(r#"{{"n": {n}}}"#).as_str()));
    assert_eq!(r.header("eventType"), Some(format!("Event{n}").as_bytes()));
    assert!(
        stack.confirmed_flush_lsn("outbox_relay").await.is_none(),
        "polling uses no slot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_and_kill_9_lose_nothing_and_keep_aggregate_order() {
    let stack = Stack::start_with(Storage::Memory).await;
    const EVENTS: u64 = 20_000;
    let args = [&POLLING[..], &["--poll-batch-size", "200"]].concat();
    let mut relays: Vec<_> = (0..3).map(|_| stack.spawn_relay(&args)).collect();
    let writer_db = stack.pg.connect().await.unwrap();
    let writer = tokio::spawn(async move {
        for chunk in 0..20 {
            insert_events(&writer_db, chunk * 1000, 1000, 10, 100)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    });
    let mut rng = rand::rng();
    for i in 0..10 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..400))).await;
        let victim = i % 3;
        relays[victim].kill9();
        relays[victim] = stack.spawn_relay(&args);
    }
    writer.await.unwrap();
    wait_drained(&stack, &relays[0], Duration::from_secs(120)).await;
    let (lost, duplicated) = lost_and_duplicated(&stack, EVENTS).await;
    eprintln!("polling, 3 instances, kill -9 x10 during {EVENTS} events: lost {lost}, duplicated {duplicated}");
    assert_eq!(lost, 0);
    let records = read_all_events(&stack).await.unwrap();
    for (key, ns) in first_delivery_order(&records) {
        assert!(
            ns.windows(2).all(|w| w[0] < w[1]),
            "aggregate {key:?} out of order across instances: {ns:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_stay_in_the_outbox_while_the_broker_is_down() {
    let mut stack = Stack::start().await;
    let relay = stack.spawn_relay(&POLLING);
    insert_events(&stack.db, 0, 100, 10, 10).await.unwrap();
    wait_drained(&stack, &relay, Duration::from_secs(60)).await;
    stack.broker.stop();
    insert_events(&stack.db, 100, 100, 10, 10).await.unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        outbox_rows(&stack, "outbox", "true").await,
        100,
        "rows retired without an acknowledgement"
    );
    stack
        .broker
        .restart()
        .expect("restart the broker with its data");
    wait_drained(&stack, &relay, Duration::from_secs(120)).await;
    let (lost, _) = lost_and_duplicated(&stack, 200).await;
    assert_eq!(lost, 0);
}

/// The seeds' other design (shared/seeds/002): rows are marked `published_at = now()`
/// instead of deleted; a row that cannot be routed is dead-lettered and marked too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marking_a_processed_column_instead_of_deleting() {
    let stack = Stack::start_with_schema(
        Storage::Sqlite,
        "CREATE TABLE outbox_events (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            aggregate_id VARCHAR(255) NOT NULL,
            aggregate_type VARCHAR(255),
            event_type VARCHAR(255) NOT NULL,
            payload JSONB NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
            published_at TIMESTAMPTZ NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY
        );",
    )
    .await;
    let relay = stack.spawn_relay(
        &[
            &POLLING[..],
            &[
                "--table",
                "public.outbox_events",
                "--processed-column",
                "published_at",
            ],
        ]
        .concat(),
    );
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox_events (aggregate_id, aggregate_type, event_type, payload) VALUES
               ('o-1', 'Order', 'OrderCreated', '{\"n\": 1}'),
               ('o-1', NULL, 'Broken', '{\"n\": 2}'),
               ('o-1', 'Order', 'OrderPaid', '{\"n\": 3}');",
        )
        .await
        .unwrap();
    let start = Instant::now();
    while outbox_rows(&stack, "outbox_events", "published_at IS NULL").await > 0 {
        assert!(start.elapsed() < Duration::from_secs(60), "{}", relay.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        outbox_rows(&stack, "outbox_events", "true").await,
        3,
        "marked, not deleted"
    );
    let orders: Vec<String> = stack
        .read_topic("Order.events")
        .await
        .iter()
        .map(|r| r.value_str().unwrap().to_owned())
        .collect();
    assert_eq!(orders, [r#"{"n": 1}"#, r#"{"n": 3}"#]);
    let dead = stack.read_topic("outbox-relay.dlq").await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].value_str(), Some(r#"{"n": 2}"#));
    assert!(dead[0].header("outbox-relay.error.reason").is_some());
    assert_eq!(
        dead[0].header("outbox-relay.source.lsn"),
        None,
        "rows read with SQL have no LSN"
    );
}

#[test]
fn polling_options_need_polling_mode() {
    let out = std::process::Command::new(RELAY)
        .args([
            "run",
            "--postgres-url",
            "postgres://u@127.0.0.1:1/db",
            "--bootstrap-servers",
            "127.0.0.1:1",
            "--poll-batch-size",
            "10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("poll-batch-size: applies only with --mode polling"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_in_polling_mode_asks_for_table_privileges_not_replication() {
    let stack = Stack::start().await;
    let out = std::process::Command::new(RELAY)
        .args([
            "check",
            "--mode",
            "polling",
            "--postgres-url",
            &stack.pg.url(),
            "--bootstrap-servers",
            &stack.broker.bootstrap_servers(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("polling mode may delete relayed rows in public.outbox"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("wal_level") && !stdout.contains("publication"),
        "{stdout}"
    );
}

/// Polling follows insertion, not `now()`: a transaction that started earlier but inserted
/// later (it waited for the aggregate, as a service does) commits after another; ordering by
/// `created_at` would relay its event first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_relays_an_aggregate_in_insertion_order_not_in_timestamp_order() {
    let stack = Stack::start().await;
    let early = stack.pg.connect().await.unwrap();
    early.batch_execute("BEGIN; SELECT now();").await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let insert = |n: u64| {
        format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
             VALUES ('{}', 'Order', 'o-1', 'E{n}', '{{}}')",
            event_uuid(n)
        )
    };
    stack.db.batch_execute(&insert(1)).await.unwrap();
    early.batch_execute(&insert(2)).await.unwrap();
    early.batch_execute("COMMIT").await.unwrap();
    let by_time: Vec<String> = stack
        .db
        .query("SELECT event_type FROM outbox ORDER BY created_at", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(by_time, ["E2", "E1"], "the timestamps are inverted");
    let relay = stack.spawn_relay(&POLLING);
    wait_drained(&stack, &relay, Duration::from_secs(60)).await;
    let order: Vec<String> = stack
        .read_topic("Order.events")
        .await
        .iter()
        .map(|r| r.header_str("eventType").to_owned())
        .collect();
    assert_eq!(order, ["E1", "E2"], "insertion order");
}

/// A table without an insertion-order column is refused, by `run` and `check`, with the DDL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_refuses_a_table_without_an_insertion_order_column() {
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute("ALTER TABLE outbox DROP COLUMN seq")
        .await
        .unwrap();
    let (succeeded, log) = stack.run_until_exit(&POLLING);
    assert!(!succeeded, "{log}");
    assert!(
        log.contains("ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY"),
        "{log}"
    );
    let (code, stdout) = stack.check(&POLLING);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL") && stdout.contains("no identity or serial column"),
        "{stdout}"
    );
}
