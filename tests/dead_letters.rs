//! `outbox-relay dead-letters list | replay` on a real PostgreSQL and Apache Kafka: a
//! configuration bug dead-letters 1,000 events; the fixed configuration replays them, each to
//! its topic with the key, headers and value `run` gives it; a second replay sends none;
//! `--dry-run` sends nothing; a replay with the bug still in place reports and leaves them.
//! Kafka Connect's errors.deadletterqueue records replay to the topic they came from.

mod common;

use common::*;
use std::collections::HashMap;
use std::time::Duration;

const SLOT: &str = "outbox_relay";
const DLQ: &str = "outbox-relay.dlq";
const MARKERS: &str = "outbox-relay.dlq.replayed";
/// The bug: a topic template that renders names Kafka refuses (a space).
const BROKEN: &[&str] = &["--topic-template", "${routedByValue} events"];

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `outbox-relay dead-letters <command>` with `run`'s settings and `extra`.
fn dead_letters(stack: &Stack, command: &str, extra: &[&str]) -> Output {
    let (code, stdout, stderr) = stack.command(&["dead-letters", command], extra);
    Output {
        code,
        stdout,
        stderr,
    }
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The last line of `--json` output: the summary.
fn summary(out: &Output) -> serde_json::Value {
    let lines = json_lines(&out.stdout);
    lines.last().expect("a summary line")["summary"].clone()
}

/// The records of `topic` once at least `want` are readable: a transaction's records are
/// readable (read_committed) only once its commit markers reached the partition, a moment
/// after commit_transaction returned.
async fn read_committed(
    stack: &Stack,
    topic: &str,
    want: usize,
) -> Vec<outbox_relay_testkit::ConsumedRecord> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let records = stack.read_topic(topic).await;
        if records.len() >= want || std::time::Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_bug_dead_letters_1000_events_and_the_fixed_configuration_replays_each_once(
) {
    let stack = Stack::start().await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, BROKEN).await;
    insert_events(&stack.db, 0, 1000, 100, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(120), Some(&relay))
        .await;
    relay.terminate(Duration::from_secs(20)).unwrap();
    assert_eq!(stack.read_topic(DLQ).await.len(), 1000);

    // list: every dead letter, its reason, table, position and original topic.
    let listed = dead_letters(&stack, "list", &["--json"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let letters = json_lines(&listed.stdout);
    assert_eq!(letters.len(), 1000);
    for letter in &letters {
        assert!(
            letter["reason"]
                .as_str()
                .unwrap()
                .contains("Kafka allows only"),
            "{letter}"
        );
        assert_eq!(letter["table"], "public.outbox");
        assert!(letter["lsn"].as_str().unwrap().contains('/'), "{letter}");
        assert!(letter["key"].as_str().unwrap().starts_with("agg-"));
        assert_eq!(letter["has_row"], true);
    }
    let first = &letters[0];
    assert_eq!(
        first["original_topic"], "Order events",
        "event 0 is an Order"
    );
    assert_eq!(first["id"], event_uuid(0));
    // The filters.
    let count = |extra: &[&str]| {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let out = dead_letters(&stack, "list", &args);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        json_lines(&out.stdout).len()
    };
    assert_eq!(count(&["--topic", "Order events"]), 250);
    assert_eq!(count(&["--reason", "KAFKA ALLOWS ONLY"]), 1000);
    assert_eq!(count(&["--reason", "too large"]), 0);
    assert_eq!(count(&["--since", "1h"]), 1000);
    assert_eq!(count(&["--since", "2999-01-01T00:00:00Z"]), 0);
    let table = dead_letters(&stack, "list", &["--topic", "Invoice events"]);
    assert!(
        table.stdout.starts_with("PARTITION/OFFSET"),
        "{}",
        table.stdout
    );
    assert!(
        table
            .stdout
            .contains("250 dead letter(s) shown of 1000 in outbox-relay.dlq"),
        "{}",
        table.stdout
    );
    let bad = dead_letters(&stack, "list", &["--since", "soon"]);
    assert_eq!(bad.code, Some(2));
    assert!(bad.stderr.contains("--since"), "{}", bad.stderr);

    // With the bug still in place: each is reported and left, nothing is dead-lettered again.
    let mut still_broken = BROKEN.to_vec();
    still_broken.push("--json");
    let refused = dead_letters(&stack, "replay", &still_broken);
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert_eq!(summary(&refused)["not_replayable"], 1000);
    assert_eq!(summary(&refused)["replayed"], 0);
    assert_eq!(
        refused
            .stderr
            .matches("still cannot be routed with the current configuration")
            .count(),
        1000,
        "{}",
        refused.stderr
    );
    assert_eq!(stack.read_topic(DLQ).await.len(), 1000);

    // --dry-run with the fix: what would go where, and nothing produced.
    let dry = dead_letters(&stack, "replay", &["--dry-run", "--json"]);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let planned = json_lines(&dry.stdout);
    assert_eq!(planned.len(), 1001);
    // The dead-letter topic, by its Kafka id (a topic made again has another), partition, offset.
    let place = planned[0]["dead_letter"].as_str().unwrap();
    assert!(
        place.starts_with("outbox-relay.dlq@") && place.ends_with("/0/0"),
        "{place}"
    );
    assert_eq!(planned[0]["topic"], "Order.events");
    assert_eq!(planned[0]["key"], "agg-0");
    assert_eq!(planned[0]["headers"]["id"], event_uuid(0));
    assert_eq!(planned[0]["headers"]["eventType"], "Event0");
    assert_eq!(planned[0]["value"], r#"{"n": 0}"#);
    assert_eq!(summary(&dry)["replayed"], 1000);
    assert_eq!(summary(&dry)["dry_run"], true);
    let topics = stack.topics().await;
    assert!(
        !topics
            .iter()
            .any(|t| t.ends_with(".events") || t == MARKERS),
        "a dry run creates and produces nothing: {topics:?}"
    );

    // The fixed configuration runs on: later events of the same keys arrive first.
    let mut relay = stack.spawn_relay(&[]);
    insert_events(&stack.db, 1000, 10, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    relay.terminate(Duration::from_secs(20)).unwrap();

    let replay = dead_letters(&stack, "replay", &[]);
    assert_eq!(replay.code, Some(0), "{}\n{}", replay.stdout, replay.stderr);
    assert!(
        replay
            .stdout
            .contains("replayed 1000, skipped (already replayed) 0, not replayable 0"),
        "{}",
        replay.stdout
    );
    // Every event once, on its topic (read_all_events checks the routing), as `run` writes it.
    // Readable once the transactions' commit markers reached every partition.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while read_all_events(&stack).await.unwrap().len() < 1010
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let events = read_all_events(&stack).await.unwrap();
    assert_eq!(lost_and_duplicated(&stack, 1010).await, (0, 0));
    for (record, n) in &events {
        assert_eq!(record.key_str(), Some(format!("agg-{}", n % 10).as_str()));
        assert_eq!(
            record.value_str(),
            Some(format!(r#"{{"n": {n}}}"#).as_str())
        );
        let headers: Vec<&str> = record.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(headers, ["id", "eventType"], "event {n}");
        assert_eq!(record.header_str("eventType"), format!("Event{n}"));
    }
    // Per key, the events written after the fix come before the replayed ones.
    let mut per_key: HashMap<String, Vec<u64>> = HashMap::new();
    for (record, n) in &events {
        per_key
            .entry(format!("{}/{}", record.topic, record.key_str().unwrap()))
            .or_default()
            .push(*n);
    }
    for (key, ns) in &per_key {
        let later = ns.iter().filter(|n| **n >= 1000).count();
        assert!(
            ns[..later].iter().all(|n| *n >= 1000) && ns[later..].windows(2).all(|w| w[0] < w[1]),
            "{key}: {ns:?}"
        );
    }
    assert_eq!(read_committed(&stack, MARKERS, 1000).await.len(), 1000);

    // A second replay sends none.
    let again = dead_letters(&stack, "replay", &["--json"]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(summary(&again)["replayed"], 0);
    assert_eq!(summary(&again)["skipped"], 1000);
    assert_eq!(lost_and_duplicated(&stack, 1010).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_connect_dead_letter_queue_record_replays_to_the_topic_it_came_from() {
    let stack = Stack::start().await;
    let bootstrap = stack.broker.bootstrap_servers();
    let dlq = "dlq-jdbc-sink";
    outbox_relay_testkit::kafka::create_topic(&bootstrap, dlq, 1)
        .await
        .unwrap();
    outbox_relay_testkit::kafka::create_topic(&bootstrap, "payments", 1)
        .await
        .unwrap();
    let produce = |key: &'static [u8],
                   value: &'static [u8],
                   headers: Vec<(&'static str, &'static [u8])>| {
        let bootstrap = bootstrap.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                outbox_relay_testkit::kafka::produce_one(&bootstrap, dlq, 0, key, value, &headers)
            })
            .await
            .unwrap()
            .unwrap()
        }
    };
    // As Kafka Connect's DeadLetterQueueReporter writes it, with context headers on.
    produce(
        b"p-7",
        b"{\"amount\": 12}",
        vec![
            ("traceparent", b"00-abc-01"),
            ("__connect.errors.topic", b"payments"),
            ("__connect.errors.partition", b"0"),
            ("__connect.errors.offset", b"41"),
            ("__connect.errors.connector.name", b"jdbc-sink"),
            ("__connect.errors.task.id", b"0"),
            ("__connect.errors.stage", b"VALUE_CONVERTER"),
            (
                "__connect.errors.class.name",
                b"org.apache.kafka.connect.json.JsonConverter",
            ),
            (
                "__connect.errors.exception.class.name",
                b"org.apache.kafka.connect.errors.DataException",
            ),
            (
                "__connect.errors.exception.message",
                b"Converting byte[] to Kafka Connect data failed due to serialization error",
            ),
        ],
    )
    .await;
    // Without the context headers: nowhere to go back to.
    produce(
        b"p-8",
        b"{}",
        vec![("__connect.errors.exception.message", b"boom")],
    )
    .await;

    let listed = dead_letters(&stack, "list", &["--dead-letter-topic", dlq, "--json"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let letters = json_lines(&listed.stdout);
    assert_eq!(letters.len(), 2);
    assert_eq!(letters[0]["format"], "kafka-connect");
    assert_eq!(
        letters[0]["reason"],
        "Converting byte[] to Kafka Connect data failed due to serialization error"
    );
    assert_eq!(letters[0]["original_topic"], "payments");
    assert_eq!(letters[0]["key"], "p-7");

    let replay = dead_letters(&stack, "replay", &["--dead-letter-topic", dlq]);
    assert_eq!(
        replay.code,
        Some(1),
        "one cannot be replayed: {}",
        replay.stderr
    );
    assert!(
        replay
            .stdout
            .contains("replayed 1, skipped (already replayed) 0, not replayable 1"),
        "{}",
        replay.stdout
    );
    assert!(
        replay.stderr.contains("dlq-jdbc-sink@")
            && replay.stderr.contains("/0/1: no __connect.errors.topic"),
        "{}",
        replay.stderr
    );
    let payments = read_committed(&stack, "payments", 1).await;
    assert_eq!(payments.len(), 1);
    assert_eq!(payments[0].key_str(), Some("p-7"));
    assert_eq!(payments[0].value_str(), Some("{\"amount\": 12}"));
    let headers: Vec<&str> = payments[0]
        .headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(
        headers,
        ["traceparent"],
        "no __connect.errors.* header goes back"
    );
    assert_eq!(
        stack.read_topic("dlq-jdbc-sink.replayed").await.len(),
        1,
        "its marker"
    );

    let again = dead_letters(&stack, "replay", &["--dead-letter-topic", dlq]);
    assert!(
        again
            .stdout
            .contains("replayed 0, skipped (already replayed) 1, not replayable 1"),
        "{}",
        again.stdout
    );
    assert_eq!(stack.read_topic("payments").await.len(), 1);
}

/// Polling mode reads rows with SQL: its dead letters carry the row too, and replay alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_mode_dead_letters_replay_like_the_streams() {
    let stack = Stack::start().await;
    let mut args = vec!["--mode", "polling", "--poll-interval-ms", "50"];
    args.extend_from_slice(BROKEN);
    let relay = stack.spawn_relay(&args);
    insert_events(&stack.db, 0, 20, 10, 5).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !stack.topics().await.iter().any(|t| t == DLQ) || stack.read_topic(DLQ).await.len() < 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "not dead-lettered:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(relay);
    let dead = stack.read_topic(DLQ).await;
    assert_eq!(dead.len(), 20);
    assert_eq!(
        dead[0].header("outbox-relay.source.lsn"),
        None,
        "a polled row has no WAL position"
    );

    let replay = dead_letters(&stack, "replay", &["--mode", "polling"]);
    assert_eq!(replay.code, Some(0), "{}\n{}", replay.stdout, replay.stderr);
    assert!(
        replay
            .stdout
            .contains("replayed 20, skipped (already replayed) 0, not replayable 0"),
        "{}",
        replay.stdout
    );
    assert_eq!(lost_and_duplicated(&stack, 20).await, (0, 0));
}

/// The dead-letter topic deleted and made again restarts its offsets at 0. The new topic's
/// letters are not the old one's at the same places: a replay sends them, none is taken as
/// replayed already (the markers name the topic's Kafka id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_topic_made_again_has_its_letters_replayed() {
    let stack = Stack::start().await;
    let bootstrap = stack.broker.bootstrap_servers();
    // Three letters, replayed with the fixed configuration.
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, BROKEN).await;
    insert_events(&stack.db, 0, 3, 1, 3).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    relay.terminate(Duration::from_secs(20)).unwrap();
    let first = dead_letters(&stack, "replay", &["--json"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(summary(&first)["replayed"], 3, "{}", first.stdout);

    // The topic is deleted and made again; three new letters take offsets 0 to 2 again.
    outbox_relay_testkit::kafka::delete_topic(&bootstrap, DLQ)
        .await
        .unwrap();
    outbox_relay_testkit::kafka::create_topic(&bootstrap, DLQ, 1)
        .await
        .unwrap();
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, BROKEN).await;
    insert_events(&stack.db, 3, 3, 1, 3).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    relay.terminate(Duration::from_secs(20)).unwrap();
    let letters = stack.read_topic(DLQ).await;
    assert_eq!(
        letters.iter().map(|l| l.offset).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    let second = dead_letters(&stack, "replay", &["--json"]);
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert_eq!(
        (
            summary(&second)["replayed"].clone(),
            summary(&second)["skipped"].clone()
        ),
        (3.into(), 0.into()),
        "{}",
        second.stdout
    );
    let (lost, duplicated) = lost_and_duplicated(&stack, 6).await;
    assert_eq!((lost, duplicated), (0, 0));
}
