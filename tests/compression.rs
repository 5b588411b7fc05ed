//! `compression.type` with every codec the broker supports (librdkafka is built with zstd
//! here; `producer.override.compression.type=zstd` from a Debezium config used to be refused
//! at start-up): the relay starts, every event arrives once and intact, and librdkafka's own
//! account of each produce request (`debug=msg`: "Produce MessageSet with N message(s) (…,
//! <codec>)") names the codec, so the records travelled compressed.

mod common;

use common::*;
use outbox_relay_testkit::{RelayProcess, Storage};
use std::path::Path;
use std::time::Duration;

const SLOT: &str = "outbox_relay";

async fn relay_with(codec: &str, storage: Storage, debezium: Option<&Path>) -> String {
    let stack = Stack::start_with(storage).await;
    let mut extra = vec!["--producer-property".to_owned(), "debug=msg".to_owned()];
    match debezium {
        Some(config) => extra.extend(["--debezium-config".into(), config.display().to_string()]),
        None => extra.extend([
            "--producer-property".into(),
            format!("compression.type={codec}"),
        ]),
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut relay = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args(&extra),
        &[("RUST_LOG", "info,librdkafka=debug")],
    )
    .expect("start outbox-relay");
    stack.wait_for_slot(SLOT, &relay).await;
    insert_events(&stack.db, 0, 300, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let (lost, duplicated) = lost_and_duplicated(&stack, 300).await;
    assert_eq!((lost, duplicated), (0, 0), "{codec}: every event once");
    for (record, n) in read_all_events(&stack).await.unwrap() {
        assert_eq!(record.value_str(), Some(format!("{{\"n\": {n}}}").as_str()));
    }
    let log = relay.log();
    relay.terminate(Duration::from_secs(20)).unwrap();
    // The events' produce requests (the canary's, one small record, librdkafka may leave
    // uncompressed when compressing would make it larger).
    let sent: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Produce MessageSet with") && !l.contains("outbox-relay.canary"))
        .collect();
    assert!(
        !sent.is_empty(),
        "{codec}: librdkafka's produce log:\n{log}"
    );
    let named = if codec == "none" {
        "uncompressed)".to_owned()
    } else {
        format!("{codec})")
    };
    assert!(
        sent.iter().all(|l| l.contains(&named)),
        "{codec}: every produce request is {named}: {sent:#?}"
    );
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_arrive_with_every_codec_the_broker_supports() {
    for codec in ["none", "gzip", "lz4", "zstd"] {
        relay_with(codec, Storage::Sqlite, None).await;
    }
    // tansu's sqlite engine cannot serve snappy batches back (broker notes); its memory
    // engine can.
    relay_with("snappy", Storage::Memory, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debezium_config_with_zstd_runs_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("connector.json");
    std::fs::write(
        &config,
        r#"{"name": "outbox", "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "pgoutput",
            "database.hostname": "db.example",
            "database.user": "postgres",
            "database.dbname": "postgres",
            "topic.prefix": "app",
            "slot.name": "outbox_relay",
            "table.include.list": "public.outbox",
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.route.by.field": "aggregate_type",
            "transforms.outbox.route.topic.replacement": "${routedByValue}.events",
            "transforms.outbox.table.field.event.key": "aggregate_id",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "producer.override.compression.type": "zstd"
        }}"#,
    )
    .unwrap();
    relay_with("zstd", Storage::Sqlite, Some(&config)).await;
}
