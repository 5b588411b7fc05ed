//! Against real PostgreSQL and the real broker: duplicates in the topic and a full offset
//! reset still apply every event exactly once; a poison record is dead-lettered.

use idempotent_consumer::{run, Config, Stats};
use outbox_relay_testkit::{kafka, Broker, PgCluster, Storage};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use std::time::Duration;

async fn produce(bootstrap: &str, records: &[(&str, &str, Option<&str>)]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    for (id, key, value) in records {
        let headers = OwnedHeaders::new().insert(Header {
            key: "id",
            value: Some(*id),
        });
        let mut r: FutureRecord<'_, str, str> =
            FutureRecord::to("Order.events").key(*key).headers(headers);
        if let Some(v) = value {
            r = r.payload(*v);
        }
        producer.send(r, Duration::from_secs(30)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_is_applied_exactly_once_even_after_an_offset_reset() {
    let pg = PgCluster::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e:#}"));
    let broker = Broker::start(Storage::Sqlite)
        .unwrap_or_else(|e| panic!("cannot start Apache Kafka: {e:#}"));
    let bootstrap = broker.bootstrap_servers();
    for topic in ["Order.events", "order-projection.dlq"] {
        kafka::create_topic(&bootstrap, topic, 1).await.unwrap();
    }
    let mut records = Vec::new();
    let ids: Vec<String> = (0..40).map(|n| format!("e-{n}")).collect();
    for (n, id) in ids.iter().enumerate() {
        records.push((
            id.as_str(),
            ["o-1", "o-2", "o-3", "o-4"][n % 4],
            Some(format!("{{\"total\": {n}}}")),
        ));
    }
    // At-least-once upstream: the same events again (as after a relay crash).
    let repeated: Vec<_> = records[30..].to_vec();
    records.extend(repeated);
    records.push(("e-40", "o-4", None)); // tombstone: order o-4 deleted
    records.push(("e-41", "o-5", Some("not json".to_owned()))); // poison
    let borrowed: Vec<(&str, &str, Option<&str>)> = records
        .iter()
        .map(|(i, k, v)| (*i, *k, v.as_deref()))
        .collect();
    produce(&bootstrap, &borrowed).await;

    let config = |group: &str| Config {
        bootstrap_servers: bootstrap.clone(),
        group_id: group.into(),
        topics: vec!["Order.events".into()],
        postgres_url: pg.url(),
        dead_letter_topic: "order-projection.dlq".into(),
        max_attempts: 3,
        stop_when_idle: Some(Duration::from_secs(8)),
    };
    let first = run(&config("projection")).await.unwrap();
    assert_eq!(
        first,
        Stats {
            applied: 41,
            duplicates_skipped: 10,
            dead_lettered: 1
        }
    );

    // Offset reset: a new group reads everything again; nothing is applied twice.
    let replay = run(&config("projection-after-reset")).await.unwrap();
    assert_eq!(
        replay,
        Stats {
            applied: 0,
            duplicates_skipped: 52,
            dead_lettered: 0
        }
    );

    let db = pg.connect().await.unwrap();
    let rows = db
        .query(
            "SELECT order_id, total::float8, events FROM order_totals ORDER BY order_id",
            &[],
        )
        .await
        .unwrap();
    let totals: Vec<(String, f64, i32)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        totals,
        [
            ("o-1".into(), 36.0, 10),
            ("o-2".into(), 37.0, 10),
            ("o-3".into(), 38.0, 10)
        ],
        "each order's events applied once; o-4 deleted by its tombstone"
    );
    let processed: i64 = db
        .query_one("SELECT count(*) FROM processed_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(processed, 42);
    let dead =
        tokio::task::spawn_blocking(move || kafka::read_topic(&bootstrap, "order-projection.dlq"))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].header("id"), Some(&b"e-41"[..]));
    assert!(String::from_utf8_lossy(dead[0].header("error.reason").unwrap()).contains("not JSON"));
}
