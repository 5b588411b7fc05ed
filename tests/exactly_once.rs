//! `run --exactly-once` on the real broker (durable sqlite:// storage: offsets, restarts and
//! tails are real): kill -9 at random moments, a broker restart while the relay is down and
//! two standby takeovers give every event exactly once, in per-key order; the same run
//! without the flag reports its duplicates beside it. A tail written by another producer is
//! detected.

mod common;

use common::*;
use outbox_relay_testkit::http::{get, metric, metrics_address};
use rand::RngExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const SLOT: &str = "outbox_relay";
const EVENTS: u64 = 20_000;

struct ChaosRun {
    lost: usize,
    duplicated: u32,
    /// Records of a key that came after a later event of the same key.
    out_of_order: usize,
    kills: usize,
    takeovers: usize,
    /// Replayed events the relays found already in Kafka (from their logs).
    skipped: u64,
    elapsed: Duration,
}

/// 20 kill -9 of the active relay at random moments while 20,000 events are written over 3
/// partitions per topic; at one of them the broker is restarted while no relay runs; at two
/// of them a standby is waiting and takes over.
async fn chaos(exactly_once: bool) -> ChaosRun {
    let mut stack = Stack::start().await;
    let mut args = vec![
        "--max-in-flight",
        "2000",
        "--topic-partitions",
        "3",
        // Bounds how long a takeover waits for the old holder's last requests.
        "--producer-property",
        "request.timeout.ms=5000",
    ];
    if exactly_once {
        args.push("--exactly-once");
    }
    let mut active = stack.spawn_relay_and_wait_for_slot(SLOT, &args).await;
    let writer_db = stack.pg.connect().await.unwrap();
    let writer = tokio::spawn(async move {
        const CHUNK: u64 = 500;
        for chunk in 0..EVENTS / CHUNK {
            insert_events(&writer_db, chunk * CHUNK, CHUNK, 10, 60)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    let started = Instant::now();
    let mut rng = rand::rng();
    let (mut kills, mut takeovers, mut skipped) = (0, 0, 0);
    for round in 0..20 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..700))).await;
        if round == 6 || round == 14 {
            // A standby waits for the slot; the active instance dies; the standby takes over.
            let standby = stack.spawn_relay(&args);
            standby
                .wait_for_log("standing by", Duration::from_secs(30))
                .await;
            active.kill9();
            skipped += active.exactly_once_skipped();
            kills += 1;
            takeovers += 1;
            active = standby;
            continue;
        }
        active.kill9();
        skipped += active.exactly_once_skipped();
        kills += 1;
        if round == 10 {
            // The broker restarts while no relay runs; it keeps what it acknowledged.
            stack.broker.stop();
            tokio::time::sleep(Duration::from_millis(500)).await;
            stack.broker.restart().expect("restart the broker");
        }
        active = stack.spawn_relay(&args);
    }
    writer.await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(300), Some(&active))
        .await;
    let elapsed = started.elapsed();
    skipped += active.exactly_once_skipped();
    if exactly_once {
        assert!(
            active.log().contains("exactly_once=true"),
            "{}",
            active.log()
        );
    }
    let records = read_all_events(&stack).await.unwrap();
    let mut counts = vec![0u32; EVENTS as usize];
    let mut last_per_key: HashMap<(String, String), u64> = HashMap::new();
    let mut out_of_order = 0;
    for (r, n) in &records {
        counts[*n as usize] += 1;
        let key = (r.topic.clone(), r.key_str().unwrap().to_owned());
        if let Some(previous) = last_per_key.insert(key, *n) {
            // A re-sent window repeats events; only a record older than its predecessor
            // (of the same key) that is not such a repeat is disorder.
            if previous > *n && counts[*n as usize] == 1 {
                out_of_order += 1;
            }
        }
        if exactly_once {
            let position = r.header_str("__outbox_relay.position");
            assert!(
                position.starts_with("slot=outbox_relay server=")
                    && position.ends_with(" partitions=3"),
                "{position}"
            );
        }
    }
    ChaosRun {
        lost: counts.iter().filter(|c| **c == 0).count(),
        duplicated: counts.iter().map(|c| c.saturating_sub(1)).sum(),
        out_of_order,
        kills,
        takeovers,
        skipped,
        elapsed,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_broker_restart_and_takeovers_deliver_every_event_exactly_once() {
    let with = chaos(true).await;
    let without = chaos(false).await;
    for (name, run) in [("--exactly-once", &with), ("without the flag", &without)] {
        eprintln!(
            "{name:>16}: kill -9 x{} (standby took over x{}), broker restarted x1, {EVENTS} events over 3 partitions \
             per topic ({:.1?}): lost {}, duplicated {}, out of order {}; replayed events found in Kafka and \
             skipped (at least): {}",
            run.kills, run.takeovers, run.elapsed, run.lost, run.duplicated, run.out_of_order, run.skipped
        );
    }
    assert_eq!(with.lost, 0, "events lost with --exactly-once");
    assert_eq!(with.duplicated, 0, "duplicates with --exactly-once");
    assert_eq!(with.out_of_order, 0, "per-key order with --exactly-once");
    // The kill pattern does make relays replay: the same run without the flag duplicates.
    // (Skips are counted from the logs of relays that got as far as producing after them,
    // so `skipped` is a lower bound.)
    assert_eq!(without.lost, 0, "events lost without the flag");
    assert_eq!(without.out_of_order, 0, "per-key order without the flag");
}

/// Records of the relay from before the flag, and a record another producer appended, are
/// detected at a partition's tail (and events still arrive); with the flag, keys keep the
/// partitions librdkafka gave them without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_record_at_a_partition_tail_is_detected() {
    let stack = Stack::start().await;
    let db = stack.pg.connect().await.unwrap();
    let flag = ["--topic-partitions", "3", "--exactly-once"];

    // 1. Without the flag: librdkafka places keys (murmur2).
    let mut relay = stack
        .spawn_relay_and_wait_for_slot(SLOT, &["--topic-partitions", "3"])
        .await;
    insert_events(&db, 0, 200, 10, 30).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    relay.terminate(Duration::from_secs(30)).unwrap();

    // 2. With the flag: every tail is a record without a position (the relay before the
    //    flag): detected, and nothing is skipped.
    let mut relay = stack.spawn_relay(&flag);
    insert_events(&db, 200, 200, 10, 30).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let log = relay.log();
    assert!(
        log.contains("was not written by this relay with --exactly-once"),
        "{log}"
    );
    relay.terminate(Duration::from_secs(30)).unwrap();
    let records = read_all_events(&stack).await.unwrap();
    let mut partition_of: HashMap<(String, String), i32> = HashMap::new();
    for (r, n) in &records {
        let key = (r.topic.clone(), r.key_str().unwrap().to_owned());
        let before = partition_of.insert(key.clone(), r.partition);
        assert!(
            before.is_none_or(|p| p == r.partition),
            "key {key:?} moved from partition {before:?} to {} with --exactly-once",
            r.partition
        );
        assert_eq!(
            r.header("__outbox_relay.position").is_some(),
            *n >= 200,
            "event {n}: a position header only with the flag"
        );
    }
    assert_eq!(records.len(), 400, "every event once");

    // 3. Another producer appends to one partition; the next run detects exactly that tail.
    let foreign_partition = records
        .iter()
        .find(|(r, _)| r.topic == "Order.events")
        .map(|(r, _)| r.partition)
        .unwrap();
    let bootstrap = stack.broker.bootstrap_servers();
    let foreign_offset = records
        .iter()
        .filter(|(r, _)| r.topic == "Order.events" && r.partition == foreign_partition)
        .map(|(r, _)| r.offset)
        .max()
        .unwrap()
        + 1;
    tokio::task::spawn_blocking(move || {
        outbox_relay_testkit::kafka::produce_one(
            &bootstrap,
            "Order.events",
            foreign_partition,
            b"someone-else",
            b"{}",
            // An event id outside the relay's (event 1,000,000 would be an Order).
            &[("id", event_uuid(1_000_000).as_bytes())],
        )
    })
    .await
    .unwrap()
    .unwrap();
    let relay = stack.spawn_relay(&flag);
    insert_events(&db, 400, 200, 10, 30).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let warnings: Vec<String> = relay
        .log()
        .lines()
        .filter(|l| l.contains("was not written by this relay with --exactly-once"))
        .map(str::to_owned)
        .collect();
    assert_eq!(warnings.len(), 1, "only the foreign tail: {warnings:#?}");
    assert!(
        warnings[0].contains("Order.events")
            && warnings[0].contains(&format!("partition={foreign_partition}"))
            && warnings[0].contains(&format!("offset={foreign_offset}")),
        "{}",
        warnings[0]
    );
    let address = metrics_address(&relay);
    let body = get(&address, "/metrics").1;
    assert_eq!(
        metric(&body, "outbox_relay_exactly_once_foreign_tails_total"),
        1.0
    );
    let mut counts = vec![0u32; 600];
    for (_, n) in read_all_events(&stack).await.unwrap() {
        if n < 600 {
            counts[n as usize] += 1;
        }
    }
    assert!(
        counts.iter().all(|c| *c == 1),
        "every event once: {counts:?}"
    );
}
