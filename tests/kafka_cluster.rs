//! What only a real Kafka cluster shows: three Apache Kafka nodes (replication factor 3,
//! `min.insync.replicas=2`, no unclean leader election), the relay producing with `acks=all`
//! while a writer commits events all along, and
//! - the leader of a partition killed mid-stream,
//! - too few replicas in sync for `acks=all` (NOT_ENOUGH_REPLICAS) until a broker comes back,
//! - a broker killed and restarted mid-stream,
//! - the relay killed while a broker is down, and started again before it returns.
//!
//! Each time, every committed event is in Kafka, each aggregate's events in commit order, and
//! the slot never confirms past what Kafka acknowledged.

mod common;

use common::{insert_events, OUTBOX_DDL, RELAY, TYPES};
use outbox_relay_testkit::{Cluster, ConsumedRecord, Lsn, PgCluster, RelayProcess};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

const SLOT: &str = "outbox_relay";
const AGGREGATES: u64 = 12;

struct Setup {
    cluster: Cluster,
    pg: PgCluster,
    db: tokio_postgres::Client,
}

async fn setup() -> Setup {
    let cluster = Cluster::start(3).unwrap_or_else(|e| panic!("a 3-node Kafka cluster: {e:#}"));
    let pg = PgCluster::start().unwrap_or_else(|e| panic!("PostgreSQL for this test: {e:#}"));
    let db = pg.connect().await.unwrap();
    db.batch_execute(OUTBOX_DDL).await.unwrap();
    Setup { cluster, pg, db }
}

fn relay_with(setup: &Setup, extra: &[&str]) -> RelayProcess {
    let args: Vec<String> = [
        "run",
        "--postgres-url",
        &setup.pg.url(),
        "--bootstrap-servers",
        &setup.cluster.bootstrap_servers(),
        "--topic-partitions",
        "3",
        "--topic-replication-factor",
        "3",
        "--status-interval-ms",
        "100",
        "--metrics-address",
        "127.0.0.1:0",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    RelayProcess::spawn(Path::new(RELAY), &args, &[]).unwrap()
}

/// The relay, once its slot exists (writes from then on are events).
async fn streaming_relay(setup: &Setup) -> RelayProcess {
    streaming_relay_with(setup, &[]).await
}

async fn streaming_relay_with(setup: &Setup, extra: &[&str]) -> RelayProcess {
    let relay = relay_with(setup, extra);
    outbox_relay_testkit::wait_confirmed(
        &setup.db,
        SLOT,
        Lsn::from_u64(1),
        Duration::from_secs(60),
        || report(setup, &relay),
    )
    .await;
    relay
}

fn report(setup: &Setup, relay: &RelayProcess) -> String {
    format!(
        "relay log:\n{}\ncluster:\n{}",
        relay.log(),
        setup.cluster.log()
    )
}

async fn wait_delivered(setup: &Setup, relay: &RelayProcess, timeout: Duration) -> Lsn {
    outbox_relay_testkit::wait_delivered(&setup.db, SLOT, timeout, || report(setup, relay)).await
}

/// Every `<type>.events` record, with its event number.
async fn read_events(setup: &Setup) -> Vec<(ConsumedRecord, u64)> {
    let bootstrap = setup.cluster.bootstrap_servers();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for t in TYPES {
            let topic = format!("{t}.events");
            for r in outbox_relay_testkit::read_topic(&bootstrap, &topic).unwrap() {
                let id = r.header_str("id").to_owned();
                let n = u64::from_str_radix(id.rsplit('-').next().unwrap(), 16).unwrap();
                assert_eq!(TYPES[(n % 4) as usize], t, "event {n} on {topic}");
                out.push((r, n));
            }
        }
        out
    })
    .await
    .unwrap()
}

