//! Drop-in for Debezium: connector configurations run as they are, and consumers read the
//! bytes Kafka Connect + Debezium would have written. Real PostgreSQL 15, real broker.
//!
//! Expected bytes are derived from Debezium's EventRouterDelegate (value = payload with
//! the column's Connect schema; envelope struct named `<prefix>.<schema>.<table>.
//! <routedByValue>.Value`; header `id` first), PostgresValueConverter (jsonb ->
//! io.debezium.data.Json, uuid -> io.debezium.data.Uuid, optional = nullable, literal
//! defaults), and Kafka's JsonConverter.asJsonSchema / convertToJson (field order type,
//! fields, optional, name, version, default, field), StringConverter and
//! SimpleHeaderConverter. See shared/docs/debezium-reference.md.

mod common;

use common::*;
use outbox_relay_testkit::{ConsumedRecord, RelayProcess, Storage};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/debezium")
        .join(name)
        .display()
        .to_string()
}

/// `outbox-relay check --debezium-config FILE`, which must refuse the configuration (exit 2):
/// what it said.
fn refused_by_check(config: &str) -> String {
    let out = std::process::Command::new(RELAY)
        .args(["check", "--debezium-config", config])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{said}");
    said
}

fn write_config(dir: &Path, name: &str, config: serde_json::Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    path.display().to_string()
}

fn text(b: &Option<Vec<u8>>) -> &str {
    std::str::from_utf8(b.as_deref().expect("not null")).unwrap()
}

async fn wait_all_confirmed(stack: &Stack, slot: &str, relay: &RelayProcess) {
    stack
        .wait_delivered(slot, Duration::from_secs(60), Some(relay))
        .await;
}

async fn reset(stack: &Stack, slot: &str, publication: &str) {
    stack
        .db
        .batch_execute(&format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}';
             DROP PUBLICATION IF EXISTS {publication};
             DROP TABLE IF EXISTS public.outbox, public.outbox_events, public.outbox_relay_snapshots, public.outbox_relay_slots;"
        ))
        .await
        .unwrap();
}

/// The seeds' DDL, verbatim apart from the table name column lists.
const SEED_OUTBOX: &str = "CREATE TABLE outbox (
    id UUID PRIMARY KEY,
    aggregate_type VARCHAR(255) NOT NULL,
    aggregate_id VARCHAR(255) NOT NULL,
    event_type VARCHAR(255) NOT NULL,
    payload JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);";
const SEED_003_OUTBOX_EVENTS: &str = "CREATE TABLE outbox_events (
    id UUID PRIMARY KEY,
    aggregate_id UUID NOT NULL,
    aggregate_type VARCHAR(255) NOT NULL,
    topic VARCHAR(255) NOT NULL,
    payload JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);";
const SEED_004_OUTBOX_EVENTS: &str = "CREATE TABLE outbox_events (
    id UUID PRIMARY KEY,
    aggregate_type VARCHAR(255) NOT NULL,
    aggregate_id VARCHAR(255) NOT NULL,
    event_type VARCHAR(255) NOT NULL,
    payload JSONB NOT NULL,
    created_at TIMESTAMPTZ DEFAULT NOW()
);";

fn uuid(n: u64) -> String {
    format!("6b1c0e4e-0000-4000-8000-{n:012x}")
}

/// Runs one seed connector configuration unchanged (only the database address and the
/// brokers come from the command line, as they differ from the article's hosts): two rows
/// exist before the first start (snapshot.mode defaults to initial), two are written while
/// it streams. Returns the records of `topic`.
async fn run_seed(
    stack: &Stack,
    config: &str,
    ddl: &str,
    insert: &dyn Fn(u64) -> String,
    topic: &str,
) -> Vec<ConsumedRecord> {
    reset(stack, "debezium", "dbz_publication").await;
    stack.db.batch_execute(ddl).await.unwrap();
    for n in 0..2 {
        stack.db.batch_execute(&insert(n)).await.unwrap();
    }
    let relay = stack.spawn_relay(&["--debezium-config", &fixture(config)]);
    stack.wait_for_slot("debezium", &relay).await;
    for n in 2..4 {
        stack.db.batch_execute(&insert(n)).await.unwrap();
    }
    wait_all_confirmed(stack, "debezium", &relay).await;
    let mut relay = relay;
    relay.terminate(Duration::from_secs(20)).unwrap();
    let log = relay.log();
    assert!(
        !log.contains("not known to outbox-relay"),
        "{config}: unknown options:\n{log}"
    );
    assert!(
        log.contains("Kafka Connect default") || log.contains("connector config"),
        "{config}: converters not logged:\n{log}"
    );
    stack.read_topic(topic).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_seed_connector_config_runs_as_it_is_with_debezium_bytes() {
    let stack = Stack::start_with_schema(Storage::Sqlite, "SELECT 1").await;
    let json_payload = |n: u64| format!(r#"{{"n": {n}, "note": "line\nbreak \"q\""}}"#);
    let escaped = |n: u64| format!(r#"{{\"n\": {n}, \"note\": \"line\\nbreak \\\"q\\\"\"}}"#);
    let insert_outbox = |table: &'static str, kind: &'static str| {
        move |n: u64| {
            format!(
                "INSERT INTO {table} (id, aggregate_type, aggregate_id, event_type, payload) VALUES ('{}', '{kind}', '{kind}-{}', 'Created', '{}')",
                uuid(n),
                n % 2,
                json_payload(n).replace('\n', "\\n").replace('\'', "''")
            )
        }
    };

    // 000: no converters anywhere -> Kafka Connect's stock JsonConverter with schemas.
    let records = run_seed(
        &stack,
        "seed-000-outbox-connector.json",
        SEED_OUTBOX,
        &insert_outbox("outbox", "Order"),
        "Order.events",
    )
    .await;
    assert_eq!(records.len(), 4, "{records:?}");
    for (n, r) in records.iter().enumerate() {
        let n = n as u64;
        assert_eq!(
            text(&r.key),
            format!(
                r#"{{"schema":{{"type":"string","optional":false}},"payload":"Order-{}"}}"#,
                n % 2
            )
        );
        assert_eq!(
            text(&r.value),
            format!(
                r#"{{"schema":{{"type":"string","optional":false,"name":"io.debezium.data.Json","version":1}},"payload":"{}"}}"#,
                escaped(n)
            )
        );
        assert_eq!(router_headers(r, "orders-server"), ["id"]);
        assert_eq!(r.header_str("id"), uuid(n));
    }

    // 001: StringConverter keys, JsonConverter without schemas: a double-encoded payload.
    let records = run_seed(
        &stack,
        "seed-001-user-outbox-connector.json",
        SEED_OUTBOX,
        &insert_outbox("outbox", "User"),
        "User.events",
    )
    .await;
    let seen: Vec<(&str, String)> = records
        .iter()
        .map(|r| (text(&r.key), text(&r.value).to_owned()))
        .collect();
    assert_eq!(
        seen,
        (0..4)
            .map(|n| (
                ["User-0", "User-1"][n as usize % 2],
                format!("\"{}\"", escaped(n))
            ))
            .collect::<Vec<_>>()
    );

    // 003: uuid aggregate ids -> io.debezium.data.Uuid key schema; "${routedByValue}.events.created".
    let insert_003 = |n: u64| {
        format!(
            "INSERT INTO outbox_events (id, aggregate_id, aggregate_type, topic, payload) VALUES ('{}', '{}', 'Payment', 'payments', '{{\"n\": {n}}}')",
            uuid(n),
            uuid(100 + n)
        )
    };
    let records = run_seed(
        &stack,
        "seed-003-order-outbox-connector.json",
        SEED_003_OUTBOX_EVENTS,
        &insert_003,
        "Payment.events.created",
    )
    .await;
    assert_eq!(records.len(), 4);
    assert_eq!(
        text(&records[3].key),
        format!(
            r#"{{"schema":{{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1}},"payload":"{}"}}"#,
            uuid(103)
        )
    );
    assert_eq!(
        text(&records[3].value),
        r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Json","version":1},"payload":"{\"n\": 3}"}"#
    );

    // 004: plugin.name=pgoutput spelled out; same bytes as 000.
    let records = run_seed(
        &stack,
        "seed-004-outbox-connector.json",
        SEED_004_OUTBOX_EVENTS,
        &insert_outbox("outbox_events", "Invoice"),
        "Invoice.events",
    )
    .await;
    assert_eq!(records.len(), 4);
    assert_eq!(
        text(&records[0].key),
        r#"{"schema":{"type":"string","optional":false},"payload":"Invoice-0"}"#
    );
    assert_eq!(records[2].header_str("id"), uuid(2));
}

/// A table using Debezium's default column names plus every column an option can place.
const EVENTS_TABLE: &str = "CREATE TABLE public.events (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255),
    aggregateid varchar(255) NOT NULL,
    type varchar(64) NOT NULL,
    payload jsonb,
    shard int4,
    version int4 NOT NULL DEFAULT 1,
    occurred_at timestamp,
    tracingspancontext text,
    status varchar(20) NOT NULL DEFAULT 'new'
);";

fn connector(slot: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut config = serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "ignored-the-command-line-wins",
        "database.user": "ignored",
        "database.dbname": "ignored",
        "topic.prefix": "app",
        "slot.name": slot,
        "publication.name": format!("{slot}_pub"),
        "publication.autocreate.mode": "filtered",
        "snapshot.mode": "no_data",
        "table.include.list": "public.events",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"
    });
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    serde_json::json!({"name": slot, "config": config})
}

async fn insert_event(stack: &Stack, n: u64, kind: Option<&str>, payload: Option<&str>) {
    stack
        .db
        .execute(
            "INSERT INTO public.events (id, aggregatetype, aggregateid, type, payload, shard, version, occurred_at, tracingspancontext)
             VALUES ($1::text::uuid, $2, $3, 'Created', $4::text::jsonb, $5, 7, '2026-01-02 03:04:05.123456',
                     E'#Mon Jan 01\\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\\n')",
            &[&uuid(n), &kind, &format!("agg-{n}"), &payload, &((n % 3) as i32)],
        )
        .await
        .unwrap();
}

async fn start(stack: &Stack, dir: &Path, slot: &str, extra: serde_json::Value) -> RelayProcess {
    start_with_args(stack, dir, slot, extra, &[]).await
}

async fn start_with_args(
    stack: &Stack,
    dir: &Path,
    slot: &str,
    extra: serde_json::Value,
    args: &[&str],
) -> RelayProcess {
    let path = write_config(dir, &format!("{slot}.json"), connector(slot, extra));
    let mut all = vec!["--debezium-config", &path, "--topic-partitions", "3"];
    all.extend_from_slice(args);
    stack.spawn_relay_and_wait_for_slot(slot, &all).await
}

