//! The core path end to end: real PostgreSQL, real Apache Kafka, the real binary, and
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
    let mut relay = stack
        .spawn_relay_and_wait_for_slot(SLOT, &["--topic-partitions", "3"])
        .await;

    // Noise that must not become events: another table, and UPDATE/DELETE/TRUNCATE of the outbox.
    stack
        .db
        .batch_execute("CREATE TABLE orders (id int PRIMARY KEY, aggregate_type text)")
        .await
        .unwrap();
    stack
        .db
        .batch_execute("INSERT INTO orders SELECT g, 'Order' FROM generate_series(1, 500) g")
        .await
        .unwrap();

    const EVENTS: u64 = 10_000;
    insert_events(&stack.db, 0, EVENTS / 2, 50, 97)
        .await
        .unwrap();
    stack
        .db
        .batch_execute(
            "UPDATE outbox SET event_type = 'Changed'; DELETE FROM outbox; TRUNCATE outbox;",
        )
        .await
        .unwrap();
    insert_events(&stack.db, EVENTS / 2, EVENTS / 2, 7, 97)
        .await
        .unwrap();
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
    let confirm_time = stack
        .wait_confirmed(SLOT, last_write, Duration::from_secs(120), Some(&relay))
        .await;
    eprintln!("confirmed {total} events {confirm_time:?} after the last commit");

    let records = read_all_events(&stack).await.unwrap();
    if records.len() as u64 != total {
        let mut count = vec![0u32; total as usize];
        for (_, n) in &records {
            count[*n as usize] += 1;
        }
        let missing: Vec<usize> = (0..count.len()).filter(|&n| count[n] == 0).collect();
        let twice: Vec<usize> = (0..count.len()).filter(|&n| count[n] > 1).collect();
        let dead: Vec<String> = if stack.topics().await.iter().any(|t| t == "outbox-relay.dlq") {
            stack
                .read_topic("outbox-relay.dlq")
                .await
                .iter()
                .map(|r| r.header_str("outbox-relay.error.reason").to_owned())
                .collect()
        } else {
            Vec::new()
        };
        let report = loss_report(&stack, &records, &missing).await;
        panic!(
            "every event exactly once: {} records of {total}; missing {missing:?}, more than once {twice:?}, \
             dead letters {dead:?}\n{report}{}\nbroker log:\n{}",
            records.len(),
            relay.log(),
            stack.broker.log()
        );
    }
    let mut seen = vec![0u32; total as usize];
    let mut partition_of_key: HashMap<String, i32> = HashMap::new();
    let mut last_n_per_key: BTreeMap<String, u64> = BTreeMap::new();
    for (r, n) in &records {
        seen[*n as usize] += 1;
        let key = format!("agg-{}", n % 97);
        assert_eq!(r.key_str(), Some(key.as_str()), "key of event {n}");
        // jsonb text as PostgreSQL prints it, not double-encoded.
        assert_eq!(
            r.value_str(),
            Some(format!("{{\"n\": {n}}}").as_str()),
            "value of event {n}"
        );
        assert_eq!(r.header("eventType"), Some(format!("Event{n}").as_bytes()));
        assert_eq!(r.headers[0].0, "id", "the id header comes first");
        assert_eq!(
            r.header("id"),
            Some(event_uuid(*n).as_bytes()),
            "id header is the uuid as plain text"
        );
        let p = *partition_of_key
            .entry(format!("{}/{key}", r.topic))
            .or_insert(r.partition);
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
    let partitions_used: std::collections::HashSet<i32> =
        records.iter().map(|(r, _)| r.partition).collect();
    assert_eq!(
        partitions_used.len(),
        3,
        "keys spread over the 3 partitions"
    );
    // Only outbox topics exist (no topic for the orders table, no dead letters; the canary's
    // own topic aside).
    let mut topics: Vec<String> = stack
        .topics()
        .await
        .into_iter()
        .filter(|t| !t.starts_with("__") && t != "outbox-relay.canary")
        .collect();
    topics.sort();
    assert_eq!(
        topics,
        [
            "Customer.events",
            "Invoice.events",
            "Order.events",
            "Shipment.events"
        ]
    );

    let status = relay.terminate(Duration::from_secs(30)).unwrap();
    assert_eq!(
        status.map(|s| s.code()),
        Some(Some(0)),
        "SIGTERM exits 0; log:\n{}",
        relay.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_payload_is_a_tombstone_and_unroutable_rows_go_to_the_dead_letter_topic() {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    stack
        .db
        .batch_execute(
            "ALTER TABLE outbox ALTER COLUMN aggregate_type DROP NOT NULL;
             INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('00000000-0000-0000-0000-000000000001', 'Order', 'o-1', 'OrderCreated', '{\"total\": 1}'),
               ('00000000-0000-0000-0000-000000000002', 'Order', 'o-1', 'OrderDeleted', NULL),
               ('00000000-0000-0000-0000-000000000003', 'Order Lines', 'o-1', 'LineAdded', '{\"line\": 1}'),
               ('00000000-0000-0000-0000-000000000004', '', 'o-2', 'Nothing', '[]'),
               ('00000000-0000-0000-0000-000000000005', 'Order', 'o-2', 'OrderCreated', '\"text\"'),
               ('00000000-0000-0000-0000-000000000006', NULL, 'o-3', 'Orphan', '{}');",
        )
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;

    let orders = stack.read_topic("Order.events").await;
    let summary: Vec<(Option<&str>, Option<&str>)> = orders
        .iter()
        .map(|r| (r.key_str(), r.value_str()))
        .collect();
    assert_eq!(
        summary,
        [
            (Some("o-1"), Some(r#"{"total": 1}"#)),
            (Some("o-1"), None),
            (Some("o-2"), Some(r#""text""#))
        ],
        "the NULL payload is a tombstone (null value) with the same key"
    );
    let dead = stack.read_topic("outbox-relay.dlq").await;
    assert_eq!(
        dead.len(),
        3,
        "every unroutable row is dead-lettered, none dropped"
    );
    let first = &dead[0];
    assert_eq!(
        first.header("id"),
        Some(&b"00000000-0000-0000-0000-000000000003"[..])
    );
    assert_eq!(first.key_str(), Some("o-1"));
    assert_eq!(
        first.value_str(),
        Some(r#"{"line": 1}"#),
        "the original payload is kept"
    );
    let reason = std::str::from_utf8(first.header("outbox-relay.error.reason").unwrap()).unwrap();
    assert!(reason.contains("[a-zA-Z0-9._-]"), "{reason}");
    assert_eq!(
        first.header("outbox-relay.source.table"),
        Some(&b"public.outbox"[..])
    );
    assert_eq!(
        first.header("outbox-relay.original.topic"),
        Some(&b"Order Lines.events"[..])
    );
    assert!(first
        .header("outbox-relay.source.lsn")
        .is_some_and(|l| l.contains(&b'/')));
    let reason = std::str::from_utf8(dead[1].header("outbox-relay.error.reason").unwrap()).unwrap();
    assert!(reason.contains("empty"), "{reason}");
    // Debezium's EventRouter crashes the task on a NULL routing value; we dead-letter it.
    let reason = std::str::from_utf8(dead[2].header("outbox-relay.error.reason").unwrap()).unwrap();
    assert!(reason.contains("NULL"), "{reason}");
    assert_eq!(dead[2].key_str(), Some("o-3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_restart_resumes_from_the_slot_without_loss_or_duplicates() {
    let stack = Stack::start().await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_events(&stack.db, 0, 2000, 20, 10).await.unwrap();
    let status = relay.terminate(Duration::from_secs(60)).unwrap();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "log:\n{}",
        relay.log()
    );
    let confirmed_at_stop = stack.confirmed_flush_lsn(SLOT).await.unwrap();

    // Written while no relay runs: the slot keeps them.
    insert_events(&stack.db, 2000, 2000, 20, 10).await.unwrap();
    let last = stack.current_wal_lsn().await;
    assert!(confirmed_at_stop < last);
    let relay = stack.spawn_relay(&[]);
    stack
        .wait_confirmed(SLOT, last, Duration::from_secs(60), Some(&relay))
        .await;

    let (lost, duplicated) = lost_and_duplicated(&stack, 4000).await;
    assert_eq!(
        (lost, duplicated),
        (0, 0),
        "a graceful stop confirms everything it delivered"
    );
}

/// A backlog written while no relay ran arrives to its last event with nothing written after
/// it. Its changes reach the relay far behind their commits, so the replication reader waits for
/// larger reads (a socket low water mark): the backlog's last reads must still be taken after a
/// few milliseconds, not when the server next sends something (with nothing written, it sends
/// nothing the relay's status updates do not keep away). Whether the tail falls under the mark
/// depends on timing; `a_change_arriving_alone_while_reads_are_batched_is_forwarded_after_the_wait`
/// (vendor/pgwire-replication, worker.rs) proves that case deterministically.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_relayed_to_its_last_event_with_nothing_written_after_it() {
    let stack = Stack::start().await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    relay.terminate(Duration::from_secs(60)).unwrap();

    // 4,000 events of ~1 KB in transactions of 100: megabytes for the walsender to send.
    insert_padded_events(&stack.db, 0, 4_000, 100, 50, 1_000)
        .await
        .unwrap();
    let last = stack.current_wal_lsn().await;
    // Every change is now well over 100 ms behind its commit when the walsender sends it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let relay = stack.spawn_relay(&[]);
    let took = stack
        .wait_confirmed(SLOT, last, Duration::from_secs(60), Some(&relay))
        .await;
    assert!(
        took < Duration::from_secs(20),
        "the backlog's end was confirmed {took:?} after the relay started: its last changes \
         waited for something else from the server\n{}",
        relay.log()
    );
    assert_eq!(lost_and_duplicated(&stack, 4_000).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slot_does_not_move_while_the_broker_is_down_and_nothing_is_lost() {
    let mut stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_events(&stack.db, 0, 400, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;

    stack.broker.stop();
    let before_second = stack.current_wal_lsn().await;
    insert_events(&stack.db, 400, 400, 10, 10).await.unwrap();
    let second = stack.current_wal_lsn().await;
    // A keepalive received while idle, before the second batch, may still be reported:
    // read the slot once that has settled, then again at the end of the outage.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let early = stack.confirmed_flush_lsn(SLOT).await.unwrap();
    // 30 s in all: longer than librdkafka's reconnect backoff and PostgreSQL's
    // wal_sender_timeout would make trivial, shorter than the producer's message timeout.
    tokio::time::sleep(Duration::from_secs(28)).await;
    let during = stack.confirmed_flush_lsn(SLOT).await.unwrap();
    assert!(
        during <= before_second,
        "the slot passed events Kafka never acknowledged"
    );
    assert_eq!(early, during, "the slot moved while the broker was down");

    stack
        .broker
        .restart()
        .expect("restart the broker with its data");
    stack
        .wait_confirmed(SLOT, second, Duration::from_secs(120), Some(&relay))
        .await;
    let (lost, _) = lost_and_duplicated(&stack, 800).await;
    assert_eq!(lost, 0, "events lost while the broker was down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_replication_connection_reconnects_and_loses_nothing() {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_events(&stack.db, 0, 300, 10, 10).await.unwrap();
    for _ in 0..2 {
        stack
            .db
            .batch_execute(&format!(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '{SLOT}' AND active_pid IS NOT NULL"
            ))
            .await
            .unwrap();
        insert_events(&stack.db, 300, 0, 10, 10).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    insert_events(&stack.db, 300, 300, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let (lost, _) = lost_and_duplicated(&stack, 600).await;
    assert_eq!(lost, 0, "events lost");
    assert!(
        relay.log().contains("reconnecting"),
        "the reconnect is logged:\n{}",
        relay.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_outbox_in_a_busy_database_does_not_hold_wal() {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    stack
        .db
        .batch_execute("CREATE TABLE busy (id serial PRIMARY KEY, note text)")
        .await
        .unwrap();
    for _ in 0..20 {
        stack
            .db
            .batch_execute(
                "INSERT INTO busy (note) SELECT md5(g::text) FROM generate_series(1, 500) g",
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = stack.current_wal_lsn().await;
    // No heartbeat table: keepalives with nothing in flight are confirmed.
    let lag = stack
        .wait_confirmed(SLOT, last, Duration::from_secs(30), Some(&relay))
        .await;
    eprintln!("an idle outbox's slot caught up with the server {lag:?} after the last write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_is_survived_without_loss() {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_events(&stack.db, 0, 200, 10, 10).await.unwrap();
    stack.pg.stop().expect("stop PostgreSQL");
    let attempts_before = relay.log().matches("reconnecting").count();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let attempts = relay.log().matches("reconnecting").count() - attempts_before;
    // Exponential backoff from 200 ms: about 5 attempts in 6 s, not a busy loop.
    assert!(
        (1..=10).contains(&attempts),
        "{attempts} reconnect attempts in 6 s:\n{}",
        relay.log()
    );
    stack.pg.start_again().expect("start PostgreSQL again");
    // The test's own connection died with the server.
    let db = stack.pg.connect().await.unwrap();
    insert_events(&db, 200, 200, 10, 10).await.unwrap();
    let stack = Stack { db, ..stack };
    stack
        .wait_delivered(SLOT, Duration::from_secs(90), Some(&relay))
        .await;
    let (lost, _) = lost_and_duplicated(&stack, 400).await;
    assert_eq!(lost, 0, "events lost across a PostgreSQL restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_exits_promptly_and_loses_nothing() {
    let stack = Stack::start().await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    let writer_db = stack.pg.connect().await.unwrap();
    let writer = tokio::spawn(async move {
        for chunk in 0..30 {
            insert_events(&writer_db, chunk * 200, 200, 20, 50)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let asked = std::time::Instant::now();
    let status = relay.terminate(Duration::from_secs(60)).unwrap();
    let took = asked.elapsed();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "log:\n{}",
        relay.log()
    );
    // Bounded: the open transaction (≤ 10 s) plus in-flight deliveries (≤ 30 s).
    assert!(took < Duration::from_secs(40), "shutdown took {took:?}");
    eprintln!("SIGTERM under load: exited 0 after {took:?}");
    writer.await.unwrap();

    let relay = stack.spawn_relay(&[]);
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let (lost, duplicated) = lost_and_duplicated(&stack, 6000).await;
    assert_eq!(
        (lost, duplicated),
        (0, 0),
        "a graceful stop under load neither loses nor repeats"
    );
}

/// librdkafka (2.12) takes a later request's success for proof that an earlier one landed,
/// and Kafka accepts any sequence from a producer new to a partition: a partition's first
/// request that failed (a topic just created) was reported delivered and never written
/// (`deliver/producer/first_writes.rs`). So the first record of each partition is
/// acknowledged before the next is sent, the next ones parked meanwhile: librdkafka's own
/// log shows the order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_partitions_first_record_is_acknowledged_before_the_next_is_sent() {
    let stack = Stack::start().await;
    let args = stack.relay_args(&[
        "--topic-partitions",
        "3",
        "--producer-property",
        "linger.ms=0",
        "--producer-property",
        "debug=msg",
    ]);
    let relay = outbox_relay_testkit::RelayProcess::spawn(
        std::path::Path::new(RELAY),
        &args,
        &[("RUST_LOG", "info,librdkafka=debug")],
    )
    .unwrap();
    stack.wait_for_slot(SLOT, &relay).await;
    const TYPES: u64 = 6;
    const EACH: u64 = 6;
    let bootstrap = stack.broker.bootstrap_servers();
    for t in 0..TYPES {
        // Created here: the relay finds it and sends at once, as the rows come.
        outbox_relay_testkit::kafka::create_topic(&bootstrap, &format!("New{t}.events"), 3)
            .await
            .unwrap();
        for i in 0..EACH {
            // One transaction each, one key per type: one partition, records a moment apart.
            stack
                .db
                .batch_execute(&format!(
                    "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES \
                     ('{}', 'New{t}', 'a{t}', 'E', '{{}}')",
                    event_uuid(t * 100 + i),
                ))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    stack
        .wait_delivered(SLOT, Duration::from_secs(120), Some(&relay))
        .await;
    let log = relay.log();
    for t in 0..TYPES {
        let topic = format!("New{t}.events");
        assert_eq!(
            stack.read_topic(&topic).await.len(),
            EACH as usize,
            "{topic}"
        );
        // librdkafka's lines for the topic's partition (its one key's).
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!("{topic} [")) && l.contains("MessageSet"))
            .collect();
        let first_delivered = lines
            .iter()
            .position(|l| l.contains("BaseSeq 0) delivered"))
            .unwrap_or_else(|| {
                panic!(
                    "{topic}: no first record delivered in the log:\n{}",
                    lines.join("\n")
                )
            });
        // Before it: only the first record, alone (sent again if the broker refused it).
        let early: Vec<&&str> = lines[..first_delivered]
            .iter()
            .filter(|l| {
                l.contains("Produce MessageSet")
                    && !(l.contains("BaseSeq 0,") && l.contains("with 1 message(s)"))
            })
            .collect();
        assert!(
            early.is_empty(),
            "{topic}: produced more before its first record was acknowledged:\n{}",
            lines.join("\n")
        );
    }
}

/// The native flags a Debezium user knows as snapshot.mode, snapshot.fetch.size and
/// publication.autocreate.mode: with --snapshot-mode initial the rows already in the outbox
/// when the slot is made are relayed once, then the stream goes on; --publication-mode
/// filtered makes a publication of every operation; the default relays no old row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_mode_initial_relays_the_rows_already_there_once() {
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 300, 50, 7).await.unwrap();
    let relay = stack
        .spawn_relay_and_wait_for_slot(
            SLOT,
            &[
                "--snapshot-mode",
                "initial",
                "--snapshot-fetch-size",
                "7",
                "--publication-mode",
                "filtered",
            ],
        )
        .await;
    insert_events(&stack.db, 300, 100, 10, 7).await.unwrap();
    let last = stack.current_wal_lsn().await;
    stack
        .wait_confirmed(SLOT, last, Duration::from_secs(60), Some(&relay))
        .await;
    assert_eq!(lost_and_duplicated(&stack, 400).await, (0, 0));
    let publishes: (bool, bool) = {
        let row = stack
            .db
            .query_one(
                "SELECT pubupdate, pubdelete FROM pg_publication WHERE pubname = 'outbox_relay'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(publishes, (true, true), "filtered: every operation");
    drop(relay);

    // Without the flag (outbox-relay's default, no-data), a new slot relays no old row.
    let other = Stack::start().await;
    insert_events(&other.db, 0, 50, 50, 7).await.unwrap();
    let relay = other.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_events(&other.db, 50, 10, 10, 7).await.unwrap();
    let last = other.current_wal_lsn().await;
    other
        .wait_confirmed(SLOT, last, Duration::from_secs(60), Some(&relay))
        .await;
    let counts = read_all_events(&other).await.unwrap();
    assert_eq!(counts.len(), 10, "only the rows written after the slot");
    assert!(counts.iter().all(|(_, n)| *n >= 50));
}

/// `--snapshot-mode always` (Debezium's `always`): the rows already in the outbox are relayed
/// at every start, the slot's first one and a restart on the existing slot alike, and what is
/// written between two starts still streams: nothing lost, the old rows twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_mode_always_relays_the_outbox_at_every_start() {
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 20, 10, 7).await.unwrap();
    let args = [
        "--snapshot-mode",
        "always",
        "--publication-mode",
        "filtered",
    ];
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &args).await;
    insert_events(&stack.db, 20, 10, 10, 7).await.unwrap();
    let last = stack.current_wal_lsn().await;
    stack
        .wait_confirmed(SLOT, last, Duration::from_secs(60), Some(&relay))
        .await;
    let once: Vec<u64> = read_all_events(&stack)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert_eq!(
        once.len(),
        30,
        "the 20 old rows and the 10 streamed: {once:?}"
    );
    relay.terminate(Duration::from_secs(20)).unwrap();

    // Written while it is down, then started again on its slot.
    insert_events(&stack.db, 30, 5, 5, 7).await.unwrap();
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &args).await;
    let last = stack.current_wal_lsn().await;
    stack
        .wait_confirmed(SLOT, last, Duration::from_secs(60), Some(&relay))
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut counts = std::collections::BTreeMap::<u64, usize>::new();
        for (_, n) in read_all_events(&stack).await.unwrap() {
            *counts.entry(n).or_default() += 1;
        }
        // Every row of the outbox again (35), the 5 written meanwhile also streamed.
        let again = (0..35).all(|n| counts.get(&n).copied().unwrap_or(0) >= 2);
        if counts.len() == 35 && again {
            assert!(
                (30..35).all(|n| counts[&n] >= 2),
                "the rows written while it was down: {counts:?}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{counts:?}\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