/// Nothing of `0..total` lost, and each aggregate's events (one key, one partition) in the
/// order they were committed. Duplicates are allowed (at-least-once) but never out of order.
async fn assert_complete_and_ordered(setup: &Setup, relay: &RelayProcess, total: u64) {
    let events = read_events(setup).await;
    let mut seen = vec![0u32; total as usize];
    let mut last: HashMap<(String, Vec<u8>), u64> = HashMap::new();
    for (record, n) in &events {
        seen[*n as usize] += 1;
        let key = (record.topic.clone(), record.key.clone().unwrap());
        if let Some(previous) = last.insert(key.clone(), *n) {
            assert!(
                *n > previous || seen[*n as usize] > 1,
                "{}: event {n} after {previous} on partition {}",
                String::from_utf8_lossy(&key.1),
                record.partition
            );
        }
    }
    let lost: Vec<usize> = (0..total as usize).filter(|n| seen[*n] == 0).collect();
    if !lost.is_empty() {
        // Where the missing ones are: dead letters, or the partitions' records as read.
        let bootstrap = setup.cluster.bootstrap_servers();
        let dead = tokio::task::spawn_blocking(move || {
            outbox_relay_testkit::read_topic(&bootstrap, "outbox-relay.dlq")
                .map(|records| {
                    records
                        .iter()
                        .map(|r| r.header_str("outbox-relay.error.reason").to_owned())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .await
        .unwrap();
        panic!(
            "lost {} events: {:?}; dead letters {dead:?}; {} records read\n{}",
            lost.len(),
            &lost[..lost.len().min(20)],
            events.len(),
            report(setup, relay)
        );
    }
}

/// Commits `count` events from `first` in transactions of 5, a little at a time.
async fn write(db: &tokio_postgres::Client, first: u64, count: u64) {
    let mut n = first;
    while n < first + count {
        insert_events(db, n, 50, 5, AGGREGATES).await.unwrap();
        n += 50;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_leader_killed_mid_stream_loses_nothing_and_keeps_order() {
    let mut setup = setup().await;
    // A partition still unanswered when the wait below gives up is named in the relay's log.
    let relay = streaming_relay_with(&setup, &["--stuck-partition-after", "60"]).await;
    write(&setup.db, 0, 1000).await;
    let leader = setup.cluster.leader("Order.events", 0).unwrap();
    setup.cluster.kill(leader);
    write(&setup.db, 1000, 1000).await;
    wait_delivered(&setup, &relay, Duration::from_secs(120)).await;
    let new_leader = setup.cluster.leader("Order.events", 0).unwrap();
    assert_ne!(new_leader, leader, "a replica in sync took over");
    // The read-back consumer takes every broker it knows of as it starts.
    setup.cluster.start_node(leader).unwrap();
    assert_complete_and_ordered(&setup, &relay, 2000).await;
}

/// `Order.events` created ahead with `min.insync.replicas=3`: with one broker down (and out of
/// the in-sync set after `replica.lag.time.max.ms`), the broker answers NOT_ENOUGH_REPLICAS for
/// its partitions. The slot holds; those partitions are reported stuck (/ready red naming them,
/// the metric) while the other topics keep being written; all clears when the broker returns.
/// The canary's topic, made the same way, stalls too: /ready turns red for the canary within
/// `--canary-max-age`, and green again with the broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_in_sync_hold_the_slot_until_a_broker_returns() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let mut setup = setup().await;
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", setup.cluster.bootstrap_servers())
        .create()
        .unwrap();
    // The canary's topic too: a stalled partition of it turns /ready red within
    // --canary-max-age, well before --stuck-partition-after.
    let topics = ["Order.events".to_owned(), "outbox-relay.canary".to_owned()];
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|t| NewTopic::new(t, 3, TopicReplication::Fixed(3)).set("min.insync.replicas", "3"))
        .collect();
    for created in admin
        .create_topics(&new, &AdminOptions::new())
        .await
        .unwrap()
    {
        created.unwrap();
    }
    // Long enough for the other topics' new leaders to be learned after the kill (a few
    // seconds on a loaded machine); Order.events waits as long as the broker is away.
    let relay = streaming_relay_with(
        &setup,
        &[
            "--stuck-partition-after",
            "20",
            "--canary-interval",
            "1",
            "--canary-max-age",
            "6",
        ],
    )
    .await;
    let address = outbox_relay_testkit::http::metrics_address(&relay);
    write(&setup.db, 0, 200).await;
    wait_delivered(&setup, &relay, Duration::from_secs(60)).await;
    let customers = |setup: &Setup| {
        let bootstrap = setup.cluster.bootstrap_servers();
        async move {
            // With a broker down, a read may meet it before the client learns the new
            // leaders: read again.
            tokio::task::spawn_blocking(move || {
                let mut tries = 0;
                loop {
                    match outbox_relay_testkit::read_topic(&bootstrap, "Customer.events") {
                        Ok(records) => break records.len(),
                        Err(e) if tries < 20 => {
                            tries += 1;
                            eprintln!("reading Customer.events again: {e:#}");
                            std::thread::sleep(Duration::from_millis(500));
                        }
                        Err(e) => panic!("reading Customer.events: {e:#}"),
                    }
                }
            })
            .await
            .unwrap()
        }
    };
    let customers_before = customers(&setup).await;
    outbox_relay_testkit::http::wait_status(&address, "/ready", 200, Duration::from_secs(30)).await;
    setup.cluster.kill(3);
    let killed = std::time::Instant::now();
    let before = outbox_relay_testkit::current_wal_lsn(&setup.db).await;
    write(&setup.db, 200, 300).await;
    // The canary's partitions stall: /ready red for the canary within its threshold.
    loop {
        let (status, body) = outbox_relay_testkit::http::get(&address, "/ready");
        if status == 503 && body.contains("canary") {
            eprintln!(
                "canary partition stalled: /ready red after {:?}",
                killed.elapsed()
            );
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(6 + 10),
            "/ready not red for the canary {:?} after its partitions stalled (last: {status} {body}):\n{}",
            killed.elapsed(),
            report(&setup, &relay)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Long enough for the in-sync set to shrink, the broker to refuse, and the relay to
    // report the partitions it cannot get an answer for.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let ready = loop {
        let (status, body) = outbox_relay_testkit::http::get(&address, "/ready");
        if status == 503 && body.contains("Order.events partition") {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "/ready never named a stuck Order.events partition (last: {status} {body}):\n{}",
            report(&setup, &relay)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let (_, metrics) = outbox_relay_testkit::http::get(&address, "/metrics");
    assert!(
        outbox_relay_testkit::http::metric(&metrics, "outbox_relay_stuck_partitions") >= 1.0,
        "{metrics}"
    );
    assert!(
        relay
            .log()
            .contains("no acknowledgement from Kafka for Order.events partition"),
        "the error names topic and partition:\n{}",
        relay.log()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while customers(&setup).await <= customers_before {
        assert!(
            std::time::Instant::now() < deadline,
            "the other topics keep being written while Order.events is stuck ({ready})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let confirmed = outbox_relay_testkit::confirmed_flush_lsn(&setup.db, SLOT)
        .await
        .unwrap();
    assert!(
        confirmed <= before,
        "the slot moved to {confirmed} past {before} while Kafka could not acknowledge:\n{}",
        report(&setup, &relay)
    );
    setup.cluster.start_node(3).unwrap();
    wait_delivered(&setup, &relay, Duration::from_secs(180)).await;
    outbox_relay_testkit::http::wait_status(&address, "/ready", 200, Duration::from_secs(30)).await;
    let (_, metrics) = outbox_relay_testkit::http::get(&address, "/metrics");
    assert_eq!(
        outbox_relay_testkit::http::metric(&metrics, "outbox_relay_stuck_partitions"),
        0.0
    );
    assert_complete_and_ordered(&setup, &relay, 500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restarted_mid_stream_loses_nothing_and_keeps_order() {
    let mut setup = setup().await;
    let relay = streaming_relay(&setup).await;
    write(&setup.db, 0, 600).await;
    setup.cluster.kill(1);
    write(&setup.db, 600, 600).await;
    setup.cluster.start_node(1).unwrap();
    write(&setup.db, 1200, 600).await;
    wait_delivered(&setup, &relay, Duration::from_secs(120)).await;
    assert_complete_and_ordered(&setup, &relay, 1800).await;
}

/// A new session while a broker is away: its producer knows no partition, so each one's first
/// record travels alone again (the next ones parked behind it), and those led by the killed
/// broker wait for their new leaders. Killed with -9 mid-stream, the relay resumes from the
/// slot: nothing lost, each aggregate in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_restarted_while_a_broker_is_down_loses_nothing_and_keeps_order() {
    let mut setup = setup().await;
    let mut relay = streaming_relay(&setup).await;
    write(&setup.db, 0, 500).await;
    wait_delivered(&setup, &relay, Duration::from_secs(60)).await;
    setup.cluster.kill(1);
    write(&setup.db, 500, 500).await;
    relay.kill9();
    let relay = relay_with(&setup, &["--stuck-partition-after", "60"]);
    write(&setup.db, 1000, 500).await;
    wait_delivered(&setup, &relay, Duration::from_secs(120)).await;
    setup.cluster.start_node(1).unwrap();
    assert_complete_and_ordered(&setup, &relay, 1500).await;
}