/// The headers after Debezium's four context headers (checked here: topic.prefix, task 0,
/// the plugin name and a UUIDv7 run id; `DebeziumHeaderProducer.contextHeaders`).
fn router_headers<'a>(r: &'a ConsumedRecord, topic_prefix: &str) -> Vec<&'a str> {
    let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names[..4],
        [
            "__debezium.context.connectorLogicalName",
            "__debezium.context.taskId",
            "__debezium.context.connectorName",
            "__debezium.context.runId"
        ],
        "{names:?}"
    );
    assert_eq!(
        r.header_str("__debezium.context.connectorLogicalName"),
        topic_prefix
    );
    assert_eq!(r.header_str("__debezium.context.taskId"), "0");
    assert_eq!(
        r.header_str("__debezium.context.connectorName"),
        "postgresql"
    );
    let run_id = r.header_str("__debezium.context.runId");
    let groups: Vec<usize> = run_id.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12], "{run_id}");
    assert_eq!(&run_id[14..15], "7", "a UUIDv7: {run_id}");
    names[4..].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventrouter_options_the_differential_test_leaves_to_the_relay() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    let dir = tempfile::tempdir().unwrap();

    // A: Kafka Connect defaults (JsonConverter with schemas), envelope + header + partition
    // placements, schema version, timestamp field, tracing context (asked for: Debezium
    // writes it only with an OpenTelemetry agent), default topic template.
    let relay = start_with_args(
        &stack,
        dir.path(),
        "golden_a",
        serde_json::json!({
            "transforms.outbox.table.fields.additional.placement": "type:header:eventType, type:envelope:eventType, status:envelope, shard:partition",
            "transforms.outbox.table.field.event.schema.version": "version",
            "transforms.outbox.table.field.event.timestamp": "occurred_at",
        }),
        &["--propagate-tracing"],
    )
    .await;
    insert_event(&stack, 1, Some("Order"), Some(r#"{"total": 42.5}"#)).await;
    wait_all_confirmed(&stack, "golden_a", &relay).await;
    let records = stack.read_topic("outbox.event.Order").await;
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(r.partition, 1, "partition placement: shard = 1 % 3");
    // The value's and key's bytes (envelope, schema version, defaults, the event's timestamp)
    // are the differential test's; here, what only the relay does: tracing propagated,
    // placed first.
    assert_eq!(router_headers(r, "app"), ["traceparent", "id", "eventType"]);
    assert_eq!(r.header_str("id"), uuid(1));
    assert_eq!(
        r.header_str("traceparent"),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    );
    drop(relay);

    // B: StringConverter key, schemaless JSON value with expanded payload, regex routing,
    // tombstones for empty payloads; NULL routing value dead-lettered (Debezium's task dies).
    let relay = start(
        &stack,
        dir.path(),
        "golden_b",
        serde_json::json!({
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "transforms.outbox.table.expand.json.payload": "true",
            "transforms.outbox.route.topic.regex": "(?<kind>[A-Z][a-z]+)(?<rest>.*)",
            "transforms.outbox.route.topic.replacement": "events.${kind}",
            "transforms.outbox.route.tombstone.on.empty.payload": "true",
            "transforms.outbox.table.op.invalid.behavior": "warn",
        }),
    )
    .await;
    insert_event(
        &stack,
        2,
        Some("Invoice"),
        Some(r#"{"lines": [], "total": 10, "note": null, "items": [{"sku": "a"}]}"#),
    )
    .await;
    insert_event(&stack, 3, Some("Invoice"), None).await;
    insert_event(&stack, 4, Some("lowercase"), Some("{}")).await;
    insert_event(&stack, 5, None, Some("{}")).await;
    stack
        .db
        .batch_execute("UPDATE public.events SET status = 'sent'")
        .await
        .unwrap();
    wait_all_confirmed(&stack, "golden_b", &relay).await;
    let mut invoices = stack.read_topic("events.Invoice").await;
    invoices.sort_by_key(|r| r.header_str("id").to_owned());
    assert_eq!(invoices.len(), 2);
    assert_eq!(invoices[0].key_str(), Some("agg-2"));
    assert_eq!(invoices[1].value, None, "NULL payload -> tombstone");
    let unmatched = stack.read_topic("lowercase").await;
    assert_eq!(
        unmatched.len(),
        1,
        "no whole regex match: the routing value is the topic"
    );
    let dead = stack.read_topic("outbox-relay.dlq").await;
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0]
            .header_str("outbox-relay.error.reason")
            .contains("NULL"),
        "{dead:?}"
    );
    let mut relay = relay;
    relay.terminate(Duration::from_secs(20)).unwrap();
    assert!(
        relay.log().contains("UPDATE of an outbox row was skipped"),
        "{}",
        relay.log()
    );

    // C: ByteArrayConverter value (the payload's bytes), JsonConverter header converter.
    let relay = start(
        &stack,
        dir.path(),
        "golden_c",
        serde_json::json!({
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "header.converter": "org.apache.kafka.connect.json.JsonConverter",
            "transforms.outbox.route.topic.replacement": "${routedByValue}.bytes",
        }),
    )
    .await;
    insert_event(&stack, 6, Some("Order"), Some(r#"{"a": [1, 2]}"#)).await;
    wait_all_confirmed(&stack, "golden_c", &relay).await;
    let records = stack.read_topic("Order.bytes").await;
    // Debezium's task fails on a jsonb value under ByteArrayConverter; the relay writes its
    // text (README). The header converter's bytes are the differential test's.
    assert_eq!(text(&records[0].value), r#"{"a": [1, 2]}"#);
    assert!(records[0].header_str("id").contains(&uuid(6)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_config_supplies_brokers_and_converters() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let connector_path = write_config(
        dir.path(),
        "c.json",
        connector("from_worker", serde_json::json!({})),
    );
    let worker: PathBuf = dir.path().join("connect-distributed.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\ngroup.id=connect-cluster\noffset.storage.topic=connect-offsets\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             producer.linger.ms=5\n",
            stack.broker.bootstrap_servers()
        ),
    )
    .unwrap();
    let args: Vec<String> = [
        "run",
        "--debezium-config",
        &connector_path,
        "--worker-config",
        worker.to_str().unwrap(),
        "--postgres-url",
        &stack.pg.url(),
        "--topic-replication-factor",
        "1",
        "--status-interval-ms",
        "100",
        "--metrics-address",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let relay = RelayProcess::spawn(Path::new(RELAY), &args, &[]).unwrap();
    stack.wait_for_slot("from_worker", &relay).await;
    insert_event(&stack, 1, Some("Order"), Some(r#"{"n": 1}"#)).await;
    wait_all_confirmed(&stack, "from_worker", &relay).await;
    let records = stack.read_topic("outbox.event.Order").await;
    assert_eq!(records[0].key_str(), Some("agg-1"));
    assert_eq!(records[0].value_str(), Some(r#"{"n": 1}"#));
    let log = relay.log();
    assert!(
        log.contains(
            "value.converter = org.apache.kafka.connect.storage.StringConverter (worker config)"
        ),
        "{log}"
    );
    assert!(log.contains("header.converter = org.apache.kafka.connect.storage.SimpleHeaderConverter (Kafka Connect default)"), "{log}");
}

/// Switching from Debezium: the relay takes over Debezium's slot where Debezium left it.
/// Events Debezium already relayed are not replayed, events it had not are not skipped,
/// and snapshot.mode=initial does not re-emit the table (the slot already existed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reusing_debeziums_slot_neither_replays_nor_skips() {
    let stack = Stack::start_with_schema(Storage::Sqlite, SEED_OUTBOX).await;
    // What Debezium left behind: its pgoutput slot and FOR ALL TABLES publication, with
    // events 0..3 relayed and confirmed, and events 3..5 written while it was stopped.
    stack
        .db
        .batch_execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
        .await
        .unwrap();
    stack
        .db
        .batch_execute("SELECT pg_create_logical_replication_slot('debezium', 'pgoutput')")
        .await
        .unwrap();
    let insert = |n: u64| {
        format!(
        "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ('{}', 'Order', 'o-{n}', 'Created', '{{\"n\": {n}}}')",
        uuid(n)
    )
    };
    for n in 0..3 {
        stack.db.batch_execute(&insert(n)).await.unwrap();
    }
    let debezium_position = stack.current_wal_lsn().await;
    stack
        .db
        .batch_execute(&format!(
            "SELECT pg_replication_slot_advance('debezium', '{}')",
            debezium_position
        ))
        .await
        .unwrap();
    for n in 3..5 {
        stack.db.batch_execute(&insert(n)).await.unwrap();
    }
    let relay = stack.spawn_relay(&[
        "--debezium-config",
        &fixture("seed-000-outbox-connector.json"),
    ]);
    for n in 5..7 {
        stack.db.batch_execute(&insert(n)).await.unwrap();
    }
    wait_all_confirmed(&stack, "debezium", &relay).await;
    let ids: Vec<String> = stack
        .read_topic("Order.events")
        .await
        .iter()
        .map(|r| r.header_str("id").to_owned())
        .collect();
    assert_eq!(ids, (3..7).map(uuid).collect::<Vec<_>>());
}

/// snapshot.mode=initial on a new slot: rows already in the outbox are relayed once, rows
/// written afterwards once; an interrupted snapshot is taken again (never lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_snapshot_relays_existing_rows_once_then_streams() {
    let stack = Stack::start_with_schema(Storage::Sqlite, SEED_OUTBOX).await;
    let insert = |from: u64, to: u64| {
        format!(
        "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
         SELECT ('6b1c0e4e-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'Order', 'o-' || g, 'Created', jsonb_build_object('n', g)
         FROM generate_series({from}, {}) g",
        to - 1
    )
    };
    stack.db.batch_execute(&insert(0, 500)).await.unwrap();
    // Writers keep going while the relay starts, creates the slot and takes the snapshot.
    let writer = {
        let url = stack.pg.url();
        tokio::spawn(async move {
            let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            for n in 500..800u64 {
                db.batch_execute(&format!(
                    "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ('{}', 'Order', 'o-{n}', 'Created', '{{\"n\": {n}}}')",
                    uuid(n)
                ))
                .await
                .unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let mut relay = stack.spawn_relay(&[
        "--debezium-config",
        &fixture("seed-000-outbox-connector.json"),
    ]);
    writer.await.unwrap();
    wait_all_confirmed(&stack, "debezium", &relay).await;
    // Snapshot progress, as an operator watches it.
    let metrics = outbox_relay_testkit::http::get(
        &outbox_relay_testkit::http::metrics_address(&relay),
        "/metrics",
    )
    .1;
    let total = outbox_relay_testkit::http::metric(&metrics, "outbox_relay_snapshot_rows");
    assert!((500.0..800.0).contains(&total), "snapshot rows {total}");
    assert_eq!(
        outbox_relay_testkit::http::metric(&metrics, "outbox_relay_snapshot_rows_done"),
        total,
        "every snapshot row read and routed"
    );
    let counts = |records: Vec<ConsumedRecord>| {
        let mut counts = vec![0u32; 800];
        for r in &records {
            let n =
                u64::from_str_radix(r.header_str("id").rsplit('-').next().unwrap(), 16).unwrap();
            counts[n as usize] += 1;
        }
        counts
    };
    let first = counts(stack.read_topic("Order.events").await);
    assert!(
        first.iter().all(|c| *c == 1),
        "each event exactly once: {:?}",
        first
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != 1)
            .take(10)
            .collect::<Vec<_>>()
    );
    assert!(relay.log().contains("snapshot complete"), "{}", relay.log());
    relay.terminate(Duration::from_secs(20)).unwrap();

    // A restart does not snapshot again ...
    let mut relay = stack.spawn_relay(&[
        "--debezium-config",
        &fixture("seed-000-outbox-connector.json"),
    ]);
    stack.db.batch_execute(&insert(800, 801)).await.unwrap();
    wait_all_confirmed(&stack, "debezium", &relay).await;
    relay.terminate(Duration::from_secs(20)).unwrap();
    assert!(
        !relay
            .log()
            .contains("relaying the rows already in the outbox"),
        "{}",
        relay.log()
    );
    assert_eq!(stack.read_topic("Order.events").await.len(), 801);

    // ... unless the snapshot never completed (a crash mid-snapshot): then it is taken again.
    stack
        .db
        .batch_execute("UPDATE outbox_relay_snapshots SET completed = false")
        .await
        .unwrap();
    let mut relay = stack.spawn_relay(&[
        "--debezium-config",
        &fixture("seed-000-outbox-connector.json"),
    ]);
    wait_all_confirmed(&stack, "debezium", &relay).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !relay.log().contains("snapshot complete") {
        assert!(std::time::Instant::now() < deadline, "{}", relay.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    relay.terminate(Duration::from_secs(20)).unwrap();
    assert_eq!(stack.read_topic("Order.events").await.len(), 801 * 2);
}

/// Two instances started together on a new slot with snapshot.mode=initial (an
/// active/standby pair rolled out at once): only the one that claims the slot takes the
/// snapshot; the other stands by. Every row arrives once, not twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_started_together_take_one_snapshot() {
    let stack = Stack::start_with_schema(Storage::Sqlite, SEED_OUTBOX).await;
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
             SELECT ('6b1c0e4e-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'Order', 'o-' || g, 'Created',
                    jsonb_build_object('n', g, 'pad', repeat('x', 500))
             FROM generate_series(0, 19999) g",
        )
        .await
        .unwrap();
    let config = fixture("seed-000-outbox-connector.json");
    let args = ["--debezium-config", config.as_str()];
    let mut first = stack.spawn_relay(&args);
    let mut second = stack.spawn_relay(&args);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while ![&first, &second]
        .iter()
        .any(|r| r.log().contains("snapshot complete"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "first:\n{}\nsecond:\n{}",
            first.log(),
            second.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Time for a second snapshot to show, if one were taken.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let snapshots = [&first, &second]
        .iter()
        .filter(|r| r.log().contains("relaying the rows already in the outbox"))
        .count();
    let standing_by = [&first, &second]
        .iter()
        .any(|r| r.log().contains("standing by"));
    let records = stack.read_topic("Order.events").await;
    first.terminate(Duration::from_secs(20)).unwrap();
    second.terminate(Duration::from_secs(20)).unwrap();
    assert_eq!(
        snapshots,
        1,
        "first:\n{}\nsecond:\n{}",
        first.log(),
        second.log()
    );
    assert!(
        standing_by,
        "first:\n{}\nsecond:\n{}",
        first.log(),
        second.log()
    );
    assert_eq!(records.len(), 20_000, "each row once");
}

/// The seeds' cleanup pattern (insert, then delete in the same transaction) while the relay
/// creates its slot and takes the initial snapshot: the rows are read in the snapshot the slot
/// exported, so every transaction committed after the slot's consistent point is streamed —
/// none falls between the slot and the snapshot — and every row before it comes once from the
/// snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initial_snapshot_loses_no_event_deleted_in_its_own_transaction() {
    let stack = Stack::start_with_schema(Storage::Sqlite, SEED_OUTBOX).await;
    let row = |n: u64| {
        format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ('{}', 'Order', 'o-{n}', 'Created', '{{\"n\": {n}}}');",
            uuid(n)
        )
    };
    for n in 0..200 {
        stack.db.batch_execute(&row(n)).await.unwrap();
    }
    const TOTAL: u64 = 900;
    let writer = {
        let url = stack.pg.url();
        tokio::spawn(async move {
            let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            let mut before = Vec::new();
            for n in 200..TOTAL {
                before.push(outbox_relay_testkit::current_wal_lsn(&db).await);
                db.batch_execute(&format!(
                    "BEGIN; {} DELETE FROM outbox WHERE id = '{}'; COMMIT;",
                    row(n),
                    uuid(n)
                ))
                .await
                .unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            before
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut relay = stack.spawn_relay(&[
        "--debezium-config",
        &fixture("seed-000-outbox-connector.json"),
    ]);
    let before = writer.await.unwrap();
    wait_all_confirmed(&stack, "debezium", &relay).await;
    relay.terminate(Duration::from_secs(20)).unwrap();
    let consistent_point: String = stack
        .db
        .query_one(
            "SELECT snapshot_lsn FROM outbox_relay_snapshots WHERE slot_name = 'debezium'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let consistent_point = outbox_relay_testkit::Lsn::parse(&consistent_point).unwrap();
    let mut counts = vec![0u32; TOTAL as usize];
    for r in stack.read_topic("Order.events").await {
        let n = u64::from_str_radix(r.header_str("id").rsplit('-').next().unwrap(), 16).unwrap();
        counts[n as usize] += 1;
    }
    assert!(
        counts[..200].iter().all(|c| *c == 1),
        "snapshot rows once: {:?}",
        &counts[..200]
    );
    let after: Vec<u64> = (200..TOTAL)
        .filter(|n| before[(n - 200) as usize] >= consistent_point)
        .collect();
    assert!(
        after.len() > 100,
        "the writer ran on after the slot was created ({} events)",
        after.len()
    );
    let wrong: Vec<(u64, u32)> = after
        .iter()
        .map(|n| (*n, counts[*n as usize]))
        .filter(|(_, c)| *c != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "insert-then-delete events after the consistent point, not exactly once: {wrong:?}"
    );
    assert!(relay.log().contains("exported snapshot"), "{}", relay.log());
}

/// One bad row never stops the stream or loops forever: a partition placement beyond the
/// topic's partitions, and an unroutable row whose dead letter is itself too large for the
/// producer (it goes again without its payload, size and reason in headers), both end on the
/// dead-letter topic; the events around them arrive and everything is confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_pills_are_dead_lettered_and_the_stream_goes_on() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let relay = start(
        &stack,
        dir.path(),
        "poison",
        serde_json::json!({
            "transforms.outbox.table.fields.additional.placement": "shard:partition",
            "producer.override.message.max.bytes": "8192",
        }),
    )
    .await;
    let insert = |n: u64, kind: Option<&'static str>, shard: i32, payload: String| {
        let db = &stack.db;
        async move {
            db.execute(
                "INSERT INTO public.events (id, aggregatetype, aggregateid, type, payload, shard) \
                 VALUES ($1::text::uuid, $2, $3, 'Created', $4::text::jsonb, $5)",
                &[&uuid(n), &kind, &format!("agg-{n}"), &payload, &shard],
            )
            .await
            .unwrap();
        }
    };
    insert(1, Some("Order"), 0, "{}".into()).await;
    insert(2, Some("Order"), 7, "{}".into()).await;
    insert(
        3,
        None,
        0,
        format!("{{\"blob\": \"{}\"}}", "x".repeat(20_000)),
    )
    .await;
    insert(4, Some("Order"), 2, "{}".into()).await;
    wait_all_confirmed(&stack, "poison", &relay).await;
    let orders = stack.read_topic("outbox.event.Order").await;
    let ids: Vec<&str> = orders.iter().map(|r| r.header_str("id")).collect();
    assert_eq!(
        ids,
        [uuid(1), uuid(4)],
        "the events around the bad rows arrive\n{}",
        relay.log()
    );
    let mut dead = stack.read_topic("outbox-relay.dlq").await;
    dead.sort_by_key(|r| r.header_str("id").to_owned());
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert_eq!(dead[0].header_str("id"), uuid(2));
    assert!(
        dead[0]
            .header_str("outbox-relay.error.reason")
            .contains("partition"),
        "{dead:?}"
    );
    assert_eq!(
        dead[0].header_str("outbox-relay.original.topic"),
        "outbox.event.Order"
    );
    assert_eq!(dead[1].header_str("id"), uuid(3));
    let reason = dead[1].header_str("outbox-relay.error.reason");
    assert!(
        reason.contains("NULL") && reason.contains("payload left out"),
        "{reason}"
    );
    assert_eq!(dead[1].value, None);
    assert!(
        dead[1]
            .header_str("outbox-relay.original.size")
            .parse::<usize>()
            .unwrap()
            > 20_000
    );
    let mut relay = relay;
    assert!(relay.is_running(), "{}", relay.log());
}

#[test]
fn configurations_outbox_relay_cannot_honour_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, expected) in [
        (
            serde_json::json!({"plugin.name": "decoderbufs"}),
            "plugin.name",
        ),
        (
            serde_json::json!({"value.converter": "io.confluent.connect.avro.AvroConverter"}),
            "value.converter",
        ),
        (
            serde_json::json!({
                "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
                "value.converter.schema.registry.url": "http://127.0.0.1:1",
                "value.converter.skip.known.types": "false",
            }),
            "value.converter.skip.known.types",
        ),
        (
            serde_json::json!({"transforms": "outbox,unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}),
            "transforms.unwrap.type",
        ),
        (
            serde_json::json!({"column.exclude.list": "public.events.payload"}),
            "column.exclude.list",
        ),
    ] {
        let path = write_config(dir.path(), "bad.json", connector("bad", extra));
        let out = std::process::Command::new(RELAY)
            .args([
                "run",
                "--debezium-config",
                &path,
                "--postgres-url",
                "postgres://u@127.0.0.1:1/db",
                "--bootstrap-servers",
                "127.0.0.1:1",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("debezium-config") && stderr.contains(expected),
            "{expected}: {stderr}"
        );
    }
}

/// A `.properties` connector file (Kafka Connect standalone mode), an existing publication
/// with `publication.autocreate.mode=disabled`, and `heartbeat.action.query` run every
/// `heartbeat.interval.ms` as Debezium runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_properties_file_with_heartbeats_and_an_existing_publication() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    stack
        .db
        .batch_execute(
            "CREATE TABLE heartbeat (id int PRIMARY KEY, beats int NOT NULL);
             INSERT INTO heartbeat VALUES (1, 0);
             CREATE PUBLICATION existing_pub FOR TABLE public.events;",
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("outbox-connector.properties");
    std::fs::write(
        &path,
        "name=outbox-connector\n\
         connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
         database.hostname=db\ndatabase.user=relay\ndatabase.dbname=app\n\
         topic.prefix=app\nslot.name=props_slot\npublication.name=existing_pub\n\
         publication.autocreate.mode=disabled\nsnapshot.mode=no_data\n\
         table.include.list=public\\\\.events\n\
         heartbeat.interval.ms=100\n\
         heartbeat.action.query=UPDATE heartbeat SET beats = beats + 1 WHERE id = 1\n\
         transforms=outbox\ntransforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
         transforms.outbox.route.topic.replacement=${routedByValue}.events\n\
         key.converter=org.apache.kafka.connect.storage.StringConverter\n\
         value.converter=org.apache.kafka.connect.storage.StringConverter\n",
    )
    .unwrap();
    let relay = stack
        .spawn_relay_and_wait_for_slot("props_slot", &["--debezium-config", path.to_str().unwrap()])
        .await;
    insert_event(&stack, 1, Some("Order"), Some(r#"{"n": 1}"#)).await;
    wait_all_confirmed(&stack, "props_slot", &relay).await;
    let records = stack.read_topic("Order.events").await;
    assert_eq!(records[0].value_str(), Some(r#"{"n": 1}"#));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let beats: i32 = stack
            .db
            .query_one("SELECT beats FROM heartbeat", &[])
            .await
            .unwrap()
            .get(0);
        if beats >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "heartbeat.action.query ran {beats} times\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // HeartbeatImpl's records, every interval while streaming, idle or not: key
    // ServerNameKey, value Heartbeat (StringConverter prints the structs), partition 0, no
    // headers (`tests/debezium.rs` JSON bytes: `router::heartbeat::tests`).
    let beats = loop {
        let beats = stack.read_topic("__debezium-heartbeat.app").await;
        if beats.len() >= 3 {
            break beats;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} heartbeat records\n{}",
            beats.len(),
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for beat in &beats {
        assert_eq!(text(&beat.key), "Struct{serverName=app}");
        let ts: i64 = text(&beat.value)
            .strip_prefix("Struct{ts_ms=")
            .and_then(|v| v.strip_suffix('}'))
            .unwrap_or_else(|| panic!("{beat:?}"))
            .parse()
            .unwrap();
        assert!((now - 60_000..=now).contains(&ts), "{ts}");
        assert_eq!(beat.partition, 0);
        assert!(beat.headers.is_empty(), "{beat:?}");
    }
    // With autocreate disabled, a missing publication is an error that says what to run.
    let missing = dir.path().join("missing.properties");
    std::fs::write(
        &missing,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace("existing_pub", "missing_pub")
            .replace("props_slot", "other_slot"),
    )
    .unwrap();
    let mut failing = stack.spawn_relay(&["--debezium-config", missing.to_str().unwrap()]);
    let status = failing
        .wait_timeout(Duration::from_secs(30))
        .unwrap()
        .expect("exits");
    assert!(!status.success());
    assert!(
        failing.log().contains("CREATE PUBLICATION"),
        "{}",
        failing.log()
    );
}

/// The remaining EventRouter options end to end: expand with schemas and the null /
/// empty-array behaviours, a missing additional column ignored, `producer.override.*`, and
/// `table.op.invalid.behavior=fatal` stopping the relay without confirming the UPDATE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expand_behaviours_missing_columns_overrides_and_fatal_updates() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let mut relay = start(
        &stack,
        dir.path(),
        "golden_d",
        serde_json::json!({
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "transforms.outbox.table.expand.json.payload": "true",
            "transforms.outbox.table.json.payload.null.behavior": "optional_bytes",
            "transforms.outbox.table.json.payload.empty.array.behavior": "optional_string",
            "transforms.outbox.table.fields.additional.placement": "no_such_column:header:x,type:header:eventType",
            "transforms.outbox.table.field.additional.missing": "ignore",
            "transforms.outbox.table.op.invalid.behavior": "fatal",
            "producer.override.linger.ms": "1",
        }),
    )
    .await;
    insert_event(
        &stack,
        1,
        Some("Order"),
        Some(r#"{"note": null, "lines": [], "n": 1}"#),
    )
    .await;
    wait_all_confirmed(&stack, "golden_d", &relay).await;
    let records = stack.read_topic("outbox.event.Order").await;
    assert_eq!(
        text(&records[0].value),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"n"},"#,
            r#"{"type":"bytes","optional":true,"field":"note"},"#,
            r#"{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"lines"}],"#,
            r#""optional":true,"name":"payload"},"payload":{"n":1,"note":null,"lines":[]}}"#
        )
    );
    assert_eq!(
        router_headers(&records[0], "app"),
        ["id", "eventType"],
        "the missing column is skipped; no trace headers unless asked for"
    );

    let before = stack.confirmed_flush_lsn("golden_d").await.unwrap();
    stack
        .db
        .batch_execute("UPDATE public.events SET status = 'sent'")
        .await
        .unwrap();
    let status = relay
        .wait_timeout(Duration::from_secs(30))
        .unwrap()
        .expect("table.op.invalid.behavior=fatal stops the relay");
    assert!(!status.success());
    assert!(
        relay.log().contains("table.op.invalid.behavior=fatal"),
        "{}",
        relay.log()
    );
    let after = stack.confirmed_flush_lsn("golden_d").await.unwrap();
    let update_lsn = stack.current_wal_lsn().await;
    assert!(
        after < update_lsn,
        "the UPDATE was confirmed past: {before} -> {after}"
    );
}

/// Kafka's config providers, as Kafka Connect expands them, declared in the worker config
/// (only there: a connector config that declares one is refused): the database password from
/// a mounted secret directory (`${directory:...}`), the user from the environment
/// (`${env:...}`), the brokers from a properties file (`${file:...}`, the worker's own value). `ConfigTransformer.transform`,
/// `FileConfigProvider.get`, `DirectoryConfigProvider.get`, `EnvVarConfigProvider.get`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_providers_supply_the_password_the_user_and_the_brokers() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    const PASSWORD: &str = "from-a-config-provider";
    stack
        .db
        .batch_execute(&format!(
            "CREATE ROLE relay_pw LOGIN REPLICATION SUPERUSER PASSWORD '{PASSWORD}'"
        ))
        .await
        .unwrap();
    stack.pg.require_password_for("relay_pw").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::write(secrets.join("postgres-password"), PASSWORD).unwrap();
    let kafka = dir.path().join("kafka.properties");
    std::fs::write(
        &kafka,
        format!("servers = {}\n", stack.broker.bootstrap_servers()),
    )
    .unwrap();
    let connector_path = write_config(
        dir.path(),
        "c.json",
        connector(
            "providers",
            serde_json::json!({
                "database.hostname": "127.0.0.1",
                "database.port": stack.pg.port().to_string(),
                "database.user": "${env:OUTBOX_DB_USER}",
                "database.password": format!("${{directory:{}:postgres-password}}", secrets.display()),
                "database.dbname": "postgres",
            }),
        ),
    );
    let worker: PathBuf = dir.path().join("connect-distributed.properties");
    std::fs::write(
        &worker,
        format!(
            "config.providers=file,directory,vault,env\n\
             config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n\
             config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n\
             config.providers.directory.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider\n\
             config.providers.directory.param.allowed.paths={}\n\
             config.providers.vault.class=io.example.VaultConfigProvider\n\
             bootstrap.servers=${{file:{}:servers}}\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n",
            secrets.display(),
            kafka.display()
        ),
    )
    .unwrap();
    let args: Vec<String> = [
        "run",
        "--debezium-config",
        &connector_path,
        "--worker-config",
        worker.to_str().unwrap(),
        "--topic-replication-factor",
        "1",
        "--status-interval-ms",
        "100",
        "--metrics-address",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let relay =
        RelayProcess::spawn(Path::new(RELAY), &args, &[("OUTBOX_DB_USER", "relay_pw")]).unwrap();
    stack.wait_for_slot("providers", &relay).await;
    insert_event(&stack, 1, Some("Order"), Some(r#"{"n": 1}"#)).await;
    wait_all_confirmed(&stack, "providers", &relay).await;
    let records = stack.read_topic("outbox.event.Order").await;
    assert_eq!(records[0].value_str(), Some(r#"{"n": 1}"#));
    assert!(!relay.log().contains(PASSWORD), "{}", relay.log());

    // A variable nothing declares is refused by its key, before anything runs.
    let bad = write_config(
        dir.path(),
        "bad.json",
        connector(
            "providers",
            serde_json::json!({"database.password": "${vault:secret/db:password}"}),
        ),
    );
    let said = refused_by_check(&bad);
    assert!(
        said.contains("database.password") && said.contains("config.providers=vault"),
        "{said}"
    );

    // A provider declared in the connector config: refused, nothing expanded.
    let declared = write_config(
        dir.path(),
        "declared.json",
        connector(
            "providers",
            serde_json::json!({
                "config.providers": "mine",
                "config.providers.mine.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
                "connector.class": format!("${{mine:{}:postgres-password}}", secrets.display()),
            }),
        ),
    );
    let said = refused_by_check(&declared);
    assert!(
        said.contains("config.providers") && said.contains("worker configuration only"),
        "{said}"
    );
    assert!(!said.contains(PASSWORD), "{said}");
}

/// Every column type an outbox migration meets, as Debezium 3.x types it, read back from
/// the broker: under the default modes (numeric(10,2) through a domain of a domain →
/// Kafka Decimal, unconstrained numeric → VariableScaleDecimal, money, time, timetz,
/// interval, bit(3), text[] / int4[], hstore, ltree, citext, inet, a BC date, an infinite
/// timestamp, bytea) and under decimal=string, time=isostring, interval=string,
/// hstore=map, binary=hex. Expected bytes: Debezium's AbstractRecordsProducerTest
/// (schemasAndValuesForNumericTypes, ...ForBigDecimalEncodedNumericTypes,
/// ...ForVariableScaleDecimal, schemaAndValuesForBinTypes, schemasAndValuesForArrayTypes,
/// schemasAndValuesForHStoreType, schemasAndValuesForDateTimeTypes, ...ForIntervalAsString,
/// schemaAndValuesForNegativeMoneyTypes) and PostgresValueConverter, with Kafka's
/// Decimal.fromLogical and JsonConverter. The server is set to DateStyle 'SQL, DMY',
/// IntervalStyle iso_8601 and bytea_output escape: the relay pins its own session formats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_types_under_each_mode_produce_debezium_bytes() {
    let stack = Stack::start_with_postgres_config(
        Storage::Sqlite,
        "CREATE EXTENSION hstore; CREATE EXTENSION citext; CREATE EXTENSION ltree;
         CREATE TYPE aggregate_kind AS ENUM ('Order', 'Customer');
         CREATE DOMAIN amount AS numeric(10,2);
         CREATE DOMAIN positive_amount AS amount CHECK (VALUE > 0);
         CREATE TABLE public.typed (
             id uuid PRIMARY KEY,
             aggregatetype aggregate_kind NOT NULL,
             aggregateid citext NOT NULL,
             payload jsonb,
             total positive_amount NOT NULL,
             ratio numeric,
             fee money,
             at_time time,
             at_timetz timetz,
             span interval,
             flags bit(3),
             tags text[],
             counts int4[],
             attrs hstore,
             path ltree,
             ip inet,
             born date,
             never timestamp,
             blob bytea,
             q tsquery
         );",
        "DateStyle = 'SQL, DMY'\nIntervalStyle = 'iso_8601'\nbytea_output = 'escape'\n",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let fields = [
        "total",
        "ratio",
        "fee",
        "at_time",
        "at_timetz",
        "span",
        "flags",
        "tags",
        "counts",
        "attrs",
        "path",
        "ip",
        "born",
        "never",
        "blob",
    ];
    let placement = |header: &str| {
        let mut p: Vec<String> = fields.iter().map(|f| format!("{f}:envelope:{f}")).collect();
        p.push(format!("{header}:header:{header}"));
        p.join(",")
    };
    let defaults = start(
        &stack,
        dir.path(),
        "types_default",
        serde_json::json!({
            "table.include.list": "public.typed",
            "transforms.outbox.table.fields.additional.placement": placement("total"),
        }),
    )
    .await;
    let modes = start(
        &stack,
        dir.path(),
        "types_modes",
        serde_json::json!({
            "table.include.list": "public.typed",
            "transforms.outbox.table.fields.additional.placement": placement("fee"),
            "transforms.outbox.route.topic.replacement": "modes.${routedByValue}",
            "decimal.handling.mode": "STRING",
            "time.precision.mode": "isostring",
            "interval.handling.mode": "string",
            "hstore.handling.mode": "map",
            "binary.handling.mode": "hex",
        }),
    )
    .await;
    stack
        .db
        .batch_execute(
            r#"INSERT INTO public.typed VALUES (
                 '00000000-0000-0000-0000-000000000001', 'Order', 'o-1', '{"n": 1}',
                 12.3, 1.500, 1234.56, '13:51:30', '13:51:30.123789+02',
                 '1 year 2 mons 3 days 04:05:06.78', B'101', '{one,"two words",NULL}', '{1,2,3}',
                 '"key4"=>"val4", "key5"=>NULL', 'Top.Collections', '192.168.2.0/24',
                 '0044-03-15 BC', 'infinity', '\x010203', 'fat & cat')"#,
        )
        .await
        .unwrap();
    wait_all_confirmed(&stack, "types_default", &defaults).await;
    wait_all_confirmed(&stack, "types_modes", &modes).await;

    let records = stack.read_topic("outbox.event.Order").await;
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(
        r.key_str(),
        Some(r#"{"schema":{"type":"string","optional":false},"payload":"o-1"}"#)
    );
    assert_eq!(
        r.header_str("total"),
        "12.30",
        "BigDecimal.toString() in a header"
    );
    assert_eq!(
        text(&r.value),
        concat!(
            r#"{"schema":{"type":"struct","fields":["#,
            r#"{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},"#,
            r#"{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"total"},"#,
            r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}],"optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal","field":"ratio"},"#,
            r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},"field":"fee"},"#,
            r#"{"type":"int64","optional":true,"name":"io.debezium.time.MicroTime","version":1,"field":"at_time"},"#,
            r#"{"type":"string","optional":true,"name":"io.debezium.time.ZonedTime","version":1,"field":"at_timetz"},"#,
            r#"{"type":"int64","optional":true,"name":"io.debezium.time.MicroDuration","version":1,"field":"span"},"#,
            r#"{"type":"bytes","optional":true,"name":"io.debezium.data.Bits","version":1,"parameters":{"length":"3"},"field":"flags"},"#,
            r#"{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"tags"},"#,
            r#"{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"counts"},"#,
            r#"{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"attrs"},"#,
            r#"{"type":"string","optional":true,"name":"io.debezium.data.Ltree","version":1,"field":"path"},"#,
            r#"{"type":"string","optional":true,"field":"ip"},"#,
            r#"{"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1,"field":"born"},"#,
            r#"{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"never"},"#,
            r#"{"type":"bytes","optional":true,"field":"blob"}],"#,
            r#""optional":false,"name":"app.public.typed.Order.Value"},"#,
            r#""payload":{"payload":"{\"n\": 1}","total":"BM4=","ratio":{"scale":1,"value":"Dw=="},"fee":"AeJA","#,
            r#""at_time":49890000000,"at_timetz":"11:51:30.123789Z","span":37091106780000,"flags":"BQ==","#,
            r#""tags":["one","two words",null],"counts":[1,2,3],"attrs":"{\"key5\":null,\"key4\":\"val4\"}","#,
            r#""path":"Top.Collections","ip":"192.168.2.0/24","born":-735160,"never":9223372036825200000,"blob":"AQID"}}"#
        )
    );

    let records = stack.read_topic("modes.Order").await;
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(r.header_str("fee"), "1234.56");
    let value: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
    let fields_schema = &value["schema"]["fields"];
    let schema_of = |name: &str| {
        fields_schema
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["field"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(schema_of("total")["type"], "string");
    assert_eq!(schema_of("at_time")["name"], "io.debezium.time.IsoTime");
    assert_eq!(schema_of("born")["name"], "io.debezium.time.IsoDate");
    assert_eq!(schema_of("span")["name"], "io.debezium.time.Interval");
    assert_eq!(
        schema_of("attrs"),
        serde_json::json!({"type":"map","keys":{"type":"string","optional":false},
            "values":{"type":"string","optional":true},"optional":true,"field":"attrs"})
    );
    assert_eq!(
        value["payload"],
        serde_json::json!({
            "payload": "{\"n\": 1}", "total": "12.30", "ratio": "1.500", "fee": "1234.56",
            "at_time": "13:51:30Z", "at_timetz": "11:51:30.123789Z", "span": "P1Y2M3DT4H5M6.78S",
            "flags": "BQ==", "tags": ["one", "two words", null], "counts": [1, 2, 3],
            "attrs": {"key5": null, "key4": "val4"}, "path": "Top.Collections", "ip": "192.168.2.0/24",
            "born": "-0043-03-15Z", "never": "+294247-01-10T04:00:25.2Z", "blob": "010203"
        })
    );

    // A column Debezium leaves out of the record (tsquery) is named by `check` before
    // anything runs, and `run` stops at its first row rather than guess its bytes.
    let config = write_config(
        dir.path(),
        "types_unmapped.json",
        connector(
            "types_unmapped",
            serde_json::json!({
                "table.include.list": "public.typed",
                "transforms.outbox.table.fields.additional.placement": "q:header:q",
            }),
        ),
    );
    let mut args = stack.relay_args(&["--debezium-config", &config]);
    args[0] = "check".into();
    args.retain(|a| !a.starts_with("--status-interval") && a != "100");
    let out = std::process::Command::new(RELAY)
        .args(&args)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("column \"q\"")
            && said.contains("tsquery")
            && said.contains("include.unknown.datatypes"),
        "{said}"
    );
}

/// `topic.creation.default.*` and `topic.creation.groups` (Kafka Connect's KIP-158,
/// `TopicCreationGroup`): the topics the relay creates carry the configs of the first
/// group that includes them, else the default group's; a group without partitions takes
/// the default's. Read back from the broker with DescribeConfigs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_creation_groups_configure_the_topics_the_relay_creates() {
    let stack = Stack::start_with_schema(
        Storage::Sqlite,
        "CREATE TABLE public.events (id uuid PRIMARY KEY, aggregatetype text NOT NULL,
             aggregateid text NOT NULL, type text, payload jsonb);",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let relay = start(
        &stack,
        dir.path(),
        "topic_groups",
        serde_json::json!({
            "topic.creation.default.partitions": "2",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.cleanup.policy": "compact",
            "topic.creation.default.compression.type": "lz4",
            "topic.creation.groups": "audit",
            "topic.creation.audit.include": "outbox\\.event\\.Audit.*, nothing",
            "topic.creation.audit.exclude": "outbox\\.event\\.AuditSkip",
            "topic.creation.audit.retention.ms": "3600000",
            "topic.creation.audit.partitions": "1",
        }),
    )
    .await;
    for (n, kind) in [(1, "Order"), (2, "AuditLog"), (3, "AuditSkip")] {
        stack
            .db
            .execute(
                "INSERT INTO public.events VALUES ($1::text::uuid, $2, 'a', 't', '{}')",
                &[&uuid(n), &kind],
            )
            .await
            .unwrap();
    }
    wait_all_confirmed(&stack, "topic_groups", &relay).await;
    let bootstrap = stack.broker.bootstrap_servers();
    let configs = |topic: &'static str| {
        let bootstrap = bootstrap.clone();
        async move {
            outbox_relay_testkit::kafka::topic_configs(&bootstrap, topic)
                .await
                .unwrap()
        }
    };
    let (order, partitions) = configs("outbox.event.Order").await;
    // The default group's partitions: here the command line's --topic-partitions 3, which
    // wins over the connector's topic.creation.default.partitions.
    assert_eq!(partitions, 3, "the default group's partitions");
    assert_eq!(
        order.get("cleanup.policy").map(String::as_str),
        Some("compact"),
        "{order:?}"
    );
    assert_eq!(
        order.get("compression.type").map(String::as_str),
        Some("lz4"),
        "{order:?}"
    );
    let (audit, partitions) = configs("outbox.event.AuditLog").await;
    assert_eq!(partitions, 1, "the group's own partitions");
    assert_eq!(
        audit.get("retention.ms").map(String::as_str),
        Some("3600000"),
        "{audit:?}"
    );
    assert_ne!(
        audit.get("cleanup.policy").map(String::as_str),
        Some("compact"),
        "a group's configs are its own: {audit:?}"
    );
    let (skipped, partitions) = configs("outbox.event.AuditSkip").await;
    assert_eq!(partitions, 3, "excluded from the group: the default group");
    assert_eq!(
        skipped.get("cleanup.policy").map(String::as_str),
        Some("compact"),
        "{skipped:?}"
    );
}

/// Several outbox tables in one connector (`table.include.list` with a name and a
/// pattern, a list of regular expressions in Debezium's `RelationalTableFilters`): one
/// slot, one publication, each table routed by its own columns (their order differs), the
/// initial snapshot covering every table, a table created later that matches the pattern
/// relayed from its first row, a table that does not match ignored. Also
/// `database.initial.statements` (`JdbcConnection.connection`: run on every SQL
/// connection, `;;` a literal semicolon) and the record timestamp (the envelope's ts_ms:
/// when the event was read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_outbox_tables_share_one_slot_and_initial_statements_run() {
    let stack = Stack::start_with_schema(
        Storage::Sqlite,
        "CREATE TABLE public.orders_outbox (
             id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL,
             type varchar(64) NOT NULL, payload jsonb);
         CREATE SCHEMA billing;
         CREATE TABLE billing.outbox_1 (
             note text, payload jsonb, aggregateid varchar(255) NOT NULL, type varchar(64) NOT NULL,
             id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL);
         CREATE TABLE billing.ledger (
             id uuid PRIMARY KEY, aggregatetype varchar(255), aggregateid varchar(255), type varchar(64), payload jsonb);",
    )
    .await;
    let insert = |table: &str, n: u64, kind: &str| {
        format!(
            "INSERT INTO {table} (id, aggregatetype, aggregateid, type, payload) VALUES ('{}', '{kind}', '{kind}-{n}', 'Created', '{{\"n\": {n}}}')",
            uuid(n)
        )
    };
    // Before the slot exists: the initial snapshot's rows.
    for (table, n, kind) in [
        ("public.orders_outbox", 1, "Order"),
        ("billing.outbox_1", 2, "Invoice"),
        ("billing.ledger", 3, "Ledger"),
    ] {
        stack
            .db
            .batch_execute(&insert(table, n, kind))
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let relay = start(
        &stack,
        dir.path(),
        "several",
        serde_json::json!({
            "table.include.list": r"public\.orders_outbox,billing\.outbox_\d+",
            "publication.autocreate.mode": "all_tables",
            "snapshot.mode": "initial",
            "database.initial.statements": "SET application_name = 'outbox;;relay'; SET lock_timeout = '5s'",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        }),
    )
    .await;
    // The session's SQL connection ran the statements.
    let named: i64 = stack
        .db
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outbox;relay'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(named >= 1, "no connection ran database.initial.statements");
    stack
        .db
        .batch_execute(
            "CREATE TABLE billing.outbox_2 (
                 id uuid PRIMARY KEY, type varchar(64) NOT NULL, aggregatetype varchar(255) NOT NULL,
                 payload jsonb, aggregateid varchar(255) NOT NULL)",
        )
        .await
        .unwrap();
    for (table, n, kind) in [
        ("public.orders_outbox", 11, "Order"),
        ("billing.outbox_1", 12, "Invoice"),
        ("billing.ledger", 13, "Ledger"),
        ("billing.outbox_2", 14, "Invoice"),
    ] {
        stack
            .db
            .batch_execute(&insert(table, n, kind))
            .await
            .unwrap();
    }
    wait_all_confirmed(&stack, "several", &relay).await;
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let seen = |records: &[ConsumedRecord]| -> Vec<(String, String, String)> {
        let mut seen: Vec<_> = records
            .iter()
            .map(|r| {
                let ts = r.timestamp_millis.expect("a record timestamp");
                assert!((before..=after).contains(&ts), "timestamp {ts}");
                (
                    text(&r.key).to_owned(),
                    text(&r.value).to_owned(),
                    r.header_str("id").to_owned(),
                )
            })
            .collect();
        seen.sort();
        seen
    };
    let row = |kind: &str, n: u64| (format!("{kind}-{n}"), format!("{{\"n\": {n}}}"), uuid(n));
    assert_eq!(
        seen(&stack.read_topic("outbox.event.Order").await),
        [row("Order", 1), row("Order", 11)]
    );
    assert_eq!(
        seen(&stack.read_topic("outbox.event.Invoice").await),
        [row("Invoice", 12), row("Invoice", 14), row("Invoice", 2)]
    );
    assert!(
        !stack.topics().await.iter().any(|t| t.contains("Ledger")),
        "billing.ledger is not an outbox table"
    );
    let publication: Vec<String> = stack
        .db
        .query(
            "SELECT puballtables::text FROM pg_publication WHERE pubname = 'several_pub'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(publication, ["true"], "one publication (all_tables)");
}

/// A statement of `database.initial.statements` the server refuses stops the relay with
/// the option named, rather than retrying it forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_initial_statement_stops_the_relay_naming_the_option() {
    let stack = Stack::start_with_schema(Storage::Memory, EVENTS_TABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        "bad.json",
        connector(
            "bad_statements",
            serde_json::json!({"database.initial.statements": "SET lock_timeout = 'soon'"}),
        ),
    );
    let (ok, log) = stack.run_until_exit(&["--debezium-config", &path]);
    assert!(!ok, "{log}");
    assert!(
        log.contains("database.initial.statements") && log.contains("lock_timeout"),
        "{log}"
    );
}

/// The table-less outbox: `pg_logical_emit_message(true, 'outbox', content)` in the business
/// transaction, relayed through Debezium's documented chain
/// (`DecodeLogicalDecodingMessageContent` then the EventRouter) with
/// `message.prefix.include.list`. Expected bytes: `JsonSchemaData.toConnectSchema` (unnamed
/// struct, objects named by path, nulls left out), `EventRouterDelegate.apply` (value = the
/// payload field with its schema, key = the aggregateid field's, header `id`; messages carry
/// no context headers: `LogicalDecodingMessageMonitor` builds its records without them).
/// Transactional and non-transactional messages, a filtered prefix, a rolled-back one and
/// content Debezium cannot decode (dead-lettered here; Debezium's task fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logical_decoding_messages_are_relayed_through_the_documented_smt_chain() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let relay = start(
        &stack,
        dir.path(),
        "messages",
        serde_json::json!({
            "transforms": "decode,outbox",
            "transforms.decode.type": "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
            "message.prefix.include.list": "outbox",
        }),
    )
    .await;
    let content = |n: u32| {
        format!(
            r#"{{"id":"4d47e5a0-0000-4000-8000-00000000000{n}","aggregatetype":"order","aggregateid":"{n}","type":"OrderCreated","payload":{{"orderId":{n},"note":null,"lines":[{{"sku":"A","qty":2}}]}}}}"#
        )
    };
    stack
        .db
        .batch_execute(&format!(
            "BEGIN;
             SELECT pg_logical_emit_message(true, 'outbox', '{}');
             SELECT pg_logical_emit_message(true, 'audit', '{}');
             COMMIT;
             BEGIN;
             SELECT pg_logical_emit_message(true, 'outbox', '{}');
             ROLLBACK;
             SELECT pg_logical_emit_message(false, 'OUTBOX', '{}');
             SELECT pg_logical_emit_message(true, 'outbox', 'not json');",
            content(1),
            content(7),
            content(8),
            content(2)
        ))
        .await
        .unwrap();
    insert_event(&stack, 3, Some("Order"), Some("{}")).await;
    wait_all_confirmed(&stack, "messages", &relay).await;
    let records = stack.read_topic("outbox.event.order").await;
    assert_eq!(records.len(), 2, "{records:?}");
    // Their bytes are the differential test's (tests/debezium_differential.rs): here, which
    // messages are relayed.
    for (r, n) in records.iter().zip([1, 2]) {
        assert_eq!(
            text(&r.key),
            format!(r#"{{"schema":{{"type":"string","optional":true}},"payload":"{n}"}}"#)
        );
        let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["id"]);
        assert_eq!(
            r.header_str("id"),
            format!("4d47e5a0-0000-4000-8000-00000000000{n}")
        );
    }
    // The table's rows still go their way, with their context headers.
    assert_eq!(stack.read_topic("outbox.event.Order").await.len(), 1);
    let dead = stack.read_topic("outbox-relay.dlq").await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].value.as_deref(), Some(&b"not json"[..]));
    assert_eq!(
        dead[0].header_str("outbox-relay.source.table"),
        "message outbox"
    );
}

/// Native: `--table '' --message-prefix …` relays messages only, on a publication without
/// tables, a string field taken as its text and any other field as its JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_message_prefix_relays_a_table_less_outbox() {
    let stack = Stack::start_with_schema(Storage::Memory, "SELECT 1").await;
    let relay = stack
        .spawn_relay_and_wait_for_slot(
            "outbox_relay",
            &[
                "--table",
                "",
                "--message-prefix",
                r"app\.events",
                "--topic-partitions",
                "1",
            ],
        )
        .await;
    stack
        .db
        .batch_execute(
            r#"BEGIN;
               SELECT pg_logical_emit_message(true, 'app.events', '{"id":"e-1","aggregate_type":"Order","aggregate_id":"o-1","event_type":"Created","payload":{"n": 1.50}}');
               SELECT pg_logical_emit_message(true, 'app.other', '{"id":"e-2","aggregate_type":"Order","aggregate_id":"o-2","payload":{}}');
               COMMIT;"#,
        )
        .await
        .unwrap();
    stack
        .wait_delivered("outbox_relay", Duration::from_secs(30), Some(&relay))
        .await;
    let records = stack.read_topic("Order.events").await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(text(&records[0].key), "o-1");
    assert_eq!(text(&records[0].value), r#"{"n": 1.50}"#);
    assert_eq!(records[0].header_str("eventType"), "Created");
    // No outbox table: the publication carries the messages, and the canary's table only.
    let tables: Vec<String> = stack
        .db
        .query(
            "SELECT tablename::text FROM pg_publication_tables WHERE pubname = 'outbox_relay'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        tables,
        ["outbox_relay_canaries"],
        "a publication without an outbox table"
    );
}

/// `table.field.event.timestamp` with a value Apache Kafka refuses (more than an hour ahead:
/// Kafka 4's `message.timestamp.after.max.ms`): Kafka Connect's task dies on the
/// InvalidTimestampException; the relay dead-letters that event alone, with the reason, and
/// goes on. It used to retry it forever, confirming nothing (found by the differential test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_timestamp_the_broker_refuses_is_dead_lettered_not_retried_forever() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let relay = start(
        &stack,
        dir.path(),
        "future",
        serde_json::json!({
            "transforms.outbox.table.field.event.timestamp": "occurred_at",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        }),
    )
    .await;
    // One transaction, one produce batch: the broker would refuse the whole batch for the one
    // record; the relay checks the topic's timestamp limits and refuses that record alone.
    stack
        .db
        .batch_execute(&format!(
            "INSERT INTO public.events (id, aggregatetype, aggregateid, type, payload, occurred_at) VALUES
               ('{}', 'Order', 'agg-1', 'Created', '{{}}', '2026-01-02 03:04:05'),
               ('{}', 'Order', 'agg-2', 'Created', '{{}}', '2038-01-19 03:14:08'),
               ('{}', 'Order', 'agg-3', 'Created', '{{}}', now() - interval '1 minute')",
            uuid(1),
            uuid(2),
            uuid(3)
        ))
        .await
        .unwrap();
    wait_all_confirmed(&stack, "future", &relay).await;
    let orders = stack.read_topic("outbox.event.Order").await;
    let keys: Vec<_> = orders.iter().map(|r| r.key_str()).collect();
    assert_eq!(keys, [Some("agg-1"), Some("agg-3")], "{}", relay.log());
    let dead = stack.read_topic("outbox-relay.dlq").await;
    assert_eq!(dead.len(), 1, "{}", relay.log());
    assert_eq!(dead[0].key_str(), Some("agg-2"));
    assert_eq!(dead[0].value_str(), Some("{}"), "the payload is kept");
    let reason = dead[0].header_str("outbox-relay.error.reason");
    assert!(
        reason.contains("message.timestamp.after.max.ms"),
        "{reason}\n{}",
        relay.log()
    );
}

/// Kafka Connect's field transforms after the EventRouter, with `errors.tolerance=all` and a
/// dead-letter queue: MaskField masks the `secret` of an expanded payload; a
/// payload that is not a JSON object (its text, no struct to mask in) goes to the dead-letter queue as
/// Kafka Connect's reporter writes records there (its original bytes, then the
/// `__connect.errors.*` headers), and `dead-letters list` reads it. Nothing stops, nothing is
/// lost, the slot moves past both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_a_transform_fails_on_goes_to_connects_dead_letter_queue() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let relay = start(
        &stack,
        dir.path(),
        "tolerant",
        serde_json::json!({
            "transforms": "outbox,mask",
            "transforms.outbox.table.expand.json.payload": "true",
            "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
            "transforms.mask.fields": "secret",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "dlq.orders",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.log.enable": "true",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        }),
    )
    .await;
    insert_event(
        &stack,
        1,
        Some("Order"),
        Some(r#"{"item": "book", "secret": "s3cr3t"}"#),
    )
    .await;
    insert_event(&stack, 2, Some("Order"), Some(r#"["not", "an", "object"]"#)).await;
    insert_event(
        &stack,
        3,
        Some("Order"),
        Some(r#"{"item": "pen", "secret": "x"}"#),
    )
    .await;
    wait_all_confirmed(&stack, "tolerant", &relay).await;

    let orders = stack.read_topic("outbox.event.Order").await;
    let values: Vec<_> = orders
        .iter()
        .map(|r| r.value_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        values,
        [
            r#"{"item":"book","secret":""}"#,
            r#"{"item":"pen","secret":""}"#
        ],
        "{}",
        relay.log()
    );
    let dead = stack.read_topic("dlq.orders").await;
    assert_eq!(dead.len(), 1, "{}", relay.log());
    // The key as the worker's key converter writes it (JsonConverter, Kafka's default).
    assert_eq!(
        dead[0].key_str(),
        Some(r#"{"schema":{"type":"string","optional":false},"payload":"agg-2"}"#)
    );
    assert_eq!(
        dead[0].value_str(),
        Some(r#""[\"not\", \"an\", \"object\"]""#),
        "the record before the transform (a JSON array stays the payload's text)"
    );
    assert_eq!(dead[0].header_str("id"), uuid(2));
    assert_eq!(
        dead[0].header_str("__connect.errors.topic"),
        "outbox.event.Order"
    );
    assert_eq!(
        dead[0].header_str("__connect.errors.stage"),
        "TRANSFORMATION"
    );
    assert_eq!(
        dead[0].header_str("__connect.errors.class.name"),
        "org.apache.kafka.connect.transforms.MaskField$Value"
    );
    assert!(
        dead[0]
            .header_str("__connect.errors.exception.message")
            .contains("Only Struct objects supported for [mask fields], found: java.lang.String"),
        "{}",
        dead[0].header_str("__connect.errors.exception.message")
    );
    assert!(
        relay
            .log()
            .contains("Error encountered in task tolerant-0. Executing stage 'TRANSFORMATION'"),
        "errors.log.enable: {}",
        relay.log()
    );
    // The relay's own dead-letter topic got nothing (it was never even created).
    assert!(!stack.topics().await.iter().any(|t| t == "outbox-relay.dlq"));
}

/// Kafka Connect's transforms before the EventRouter run on Debezium's change event of each
/// row, as a worker runs them: `HeaderFrom` copies its row image `after`, its `op` and its
/// key into headers, then the EventRouter routes what they left. The table has no primary
/// key: the key is its first unique index by name, as Debezium's pgoutput decoder falls back
/// to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transforms_before_the_event_router_read_the_change_events_row_and_key() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS_TABLE).await;
    stack
        .db
        .batch_execute(
            "CREATE TABLE public.keyed (id uuid NOT NULL, aggregatetype text NOT NULL, aggregateid text NOT NULL,
                 type text NOT NULL, payload jsonb, tenant int NOT NULL DEFAULT 7);
             CREATE UNIQUE INDEX keyed_b_idx ON public.keyed (id);
             CREATE UNIQUE INDEX keyed_a_idx ON public.keyed (tenant, aggregateid);",
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let relay = start(
        &stack,
        dir.path(),
        "before_router",
        serde_json::json!({
            "table.include.list": "public.keyed",
            "transforms": "row,pk,outbox",
            "transforms.row.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
            "transforms.row.fields": "after,op",
            "transforms.row.headers": "row,op",
            "transforms.row.operation": "copy",
            "transforms.pk.type": "org.apache.kafka.connect.transforms.HeaderFrom$Key",
            "transforms.pk.fields": "aggregateid,tenant",
            "transforms.pk.headers": "pk_aggregate,pk_tenant",
            "transforms.pk.operation": "copy",
            "header.converter": "org.apache.kafka.connect.json.JsonConverter",
            "header.converter.schemas.enable": "false",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "producer.override.linger.ms": "1",
        }),
    )
    .await;
    stack
        .db
        .batch_execute(
            "INSERT INTO public.keyed (id, aggregatetype, aggregateid, type, payload)
             VALUES ('6b1c0e4e-0000-4000-8000-000000000001', 'Order', 'order-1', 'Created', '{\"n\": 1}');",
        )
        .await
        .unwrap();
    wait_all_confirmed(&stack, "before_router", &relay).await;
    let records = stack.read_topic("outbox.event.Order").await;
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    // Debezium's four context headers (JSON strings here), then the transforms', then the
    // EventRouter's.
    let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names[3..],
        [
            "__debezium.context.runId",
            "row",
            "op",
            "pk_aggregate",
            "pk_tenant",
            "id"
        ]
    );
    assert_eq!(
        r.header_str("__debezium.context.connectorLogicalName"),
        r#""app""#
    );
    assert_eq!(
        r.header_str("row"),
        concat!(
            r#"{"id":"6b1c0e4e-0000-4000-8000-000000000001","aggregatetype":"Order","#,
            r#""aggregateid":"order-1","type":"Created","payload":"{\"n\": 1}","tenant":7}"#
        )
    );
    assert_eq!(r.header_str("op"), r#""c""#);
    // keyed_a_idx (tenant, aggregateid) comes first by name: the key's fields.
    assert_eq!(r.header_str("pk_aggregate"), r#""order-1""#);
    assert_eq!(r.header_str("pk_tenant"), "7");
    assert_eq!(text(&r.key), "order-1");
    drop(relay);
}

/// A connector of this stack for one side of a comparison with Debezium (`dbz` or `relay`):
/// its own slot and publication named `<side>_<name>`, an initial snapshot of `tables`, the
/// EventRouter to `<side>.<aggregate type>` after the transforms `before` names, with `extra`
/// options on top; and the Kafka Connect worker that runs Debezium's side.
fn beside_debezium(
    stack: &Stack,
    side: &str,
    name: &str,
    tables: &str,
    before: &str,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut config = serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": stack.pg.port().to_string(),
        "database.user": "postgres",
        "database.password": "postgres",
        "database.dbname": "postgres",
        "plugin.name": "pgoutput",
        "slot.name": format!("{side}_{name}"),
        "publication.name": format!("{side}_{name}"),
        "publication.autocreate.mode": "filtered",
        "snapshot.mode": "initial",
        "topic.prefix": "app",
        "table.include.list": tables,
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1",
        "transforms": format!("{before}outbox"),
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.route.by.field": "aggregate_type",
        "transforms.outbox.table.field.event.key": "aggregate_id",
        "transforms.outbox.route.topic.replacement": format!("{side}.${{routedByValue}}"),
    });
    for (k, v) in extra.as_object().expect("options") {
        config[k] = v.clone();
    }
    serde_json::json!({ "name": name, "config": config })
}

/// Kafka Connect's worker for Debezium's side: this stack's broker, JsonConverter.
fn json_worker(stack: &Stack) -> String {
    format!(
        "bootstrap.servers={}\n\
         key.converter=org.apache.kafka.connect.json.JsonConverter\n\
         value.converter=org.apache.kafka.connect.json.JsonConverter\n",
        stack.broker.bootstrap_servers()
    )
}

/// Outbox tables like `public.outbox`, each with `rows` events of aggregate type the table
/// name's last letter (upper case).
async fn outbox_tables_of(stack: &Stack, tables: &[(&str, u64)]) {
    for (table, rows) in tables {
        stack
            .db
            .batch_execute(&format!(
                "CREATE TABLE public.{table} (LIKE public.outbox INCLUDING ALL);
                 INSERT INTO public.{table} (id, aggregate_type, aggregate_id, event_type, payload)
                 SELECT gen_random_uuid(), upper(right('{table}', 1)), 'k' || g, 'Created',
                        jsonb_build_object('n', g)
                 FROM generate_series(1, {rows}) g;"
            ))
            .await
            .unwrap();
    }
}

/// Debezium's `source.snapshot` markers on the rows of an initial snapshot of three outbox
/// tables, the middle one empty (`first`, `true`, `last_in_data_collection`, then the last
/// table's single row `last`), copied into a header by `HeaderFrom$Value` before the
/// EventRouter: the relay's are Debezium's itself, table by table, on the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_markers_are_debeziums() {
    use outbox_relay_testkit::debezium::ConnectStandalone;
    let stack = Stack::start().await;
    outbox_tables_of(&stack, &[("outbox_a", 3), ("outbox_b", 0), ("outbox_c", 1)]).await;
    let config = |side: &str| {
        beside_debezium(
            &stack,
            side,
            "markers",
            "public.outbox_a,public.outbox_b,public.outbox_c",
            "row,",
            serde_json::json!({
                "transforms.row.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
                "transforms.row.fields": "source",
                "transforms.row.headers": "src",
                "transforms.row.operation": "copy",
            }),
        )
    };
    let worker = json_worker(&stack);
    let debezium = ConnectStandalone::start(&worker, &[config("dbz")])
        .unwrap_or_else(|e| panic!("Debezium: {e:#}"));
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "markers.json", config("relay"));
    let mut relay = stack.spawn_relay(&["--debezium-config", &path]);
    // The markers of each side's topic for table `t`, in order.
    let markers = |records: &[ConsumedRecord]| -> Vec<String> {
        records
            .iter()
            .map(|r| {
                let src = r
                    .headers
                    .iter()
                    .find(|(k, _)| k == "src")
                    .and_then(|(_, v)| v.clone())
                    .map(|v| String::from_utf8_lossy(&v).into_owned())
                    .unwrap_or_default();
                serde_json::from_str::<serde_json::Value>(&src)
                    .ok()
                    .and_then(|v| v["snapshot"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "?".to_owned())
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    for (table, want) in [("A", 3usize), ("C", 1)] {
        let (dbz, ours) = loop {
            let read = |topic: String| {
                let stack = &stack;
                async move {
                    if stack.topics().await.contains(&topic) {
                        stack.read_topic(&topic).await
                    } else {
                        Vec::new()
                    }
                }
            };
            let dbz = read(format!("dbz.{table}")).await;
            let ours = read(format!("relay.{table}")).await;
            if dbz.len() >= want && ours.len() >= want {
                break (dbz, ours);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{table}: Debezium {} of {want}, the relay {}\n{}\n{}",
                dbz.len(),
                ours.len(),
                debezium.log(),
                relay.log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let show = |records: &[ConsumedRecord]| -> String {
            records
                .first()
                .map(|r| {
                    format!(
                        "{:?}",
                        r.headers
                            .iter()
                            .map(|(k, v)| (
                                k.clone(),
                                v.as_ref().map(|v| String::from_utf8_lossy(v).into_owned())
                            ))
                            .collect::<Vec<_>>()
                    )
                })
                .unwrap_or_default()
        };
        assert_eq!(
            markers(&ours),
            markers(&dbz),
            "table {table}: the relay's headers {}, Debezium's {}",
            show(&ours),
            show(&dbz)
        );
        assert!(
            !markers(&ours).contains(&"?".to_owned()),
            "table {table}: {}",
            show(&ours)
        );
    }
    assert_eq!(
        markers(&stack.read_topic("relay.A").await),
        ["first", "true", "last_in_data_collection"]
    );
    assert_eq!(markers(&stack.read_topic("relay.C").await), ["last"]);
    relay.terminate(Duration::from_secs(20)).unwrap();
    drop(debezium);
}

/// Debezium's notifications of an initial snapshot (`notification.enabled.channels=sink,log`):
/// STARTED, IN_PROGRESS, TABLE_SCAN_COMPLETED and COMPLETED on the sink topic, the same
/// records as Debezium's own beside it (each notification's random id and its time aside; a
/// TABLE_SCAN_COMPLETED's `additional_data` compared as a map, Debezium's own order of two
/// of its keys changing from one JVM to the next), and the log channel's lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_snapshot_notifications_are_debeziums() {
    use outbox_relay_testkit::debezium::ConnectStandalone;
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 2, 1, 2).await.unwrap();
    let config = |side: &str| {
        beside_debezium(
            &stack,
            side,
            "notes",
            "public.outbox",
            "",
            serde_json::json!({
                "notification.enabled.channels": "sink,log",
                "notification.sink.topic.name": format!("{side}.notifications"),
            }),
        )
    };
    let worker = json_worker(&stack);
    let debezium = ConnectStandalone::start(&worker, &[config("dbz")])
        .unwrap_or_else(|e| panic!("Debezium: {e:#}"));
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "notes.json", config("relay"));
    let mut relay = stack.spawn_relay(&["--debezium-config", &path]);
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let read = |topic: &'static str| {
        let stack = &stack;
        async move {
            if stack.topics().await.iter().any(|t| t == topic) {
                stack.read_topic(topic).await
            } else {
                Vec::new()
            }
        }
    };
    let (dbz, ours) = loop {
        let dbz = read("dbz.notifications").await;
        let ours = read("relay.notifications").await;
        if dbz.len() >= 4 && ours.len() >= 4 {
            break (dbz, ours);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Debezium wrote {}, the relay {}\n{}\n{}",
            dbz.len(),
            ours.len(),
            debezium.log(),
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // The record with its id and time taken out.
    let id = |r: &ConsumedRecord| -> String {
        let key: serde_json::Value = serde_json::from_slice(r.key.as_deref().unwrap()).unwrap();
        key["payload"]["id"].as_str().unwrap().to_owned()
    };
    let plain = |r: &ConsumedRecord| -> (String, String, serde_json::Value) {
        let id = id(r);
        let value = text(&r.value).replace(&id, "<id>");
        let mut parsed: serde_json::Value = serde_json::from_str(&value).unwrap();
        let ts = parsed["payload"]["timestamp"].to_string();
        parsed["payload"]["timestamp"] = serde_json::json!(0);
        (
            text(&r.key).replace(&id, "<id>"),
            value.replace(&ts, "<ts>"),
            parsed,
        )
    };
    let kinds: Vec<String> = ours
        .iter()
        .map(|r| plain(r).2["payload"]["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "STARTED",
            "IN_PROGRESS",
            "TABLE_SCAN_COMPLETED",
            "COMPLETED"
        ]
    );
    for (d, o) in dbz.iter().zip(&ours).take(4) {
        let (dk, dv, dp) = plain(d);
        let (ok, ov, op) = plain(o);
        assert_eq!(ok, dk, "keys");
        if op["payload"]["type"] == "TABLE_SCAN_COMPLETED" {
            assert_eq!(op, dp, "values (additional_data as a map)");
        } else {
            assert_eq!(ov, dv, "values");
        }
        assert!(id(o).len() == 36 && id(o) != id(d), "a random UUID each");
    }
    relay.terminate(Duration::from_secs(20)).unwrap();
    let log = relay.log();
    // Started again, the snapshot taken: SKIPPED, as Debezium's task says at such a start.
    let mut again = stack.spawn_relay(&["--debezium-config", &path]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let all = read("relay.notifications").await;
        if let Some(last) = all.get(4) {
            let (_, _, value) = plain(last);
            assert_eq!(value["payload"]["type"], "SKIPPED", "{value}");
            assert_eq!(
                value["payload"]["additional_data"],
                serde_json::json!({"connector_name": "app"})
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", again.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    again.terminate(Duration::from_secs(20)).unwrap();
    assert!(
        log.contains("[Notification Service]  {id='")
            && log.contains("aggregateType='Initial Snapshot', type='COMPLETED', additionalData={connector_name=app}"),
        "{log}"
    );
    drop(debezium);
}

/// What a side wrote for the outbox: (topic's aggregate type, key, value, event id, op,
/// `source.snapshot`), topic after topic.
type SideRow = (String, String, String, String, String, String);

/// The records of `side`'s outbox topics (`<side>.<type>`), with the `src` and `op` headers
/// [`signals_beside_debezium`] copies.
async fn side_rows(stack: &Stack, side: &str) -> Vec<SideRow> {
    let mut rows = Vec::new();
    let topics = stack.topics().await;
    for t in TYPES {
        let topic = format!("{side}.{t}");
        if !topics.contains(&topic) {
            continue;
        }
        for r in stack.read_topic(&topic).await {
            let header = |name: &str| r.header_str(name).to_owned();
            let src: serde_json::Value = serde_json::from_str(&header("src")).unwrap_or_default();
            rows.push((
                t.to_owned(),
                text(&r.key).to_owned(),
                text(&r.value).to_owned(),
                header("id"),
                header("op"),
                src["snapshot"].as_str().unwrap_or("?").to_owned(),
            ));
        }
    }
    rows
}

/// The notifications of `aggregate` on `side`'s sink topic: (id, type, additional_data).
async fn side_notifications(
    stack: &Stack,
    side: &str,
    aggregate: &str,
) -> Vec<(serde_json::Value, serde_json::Value, serde_json::Value)> {
    let topic = format!("{side}.notifications");
    let mut out = Vec::new();
    if !stack.topics().await.contains(&topic) {
        return out;
    }
    for r in stack.read_topic(&topic).await {
        let value: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        let p = &value["payload"];
        if p["aggregate_type"] == aggregate {
            out.push((
                p["id"].clone(),
                p["type"].clone(),
                p["additional_data"].clone(),
            ));
        }
    }
    out
}

/// Debezium and the relay, each with a signal table of its own (`public.<side>_signal`),
/// no initial snapshot, chunks of 3 rows, notifications on `<side>.notifications`, each
/// record's `source` and `op` copied into headers, `extra` options on top; both streaming
/// when it returns.
async fn signals_beside_debezium(
    stack: &Stack,
    dir: &Path,
    extra: serde_json::Value,
) -> (
    outbox_relay_testkit::debezium::ConnectStandalone,
    RelayProcess,
) {
    stack
        .db
        .batch_execute(
            "CREATE TABLE public.dbz_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
             CREATE TABLE public.relay_signal (LIKE public.dbz_signal INCLUDING ALL);",
        )
        .await
        .unwrap();
    let config = |side: &str| {
        beside_debezium(
            stack,
            side,
            "inc",
            "public.outbox",
            "row,",
            serde_json::json!({
                "snapshot.mode": "no_data",
                "signal.data.collection": format!("public.{side}_signal"),
                "incremental.snapshot.chunk.size": "3",
                "notification.enabled.channels": "sink",
                "notification.sink.topic.name": format!("{side}.notifications"),
                "transforms.row.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
                "transforms.row.fields": "source,op",
                "transforms.row.headers": "src,op",
                "transforms.row.operation": "copy",
                // The signal table's change events and the notifications pass both by.
                "transforms.row.predicate": "outboxOnly",
                "transforms.outbox.predicate": "outboxOnly",
                "predicates": "outboxOnly",
                "predicates.outboxOnly.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
                "predicates.outboxOnly.pattern": "app\\.public\\.outbox",
            }),
        )
    };
    let config = |side: &str| {
        let mut c = config(side);
        for (k, v) in extra.as_object().expect("options") {
            c["config"][k] = v.clone();
        }
        c
    };
    let debezium = outbox_relay_testkit::debezium::ConnectStandalone::start(
        &json_worker(stack),
        &[config("dbz")],
    )
    .unwrap_or_else(|e| panic!("Debezium: {e:#}"));
    let path = write_config(dir, "inc.json", config("relay"));
    let relay = stack.spawn_relay(&["--debezium-config", &path]);
    for slot in ["dbz_inc", "relay_inc"] {
        stack
            .wait_slot_held(slot, Duration::from_secs(120), || {
                format!("{}\n{}", debezium.log(), relay.log())
            })
            .await;
    }
    debezium
        .wait_streaming("inc", Duration::from_secs(120))
        .await
        .unwrap();
    (debezium, relay)
}

/// `INSERT`s of signals into each side's signal table, in one transaction per side.
async fn signal_both(stack: &Stack, signals: &[(&str, &str, &str)]) {
    for side in ["dbz", "relay"] {
        let values: Vec<String> = signals
            .iter()
            .map(|(id, kind, data)| format!("('{id}', '{kind}', '{}')", data.replace('\'', "''")))
            .collect();
        stack
            .db
            .batch_execute(&format!(
                "INSERT INTO public.{side}_signal VALUES {}",
                values.join(", ")
            ))
            .await
            .unwrap();
    }
}

type Note = (serde_json::Value, serde_json::Value, serde_json::Value);

/// Polls both sides' outbox records until `done` holds for each (3 minutes at most).
async fn rows_until(
    stack: &Stack,
    logs: (
        &outbox_relay_testkit::debezium::ConnectStandalone,
        &RelayProcess,
    ),
    done: impl Fn(&[SideRow]) -> bool,
) -> (Vec<SideRow>, Vec<SideRow>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let (d, o) = (
            side_rows(stack, "dbz").await,
            side_rows(stack, "relay").await,
        );
        if done(&d) && done(&o) {
            return (d, o);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Debezium: {d:#?}\nthe relay: {o:#?}\n{}\n{}",
            logs.0.log(),
            logs.1.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Polls both sides' notifications of `aggregate` until `done` holds for each.
async fn notes_until(
    stack: &Stack,
    logs: (
        &outbox_relay_testkit::debezium::ConnectStandalone,
        &RelayProcess,
    ),
    aggregate: &str,
    done: impl Fn(&[Note]) -> bool,
) -> (Vec<Note>, Vec<Note>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let d = side_notifications(stack, "dbz", aggregate).await;
        let o = side_notifications(stack, "relay", aggregate).await;
        if done(&d) && done(&o) {
            return (d, o);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Debezium: {d:#?}\nthe relay: {o:#?}\n{}\n{}",
            logs.0.log(),
            logs.1.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn note_kinds(n: &[Note]) -> Vec<String> {
    n.iter()
        .map(|n| n.1.as_str().unwrap_or("?").to_owned())
        .collect()
}

fn incremental_rows(rows: &[SideRow]) -> Vec<SideRow> {
    rows.iter()
        .filter(|r| r.5 == "incremental")
        .cloned()
        .collect()
}

/// An incremental snapshot of the outbox (`execute-snapshot` inserted into the signal table),
/// beside Debezium on the same rows: every row re-sent as an event (`op: r`,
/// `source.snapshot: incremental`), the same keys, values and event ids in the same order,
/// while new events stream on; then one limited by `additional-conditions`; and the same
/// `Incremental Snapshot` notifications, the signal's id theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_snapshots_resend_the_outbox_as_debezium_does() {
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 7, 1, 3).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (debezium, mut relay) =
        signals_beside_debezium(&stack, dir.path(), serde_json::json!({})).await;
    let logs = (&debezium, &relay);
    let signalled_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    signal_both(
        &stack,
        &[(
            "sig-1",
            "execute-snapshot",
            r#"{"data-collections": ["public.outbox"], "type": "incremental"}"#,
        )],
    )
    .await;
    // New events stream while the snapshot reads.
    insert_events(&stack.db, 7, 3, 1, 3).await.unwrap();
    // The rows there before the signal, read by both; the three inserted meanwhile are read
    // too when they committed before the snapshot took its maximum key (on each side alike:
    // streamed or read, or both). Waited for by those seven: counting every row read would
    // stop early where a side read some of the three before its last chunk of the seven.
    let before_signal = |rows: &[SideRow]| -> Vec<SideRow> {
        incremental_rows(rows)
            .into_iter()
            .filter(|r| (0..7).any(|n| r.3 == event_uuid(n)))
            .collect()
    };
    let (dbz, ours) = rows_until(&stack, logs, |r| {
        r.len() >= 10 && before_signal(r).len() >= 7
    })
    .await;
    assert_eq!(before_signal(&ours).len(), 7, "{ours:#?}");
    assert_eq!(before_signal(&ours), before_signal(&dbz));
    assert!(
        incremental_rows(&ours).iter().all(|r| r.4 == "r"),
        "{ours:#?}"
    );
    // The records' timestamps: the EventRouter takes the envelope's `ts_ms`, the time a
    // snapshot row is sent, on both sides (never the commit of the row's insert, before).
    for side in ["dbz", "relay"] {
        for t in TYPES {
            let topic = format!("{side}.{t}");
            if !stack.topics().await.contains(&topic) {
                continue;
            }
            for r in stack.read_topic(&topic).await {
                let src: serde_json::Value =
                    serde_json::from_str(r.header_str("src")).unwrap_or_default();
                if src["snapshot"] == "incremental" {
                    let ts = r.timestamp_millis.unwrap_or_default();
                    assert!(
                        ts >= signalled_ms - 1_000,
                        "{side}: {ts} before the signal at {signalled_ms}"
                    );
                }
            }
        }
    }
    assert_eq!(
        ours.iter().filter(|r| r.5 == "false").count(),
        3,
        "{ours:#?}"
    );
    for n in 0..10 {
        assert!(
            ours.iter().any(|r| r.3 == event_uuid(n)),
            "event {n} missing: {ours:#?}"
        );
    }
    let (dbz_first, our_first) = (incremental_rows(&dbz).len(), incremental_rows(&ours).len());
    // Limited by additional-conditions.
    signal_both(
        &stack,
        &[(
            "sig-2",
            "execute-snapshot",
            r#"{"data-collections": ["public.outbox"], "type": "incremental",
                "additional-conditions": [{"data-collection": "public.outbox", "filter": "aggregate_type = 'Order'"}]}"#,
        )],
    )
    .await;
    let order_rows = (0..10).filter(|g| g % 4 == 0).count();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let (dbz, ours) = loop {
        let (d, o) = (
            side_rows(&stack, "dbz").await,
            side_rows(&stack, "relay").await,
        );
        if incremental_rows(&d).len() >= dbz_first + order_rows
            && incremental_rows(&o).len() >= our_first + order_rows
        {
            break (d, o);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{o:#?}\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // The Order records read last: the second snapshot's.
    let orders_read = |rows: &[SideRow]| -> Vec<SideRow> {
        let order: Vec<SideRow> = incremental_rows(rows)
            .into_iter()
            .filter(|r| r.0 == "Order")
            .collect();
        order[order.len() - order_rows..].to_vec()
    };
    assert_eq!(orders_read(&ours), orders_read(&dbz));
    assert_eq!(
        incremental_rows(&ours).len(),
        our_first + order_rows,
        "only Order rows read again: {ours:#?}"
    );
    // The notifications: same types, ids and data, in order.
    let (dbz_notes, our_notes) = notes_until(&stack, logs, "Incremental Snapshot", |n| {
        n.iter().filter(|n| n.1 == "COMPLETED").count() == 2
    })
    .await;
    assert_eq!(our_notes[0].0, "sig-1");
    assert_eq!(our_notes[0].1, "STARTED");
    assert_eq!(our_notes, dbz_notes);
    relay.terminate(Duration::from_secs(20)).unwrap();
    drop(debezium);
}

/// Pause, resume and stop signals sent with the `execute-snapshot` they act on (one
/// transaction: the first chunk is read, then the signal applies), then a blocking snapshot,
/// beside Debezium: the same records (a blocking snapshot's with the initial snapshot's
/// `first` … `last` markers) and the same notifications.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_stop_and_blocking_snapshots_are_debeziums() {
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 7, 1, 3).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (debezium, mut relay) =
        signals_beside_debezium(&stack, dir.path(), serde_json::json!({})).await;
    let logs = (&debezium, &relay);

    let everything = r#"{"data-collections": ["public.outbox"], "type": "incremental"}"#;
    // Paused after its first chunk: 3 rows, then nothing until resumed.
    signal_both(
        &stack,
        &[
            ("p-1", "execute-snapshot", everything),
            ("p-2", "pause-snapshot", "{}"),
        ],
    )
    .await;
    notes_until(&stack, logs, "Incremental Snapshot", |n| {
        note_kinds(n).contains(&"PAUSED".to_owned())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (dbz, ours) = (
        side_rows(&stack, "dbz").await,
        side_rows(&stack, "relay").await,
    );
    assert_eq!(incremental_rows(&ours).len(), 3, "{ours:#?}");
    assert_eq!(incremental_rows(&ours), incremental_rows(&dbz));
    signal_both(&stack, &[("p-3", "resume-snapshot", "{}")]).await;
    let (dbz, ours) = rows_until(&stack, logs, |r| incremental_rows(r).len() >= 7).await;
    assert_eq!(incremental_rows(&ours), incremental_rows(&dbz));
    // Stopped after its first chunk.
    signal_both(
        &stack,
        &[
            ("s-1", "execute-snapshot", everything),
            ("s-2", "stop-snapshot", r#"{"type": "incremental"}"#),
        ],
    )
    .await;
    let (dbz_notes, our_notes) = notes_until(&stack, logs, "Incremental Snapshot", |n| {
        note_kinds(n).contains(&"ABORTED".to_owned())
    })
    .await;
    // The ABORTED after the snapshot completed: a random id on both sides.
    let without_last_id = |n: &[Note]| -> Vec<Note> {
        let mut n = n.to_vec();
        if let Some(last) = n.last_mut() {
            assert_eq!(last.1, "ABORTED");
            assert!(
                last.0
                    .as_str()
                    .is_some_and(|id| id.len() == 36 && id != "s-1"),
                "{last:?}"
            );
            last.0 = serde_json::Value::Null;
        }
        n
    };
    assert_eq!(without_last_id(&our_notes), without_last_id(&dbz_notes));
    assert_eq!(
        note_kinds(&our_notes),
        [
            "STARTED",
            "IN_PROGRESS",
            "PAUSED",
            "RESUMED",
            "IN_PROGRESS",
            "IN_PROGRESS",
            "TABLE_SCAN_COMPLETED",
            "COMPLETED",
            "STARTED",
            "IN_PROGRESS",
            "COMPLETED",
            "ABORTED"
        ]
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (dbz, ours) = (
        side_rows(&stack, "dbz").await,
        side_rows(&stack, "relay").await,
    );
    assert_eq!(incremental_rows(&ours).len(), 10, "{ours:#?}");
    assert_eq!(incremental_rows(&ours), incremental_rows(&dbz));
    // A blocking snapshot: the initial snapshot's markers and notifications.
    signal_both(
        &stack,
        &[(
            "b-1",
            "execute-snapshot",
            r#"{"data-collections": ["public.outbox"], "type": "blocking"}"#,
        )],
    )
    .await;
    let blocking = |rows: &[SideRow]| -> Vec<SideRow> {
        rows.iter()
            .filter(|r| !["incremental", "false"].contains(&r.5.as_str()))
            .cloned()
            .collect()
    };
    let (dbz, ours) = rows_until(&stack, logs, |r| blocking(r).len() >= 7).await;
    assert_eq!(blocking(&ours), blocking(&dbz));
    let markers: Vec<String> = blocking(&ours).into_iter().map(|r| r.5).collect();
    // One `first`, one `last` (rows sit topic after topic here, each in its order).
    assert_eq!(
        markers.iter().filter(|m| *m == "first").count(),
        1,
        "{markers:?}"
    );
    assert_eq!(
        markers.iter().filter(|m| *m == "last").count(),
        1,
        "{markers:?}"
    );
    let (dbz_notes, our_notes) = notes_until(&stack, logs, "Initial Snapshot", |n| {
        note_kinds(n).contains(&"COMPLETED".to_owned())
    })
    .await;
    // Each notification's id is a random UUID on both sides.
    let plain = |n: &[Note]| -> Vec<(serde_json::Value, serde_json::Value)> {
        n.iter()
            .filter(|n| n.1 != "SKIPPED")
            .map(|n| (n.1.clone(), n.2.clone()))
            .collect()
    };
    assert_eq!(plain(&our_notes), plain(&dbz_notes));
    relay.terminate(Duration::from_secs(20)).unwrap();
    drop(debezium);
}

/// `read.only=true`: the same incremental snapshot with nothing written to the database (no
/// watermark rows), beside Debezium's own read-only variant; new events streaming meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_incremental_snapshots_write_nothing_and_are_debeziums() {
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 7, 1, 3).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (debezium, mut relay) =
        signals_beside_debezium(&stack, dir.path(), serde_json::json!({"read.only": "true"})).await;
    let logs = (&debezium, &relay);
    signal_both(
        &stack,
        &[(
            "ro-1",
            "execute-snapshot",
            r#"{"data-collections": ["public.outbox"], "type": "incremental"}"#,
        )],
    )
    .await;
    insert_events(&stack.db, 7, 2, 1, 3).await.unwrap();
    let (dbz, ours) = rows_until(&stack, logs, |r| {
        (0..7).all(|n| {
            r.iter()
                .any(|x| x.3 == event_uuid(n) && x.5 == "incremental")
        }) && r.iter().filter(|x| x.5 == "false").count() >= 2
    })
    .await;
    let before_signal = |rows: &[SideRow]| -> Vec<SideRow> {
        incremental_rows(rows)
            .into_iter()
            .filter(|r| (0..7).any(|n| r.3 == event_uuid(n)))
            .collect()
    };
    assert_eq!(before_signal(&ours), before_signal(&dbz));
    let (dbz_notes, our_notes) = notes_until(&stack, logs, "Incremental Snapshot", |n| {
        note_kinds(n).contains(&"COMPLETED".to_owned())
    })
    .await;
    assert_eq!(note_kinds(&our_notes), note_kinds(&dbz_notes));
    assert_eq!(our_notes[0], dbz_notes[0]);
    for side in ["dbz", "relay"] {
        let written: Vec<String> = stack
            .db
            .query(&format!("SELECT id FROM public.{side}_signal"), &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(written, ["ro-1"], "{side}: only the signal, no watermark");
    }
    relay.terminate(Duration::from_secs(20)).unwrap();
    drop(debezium);
}

/// `snapshot.mode=initial_only` beside Debezium: the rows already there, with Debezium's
/// markers, and then nothing streamed; neither creates a slot, both stay up; the relay started
/// again takes no second snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_only_snapshots_without_a_slot_as_debezium_does() {
    use outbox_relay_testkit::debezium::ConnectStandalone;
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 5, 1, 2).await.unwrap();
    let config = |side: &str| {
        beside_debezium(
            &stack,
            side,
            "io",
            "public.outbox",
            "row,",
            serde_json::json!({
                "snapshot.mode": "initial_only",
                "transforms.row.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
                "transforms.row.fields": "source,op",
                "transforms.row.headers": "src,op",
                "transforms.row.operation": "copy",
            }),
        )
    };
    let debezium = ConnectStandalone::start(&json_worker(&stack), &[config("dbz")])
        .unwrap_or_else(|e| panic!("Debezium: {e:#}"));
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "io.json", config("relay"));
    let mut relay = stack.spawn_relay(&["--debezium-config", &path]);
    let logs = (&debezium, &relay);
    let (dbz, ours) = rows_until(&stack, logs, |r| r.len() >= 5).await;
    assert_eq!(ours, dbz);
    let markers: Vec<&str> = ours.iter().map(|r| r.5.as_str()).collect();
    assert_eq!(
        markers.iter().filter(|m| **m == "last").count(),
        1,
        "{markers:?}"
    );
    relay
        .wait_for_log(
            "Streaming is disabled for snapshot mode initial_only",
            Duration::from_secs(30),
        )
        .await;
    // Nothing streamed: a new event reaches neither side.
    insert_events(&stack.db, 5, 1, 1, 2).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(side_rows(&stack, "dbz").await.len(), 5);
    assert_eq!(side_rows(&stack, "relay").await.len(), 5);
    let slots: i64 = stack
        .db
        .query_one(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ('dbz_io', 'relay_io')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(slots, 0, "neither side creates a slot");
    assert!(relay.is_running(), "the relay stays up\n{}", relay.log());
    relay.terminate(Duration::from_secs(20)).unwrap();
    // Started again: the snapshot was taken.
    let mut again = stack.spawn_relay(&["--debezium-config", &path]);
    again
        .wait_for_log("the snapshot was taken before", Duration::from_secs(30))
        .await;
    assert_eq!(side_rows(&stack, "relay").await.len(), 5);
    again.terminate(Duration::from_secs(20)).unwrap();
    drop(debezium);
}

/// Every `snapshot.mode` Debezium documents that takes effect at a first start, beside
/// Debezium on the same rows: `initial`, `when_needed`, `always` and `configuration_based`
/// (`snapshot.data`) relay the rows already there with Debezium's markers, then stream;
/// `no_data` streams only. Each mode's records are Debezium's, in order. (`never`, which
/// Debezium 3.6 no longer takes, is `no_data` to the relay: checked against `no_data`'s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_snapshot_mode_starts_as_debeziums() {
    use outbox_relay_testkit::debezium::ConnectStandalone;
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 3, 1, 2).await.unwrap();
    let based = "snapshot.mode.configuration.based";
    let modes: Vec<(&str, serde_json::Value, usize)> = vec![
        ("initial", serde_json::json!({}), 3),
        ("when_needed", serde_json::json!({}), 3),
        ("always", serde_json::json!({}), 3),
        (
            "configuration_based",
            serde_json::json!({
                format!("{based}.snapshot.data"): "true",
                format!("{based}.snapshot.schema"): "true",
                format!("{based}.start.stream"): "true",
            }),
            3,
        ),
        ("no_data", serde_json::json!({}), 0),
    ];
    let config = |side: &str, i: usize| {
        let (mode, extra, _) = &modes[i];
        let mut options = serde_json::json!({
            "snapshot.mode": mode,
            // One name per connector: Debezium registers its metrics under it.
            "topic.prefix": format!("app{i}"),
            "transforms.outbox.route.topic.replacement": format!("{side}_m{i}.${{routedByValue}}"),
            "transforms.row.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
            "transforms.row.fields": "source,op",
            "transforms.row.headers": "src,op",
            "transforms.row.operation": "copy",
        });
        for (k, v) in extra.as_object().unwrap() {
            options[k] = v.clone();
        }
        beside_debezium(
            &stack,
            side,
            &format!("m{i}"),
            "public.outbox",
            "row,",
            options,
        )
    };
    let debezium = ConnectStandalone::start(
        &json_worker(&stack),
        &(0..modes.len())
            .map(|i| config("dbz", i))
            .collect::<Vec<_>>(),
    )
    .unwrap_or_else(|e| panic!("Debezium: {e:#}"));
    let dir = tempfile::tempdir().unwrap();
    let mut relays: Vec<RelayProcess> = (0..modes.len())
        .map(|i| {
            let path = write_config(dir.path(), &format!("m{i}.json"), config("relay", i));
            stack.spawn_relay(&["--debezium-config", &path])
        })
        .collect();
    for side in ["dbz", "relay"] {
        for (i, relay) in relays.iter().enumerate() {
            stack
                .wait_slot_held(&format!("{side}_m{i}"), Duration::from_secs(120), || {
                    format!("{}\n{}", debezium.log(), relay.log())
                })
                .await;
        }
    }
    // A held slot is not yet Debezium's position (no_data): every connector streaming before
    // the event its stream must carry.
    for i in 0..modes.len() {
        debezium
            .wait_streaming(&format!("m{i}"), Duration::from_secs(120))
            .await
            .unwrap();
    }
    // One event streamed to every mode.
    insert_events(&stack.db, 3, 1, 1, 2).await.unwrap();
    for (i, (mode, _, snapshotted)) in modes.iter().enumerate() {
        let (dbz_side, our_side) = (format!("dbz_m{i}"), format!("relay_m{i}"));
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        let (dbz, ours) = loop {
            let d = side_rows(&stack, &dbz_side).await;
            let o = side_rows(&stack, &our_side).await;
            if d.len() > *snapshotted && o.len() > *snapshotted {
                break (d, o);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{mode}: Debezium {d:#?}\nthe relay {o:#?}\n{}",
                relays[i].log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (dbz, ours) = if dbz.len() == ours.len() {
            (dbz, ours)
        } else {
            (
                side_rows(&stack, &dbz_side).await,
                side_rows(&stack, &our_side).await,
            )
        };
        assert_eq!(ours, dbz, "{mode}");
        let read = ours.iter().filter(|r| r.4 == "r").count();
        assert_eq!(read, *snapshotted, "{mode}: {ours:#?}");
        assert_eq!(ours.len(), snapshotted + 1, "{mode}: {ours:#?}");
    }
    // `never`: as `no_data`.
    let no_data = modes.iter().position(|m| m.0 == "no_data").unwrap();
    let mut never = beside_debezium(
        &stack,
        "relay",
        "never",
        "public.outbox",
        "row,",
        serde_json::json!({
            "snapshot.mode": "never",
            "transforms.outbox.route.topic.replacement": "relay_never.${routedByValue}",
            "transforms.row.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
            "transforms.row.fields": "source,op",
            "transforms.row.headers": "src,op",
            "transforms.row.operation": "copy",
        }),
    );
    never["config"]["topic.prefix"] = serde_json::json!(format!("app{no_data}"));
    let path = write_config(dir.path(), "never.json", never);
    let mut relay = stack.spawn_relay(&["--debezium-config", &path]);
    stack.wait_for_slot("relay_never", &relay).await;
    insert_events(&stack.db, 4, 1, 1, 2).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let rows = side_rows(&stack, "relay_never").await;
        if !rows.is_empty() {
            assert_eq!(rows.len(), 1, "{rows:#?}");
            assert_eq!(rows[0].3, event_uuid(4));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", relay.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    relay.terminate(Duration::from_secs(20)).unwrap();
    for relay in &mut relays {
        relay.terminate(Duration::from_secs(20)).unwrap();
    }
    drop(debezium);
}

/// The initial snapshot's notifications for three outbox tables, one of them empty, beside
/// Debezium: STARTED, then IN_PROGRESS and TABLE_SCAN_COMPLETED for each table in
/// Debezium's order, with its `data_collections` (a HashSet's order while in progress), then
/// COMPLETED; each notification's data as Debezium's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_snapshot_notifications_of_several_tables_are_debeziums() {
    use outbox_relay_testkit::debezium::ConnectStandalone;
    let stack = Stack::start().await;
    outbox_tables_of(&stack, &[("outbox_x", 2), ("outbox_y", 0), ("outbox_z", 3)]).await;
    let config = |side: &str| {
        beside_debezium(
            &stack,
            side,
            "three",
            "public.outbox_x,public.outbox_y,public.outbox_z",
            "",
            serde_json::json!({
                "notification.enabled.channels": "sink",
                "notification.sink.topic.name": format!("{side}.notifications"),
            }),
        )
    };
    let debezium = ConnectStandalone::start(&json_worker(&stack), &[config("dbz")])
        .unwrap_or_else(|e| panic!("Debezium: {e:#}"));
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "three.json", config("relay"));
    let mut relay = stack.spawn_relay(&["--debezium-config", &path]);
    let logs = (&debezium, &relay);
    let (dbz, ours) = notes_until(&stack, logs, "Initial Snapshot", |n| {
        note_kinds(n).contains(&"COMPLETED".to_owned())
    })
    .await;
    let plain = |n: &[Note]| -> Vec<(serde_json::Value, serde_json::Value)> {
        n.iter().map(|n| (n.1.clone(), n.2.clone())).collect()
    };
    assert_eq!(plain(&ours), plain(&dbz));
    assert_eq!(
        note_kinds(&ours),
        [
            "STARTED",
            "IN_PROGRESS",
            "TABLE_SCAN_COMPLETED",
            "IN_PROGRESS",
            "TABLE_SCAN_COMPLETED",
            "IN_PROGRESS",
            "TABLE_SCAN_COMPLETED",
            "COMPLETED"
        ]
    );
    relay.terminate(Duration::from_secs(20)).unwrap();
    drop(debezium);
}
