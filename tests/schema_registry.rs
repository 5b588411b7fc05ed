//! Debezium configurations with schema-registry converters (Avro; Confluent's JSON Schema
//! further down), against a real registry
//! (Apicurio Registry 2.6, whose ccompat API is Confluent's): Confluent's AvroConverter
//! writes magic byte 0, the schema id the registry gave `<topic>-value`, then the Avro body;
//! Apicurio's converter the body with its global id in a header. A registry that goes away
//! stops nothing for good and dead-letters nothing; a wrong password ends the relay with the
//! option to fix, never the secret.
//! Confluent's ProtobufConverter registers the proto3 text its 7.0.x version registers and
//! writes magic byte, id, message indexes and the message.

mod common;

use common::*;
use outbox_relay_testkit::apicurio::{BasicAuthGate, Registry};
use outbox_relay_testkit::{ConsumedRecord, RelayProcess};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// `GET path` on loopback `port`, as JSON.
fn get_json(port: u16, path: &str) -> serde_json::Value {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: registry\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.contains(" 200 "), "GET {path}: {head}\n{body}");
    serde_json::from_str(body).unwrap()
}

/// Avro's zigzag varint at `at`: the value and the next position.
fn read_long(b: &[u8], mut at: usize) -> (i64, usize) {
    let (mut n, mut shift) = (0u64, 0);
    loop {
        let byte = b[at];
        at += 1;
        n |= u64::from(byte & 0x7F) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return (((n >> 1) as i64) ^ -((n & 1) as i64), at);
        }
    }
}

fn read_string(b: &[u8], at: usize) -> (String, usize) {
    let (len, at) = read_long(b, at);
    let end = at + len as usize;
    (String::from_utf8(b[at..end].to_vec()).unwrap(), end)
}

/// The envelope `{payload: ["null", Json string], type: string}`'s body: (payload, type).
fn decode_envelope(body: &[u8]) -> (String, String) {
    let (branch, at) = read_long(body, 0);
    assert_eq!(branch, 1, "payload is not null");
    let (payload, at) = read_string(body, at);
    let (event_type, at) = read_string(body, at);
    assert_eq!(at, body.len());
    (payload, event_type)
}

async fn insert(stack: &Stack, n: u64, aggregate_type: &str) {
    stack
        .db
        .execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1::text::uuid, $2, $3, 'Created', $4::text::jsonb)",
            &[&event_uuid(n), &aggregate_type, &format!("agg-{n}"), &format!("{{\"n\": {n}}}")],
        )
        .await
        .unwrap();
}

/// Reads `topic` until it holds `count` records (or 30 s pass).
async fn read_until(stack: &Stack, topic: &str, count: usize) -> Vec<ConsumedRecord> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if !stack.topics().await.iter().any(|t| t == topic) {
            assert!(Instant::now() < deadline, "no topic {topic} after 30 s");
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        }
        let records = stack.read_topic(topic).await;
        if records.len() >= count || Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Runs the relay on `config` (its slot `name`), inserts Order events 0..`count` and reads
/// them from `Order.<suffix>`: the relay, the records, and the registry's latest version of
/// `Order.<suffix>-value`.
async fn run_orders(
    stack: &Stack,
    registry: &Registry,
    name: &str,
    config: &str,
    suffix: &str,
    count: u64,
) -> (RelayProcess, Vec<ConsumedRecord>, serde_json::Value) {
    let relay = stack
        .spawn_relay_and_wait_for_slot(name, &["--debezium-config", config])
        .await;
    for n in 0..count {
        insert(stack, n, "Order").await;
    }
    let records = read_until(stack, &format!("Order.{suffix}"), count as usize).await;
    assert_eq!(records.len(), count as usize, "{}", relay.log());
    let latest = get_json(
        registry.port(),
        &format!("/apis/ccompat/v7/subjects/Order.{suffix}-value/versions/latest"),
    );
    (relay, records, latest)
}

/// Runs the relay on `config` and inserts event `n`, whose subject's latest version writes
/// other bytes than the record's schema: the event is dead-lettered naming `option`, and
/// `topic` keeps the two records it had.
async fn refused_latest(stack: &Stack, config: &str, n: u64, topic: &str, option: &str) {
    let mut relay = stack.spawn_relay(&["--debezium-config", config]);
    insert(stack, n, "Order").await;
    let key = format!("agg-{n}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let reasons = loop {
        let reasons: Vec<String> = read_until(stack, "outbox-relay.dlq", 1)
            .await
            .iter()
            .filter(|r| r.key_str() == Some(key.as_str()))
            .map(|r| r.header_str("outbox-relay.error.reason").to_owned())
            .collect();
        if !reasons.is_empty() || Instant::now() > deadline {
            break reasons;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(reasons.len(), 1, "{}", relay.log());
    assert!(
        reasons[0].contains(&format!("{option}: the latest version of subject"))
            && reasons[0].contains("is not the record's schema")
            && reasons[0].contains(&format!("{option}=false")),
        "{reasons:?}"
    );
    assert_eq!(stack.read_topic(topic).await.len(), 2);
    relay.terminate(Duration::from_secs(10)).unwrap();
}

/// Runs the relay on `config`, which must fail within 30 s: its log.
fn refused_log(stack: &Stack, config: &str) -> String {
    let mut relay = stack.spawn_relay(&["--debezium-config", config]);
    let status = relay
        .wait_timeout(Duration::from_secs(30))
        .unwrap()
        .unwrap_or_else(|| panic!("the relay kept running:\n{}", relay.log()));
    let log = relay.log();
    assert!(!status.success(), "{log}");
    log
}

const ENVELOPE: (&str, &str) = (
    "transforms.outbox.table.fields.additional.placement",
    "event_type:envelope:type",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_converters_write_what_kafka_connect_writes() {
    let mut registry = Registry::start().expect("a schema registry");
    let gate = BasicAuthGate::start(registry.port(), "relay", "s3cret-pass").unwrap();
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();

    // --- Confluent's AvroConverter, through a registry that checks the password ---
    let url = format!("http://127.0.0.1:{}/apis/ccompat/v7", gate.port());
    let config = outbox_connector(
        dir.path(),
        "avro_confluent",
        &[
            ENVELOPE,
            (
                "transforms.outbox.route.topic.replacement",
                "${routedByValue}.avro",
            ),
            (
                "key.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
            ("value.converter", "io.confluent.connect.avro.AvroConverter"),
            ("value.converter.schema.registry.url", &url),
            ("value.converter.basic.auth.credentials.source", "USER_INFO"),
            ("value.converter.basic.auth.user.info", "relay:s3cret-pass"),
        ],
    );
    let (mut relay, records, latest) =
        run_orders(&stack, &registry, "avro_confluent", &config, "avro", 4).await;
    let id = latest["id"].as_u64().unwrap() as u32;
    let schema: serde_json::Value =
        serde_json::from_str(latest["schema"].as_str().unwrap()).unwrap();
    assert_eq!(schema["type"], "record", "{schema}");
    assert_eq!(
        schema["connect.name"], "app.public.outbox.Order.Value",
        "{schema}"
    );
    let fields: Vec<&str> = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["payload", "type"]);
    for (n, r) in records.iter().enumerate() {
        let value = r.value.as_deref().unwrap();
        assert_eq!(value[0], 0, "magic byte");
        assert_eq!(u32::from_be_bytes(value[1..5].try_into().unwrap()), id);
        let (payload, event_type) = decode_envelope(&value[5..]);
        assert_eq!(payload, format!("{{\"n\": {n}}}"));
        assert_eq!(event_type, "Created");
        assert_eq!(r.key_str(), Some(format!("agg-{n}").as_str()));
    }

    // The registry goes away: a new subject cannot be registered. Nothing is dead-lettered,
    // the relay keeps retrying, and the events arrive once the registry is back.
    registry.stop();
    for n in 10..13 {
        insert(&stack, n, "Late").await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(relay.is_running(), "{}", relay.log());
    assert!(
        relay.log().contains("schema registry"),
        "the relay says what it waits for:\n{}",
        relay.log()
    );
    registry.restart().unwrap();
    let late = read_until(&stack, "Late.avro", 3).await;
    let mut payloads: Vec<String> = late
        .iter()
        .map(|r| decode_envelope(&r.value.as_deref().unwrap()[5..]).0)
        .collect();
    payloads.dedup();
    assert_eq!(
        payloads,
        ["{\"n\": 10}", "{\"n\": 11}", "{\"n\": 12}"],
        "{}",
        relay.log()
    );
    let id = get_json(
        registry.port(),
        "/apis/ccompat/v7/subjects/Late.avro-value/versions/latest",
    )["id"]
        .as_u64()
        .unwrap() as u32;
    assert!(late
        .iter()
        .all(|r| r.value.as_deref().unwrap()[1..5] == id.to_be_bytes()));
    let topics = stack.topics().await;
    assert!(
        !topics.iter().any(|t| t.contains("dlq")),
        "nothing dead-lettered: {topics:?}"
    );
    relay.terminate(Duration::from_secs(10)).unwrap();

    // --- Apicurio's AvroConverter: the body, its global id in a header ---
    let config = outbox_connector(
        dir.path(),
        "avro_apicurio",
        &[
            ENVELOPE,
            ("slot.drop.on.stop", "false"),
            (
                "transforms.outbox.route.topic.replacement",
                "${routedByValue}.apicurio",
            ),
            (
                "key.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
            (
                "value.converter",
                "io.apicurio.registry.utils.converter.AvroConverter",
            ),
            (
                "value.converter.apicurio.registry.url",
                &registry.apicurio_url(),
            ),
            ("value.converter.apicurio.registry.auto-register", "true"),
        ],
    );
    let mut relay = stack
        .spawn_relay_and_wait_for_slot("avro_apicurio", &["--debezium-config", &config])
        .await;
    insert(&stack, 20, "Order").await;
    // The snapshot's four Order rows, then the new one.
    let records = read_until(&stack, "Order.apicurio", 5).await;
    assert_eq!(records.len(), 5, "{}", relay.log());
    let meta = get_json(
        registry.port(),
        "/apis/registry/v2/groups/default/artifacts/Order.apicurio-value/meta",
    );
    let global_id = meta["globalId"].as_u64().unwrap();
    let mut payloads = Vec::new();
    for r in &records {
        assert_eq!(
            r.header("apicurio.value.globalId"),
            Some(&global_id.to_be_bytes()[..])
        );
        assert_eq!(r.header("apicurio.value.encoding"), Some(&b"BINARY"[..]));
        let (payload, event_type) = decode_envelope(r.value.as_deref().unwrap());
        assert_eq!(event_type, "Created");
        payloads.push(payload);
    }
    payloads.sort();
    assert_eq!(
        payloads,
        [
            "{\"n\": 0}",
            "{\"n\": 1}",
            "{\"n\": 20}",
            "{\"n\": 2}",
            "{\"n\": 3}"
        ]
    );
    relay.terminate(Duration::from_secs(10)).unwrap();

    // --- A wrong password: the relay exits naming the option, never the secret ---
    let config = outbox_connector(
        dir.path(),
        "avro_denied",
        &[
            ENVELOPE,
            (
                "transforms.outbox.route.topic.replacement",
                "${routedByValue}.denied",
            ),
            ("value.converter", "io.confluent.connect.avro.AvroConverter"),
            ("value.converter.schema.registry.url", &url),
            ("value.converter.basic.auth.credentials.source", "USER_INFO"),
            (
                "value.converter.basic.auth.user.info",
                "relay:Wr0ng-Secret-9",
            ),
        ],
    );
    // The outbox's rows are snapshotted first: the first of them meets the refusal.
    let log = refused_log(&stack, &config);
    assert!(
        log.contains("value.converter.basic.auth.user.info"),
        "{log}"
    );
    assert!(!log.contains("Wr0ng-Secret-9"), "{log}");
}

/// Under Confluent's `use.latest.version` and Apicurio's `find-latest`, the serializer writes
/// a record with the subject's latest schema. A latest version that differs from the record's
/// schema only where the bytes do not (a doc here: Avro's Parsing Canonical Form) is used: its
/// id, the record's bytes. One that would write other bytes (a field more) dead-letters the
/// record saying which option to change, where writing the record's own bytes under that id
/// would have a consumer read them with the wrong schema. Apicurio's artifacts are in the
/// group `apicurio.registry.artifact.group-id` names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latest_version_is_used_where_it_writes_the_records_bytes() {
    let registry = Registry::start().expect("a schema registry");
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let address = format!("127.0.0.1:{}", registry.port());
    let (ccompat, apicurio) = (registry.ccompat_url(), registry.apicurio_url());
    let confluent = [
        ("value.converter", "io.confluent.connect.avro.AvroConverter"),
        ("value.converter.schema.registry.url", ccompat.as_str()),
    ];
    // In a group of its own (`artifact.group-id`, as a public configuration sets it).
    let apicurio = [
        (
            "value.converter",
            "io.apicurio.registry.utils.converter.AvroConverter",
        ),
        ("value.converter.apicurio.registry.url", apicurio.as_str()),
        (
            "value.converter.apicurio.registry.artifact.group-id",
            "shipment",
        ),
    ];
    // One slot for the three runs of each converter: each resumes where the last stopped.
    let run = |slot: &'static str,
               suffix: &'static str,
               converter: &[(&str, &str)],
               lookup: &[(&str, &str)]| {
        let replacement = format!("${{routedByValue}}.{suffix}");
        let mut extra = vec![
            ENVELOPE,
            ("snapshot.mode", "no_data"),
            (
                "transforms.outbox.route.topic.replacement",
                replacement.as_str(),
            ),
            (
                "key.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
        ];
        extra.extend_from_slice(converter);
        extra.extend_from_slice(lookup);
        let config = outbox_connector(dir.path(), slot, &extra);
        (slot, config)
    };
    let with_doc = |schema: &str| {
        let mut schema: serde_json::Value = serde_json::from_str(schema).unwrap();
        schema["doc"] = "registered by hand".into();
        schema.to_string()
    };
    let with_field = |schema: &str| {
        let mut schema: serde_json::Value = serde_json::from_str(schema).unwrap();
        schema["fields"].as_array_mut().unwrap().push(
            serde_json::json!({"name": "extra", "type": ["null", "string"], "default": null}),
        );
        schema.to_string()
    };
    let post = |path: &str, content_type: &str, body: &str| {
        let (status, answer) = outbox_relay_testkit::http::post(&address, path, content_type, body);
        assert_eq!(status, 200, "POST {path}: {answer}");
        serde_json::from_str::<serde_json::Value>(&answer).unwrap()
    };

    // --- Confluent: the relay registers, then a version with a doc, then one with a field ---
    let subject = "/apis/ccompat/v7/subjects/Order.latest-value/versions";
    let registering = run("latest_confluent", "latest", &confluent, &[]);
    let mut relay = stack
        .spawn_relay_and_wait_for_slot(registering.0, &["--debezium-config", &registering.1])
        .await;
    insert(&stack, 0, "Order").await;
    let first = read_until(&stack, "Order.latest", 1).await;
    assert_eq!(first.len(), 1, "{}", relay.log());
    relay.terminate(Duration::from_secs(10)).unwrap();
    let registered = get_json(registry.port(), &format!("{subject}/latest"));
    let schema = registered["schema"].as_str().unwrap().to_owned();
    let documented = post(
        subject,
        "application/vnd.schemaregistry.v1+json",
        &serde_json::json!({ "schema": with_doc(&schema) }).to_string(),
    )["id"]
        .as_u64()
        .unwrap() as u32;
    assert_ne!(Some(documented as u64), registered["id"].as_u64());
    let latest = [
        ("value.converter.auto.register.schemas", "false"),
        ("value.converter.use.latest.version", "true"),
    ];
    let looking_up = run("latest_confluent", "latest", &confluent, &latest);
    let mut relay = stack.spawn_relay(&["--debezium-config", &looking_up.1]);
    insert(&stack, 1, "Order").await;
    let records = read_until(&stack, "Order.latest", 2).await;
    assert_eq!(records.len(), 2, "{}", relay.log());
    let value = records[1].value.as_deref().unwrap();
    assert_eq!(
        value[..5],
        [&[0u8][..], &documented.to_be_bytes()[..]].concat()[..],
        "the latest version's id"
    );
    assert_eq!(
        decode_envelope(&value[5..]),
        ("{\"n\": 1}".to_owned(), "Created".to_owned())
    );
    relay.terminate(Duration::from_secs(10)).unwrap();
    post(
        subject,
        "application/vnd.schemaregistry.v1+json",
        &serde_json::json!({ "schema": with_field(&schema) }).to_string(),
    );
    refused_latest(
        &stack,
        &looking_up.1,
        2,
        "Order.latest",
        "use.latest.version",
    )
    .await;

    // --- Apicurio: the same with find-latest, the global id in a header ---
    let artifact = "/apis/registry/v2/groups/shipment/artifacts/Order.found-value";
    let registering = run(
        "latest_apicurio",
        "found",
        &apicurio,
        &[("value.converter.apicurio.registry.auto-register", "true")],
    );
    let mut relay = stack
        .spawn_relay_and_wait_for_slot(registering.0, &["--debezium-config", &registering.1])
        .await;
    insert(&stack, 10, "Order").await;
    assert_eq!(
        read_until(&stack, "Order.found", 1).await.len(),
        1,
        "{}",
        relay.log()
    );
    relay.terminate(Duration::from_secs(10)).unwrap();
    let schema = {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        write!(stream, "GET {artifact} HTTP/1.0\r\nHost: registry\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response.split_once("\r\n\r\n").unwrap().1.to_owned()
    };
    let versions = format!("{artifact}/versions");
    let documented = post(&versions, "application/json", &with_doc(&schema))["globalId"]
        .as_u64()
        .unwrap();
    let latest = [("value.converter.apicurio.registry.find-latest", "true")];
    let looking_up = run("latest_apicurio", "found", &apicurio, &latest);
    let mut relay = stack.spawn_relay(&["--debezium-config", &looking_up.1]);
    insert(&stack, 11, "Order").await;
    let records = read_until(&stack, "Order.found", 2).await;
    assert_eq!(records.len(), 2, "{}", relay.log());
    assert_eq!(
        records[1].header("apicurio.value.globalId"),
        Some(&documented.to_be_bytes()[..])
    );
    assert_eq!(
        decode_envelope(records[1].value.as_deref().unwrap()),
        ("{\"n\": 11}".to_owned(), "Created".to_owned())
    );
    relay.terminate(Duration::from_secs(10)).unwrap();
    post(&versions, "application/json", &with_field(&schema));
    refused_latest(
        &stack,
        &looking_up.1,
        12,
        "Order.found",
        "apicurio.registry.find-latest",
    )
    .await;
}

/// Confluent's JsonSchemaConverter (7.0.16's documents and bytes), its credentials in the
/// registry URL (`basic.auth.credentials.source=URL`, taken as written, not decoded): the
/// registered schema's text is what Confluent's converter registers, the records magic byte
/// 0, the id, then the JSON; the password shows nowhere, not even when it is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_schema_converter_writes_what_kafka_connect_writes() {
    let registry = Registry::start().expect("a schema registry");
    let gate = BasicAuthGate::start(registry.port(), "relay", "Url-S3cret%3A9").unwrap();
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();

    let url = format!(
        "http://relay:Url-S3cret%3A9@127.0.0.1:{}/apis/ccompat/v7",
        gate.port()
    );
    let config = outbox_connector(
        dir.path(),
        "json_schema",
        &[
            ENVELOPE,
            (
                "transforms.outbox.route.topic.replacement",
                "${routedByValue}.jsonschema",
            ),
            (
                "key.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
            (
                "value.converter",
                "io.confluent.connect.json.JsonSchemaConverter",
            ),
            ("value.converter.schema.registry.url", &url),
            ("value.converter.basic.auth.credentials.source", "URL"),
        ],
    );
    let (mut relay, records, latest) =
        run_orders(&stack, &registry, "json_schema", &config, "jsonschema", 3).await;
    assert_eq!(latest["schemaType"], "JSON", "{latest}");
    // JsonSchemaData.fromConnectSchema of the EventRouter's value (7.0.16): properties in
    // Java's HashMap order, the optional payload a oneOf with null.
    assert_eq!(
        latest["schema"].as_str().unwrap(),
        concat!(
            r#"{"type":"object","title":"app.public.outbox.Order.Value","properties":{"#,
            r#""payload":{"connect.index":0,"oneOf":[{"type":"null"},{"type":"string","title":"io.debezium.data.Json","connect.version":1}]},"#,
            r#""type":{"type":"string","connect.index":1}}}"#
        )
    );
    let id = latest["id"].as_u64().unwrap() as u32;
    for (n, r) in records.iter().enumerate() {
        let value = r.value.as_deref().unwrap();
        assert_eq!(value[0], 0, "magic byte");
        assert_eq!(u32::from_be_bytes(value[1..5].try_into().unwrap()), id);
        assert_eq!(
            std::str::from_utf8(&value[5..]).unwrap(),
            format!(r#"{{"payload":"{{\"n\": {n}}}","type":"Created"}}"#)
        );
        assert_eq!(r.key_str(), Some(format!("agg-{n}").as_str()));
    }
    relay.terminate(Duration::from_secs(10)).unwrap();
    assert!(!relay.log().contains("Url-S3cret"), "{}", relay.log());

    // --- A wrong password in the URL: the relay exits naming the option, not the secret ---
    let wrong = format!(
        "http://relay:Wr0ng-Url-Secret@127.0.0.1:{}/apis/ccompat/v7",
        gate.port()
    );
    let config = outbox_connector(
        dir.path(),
        "json_schema_denied",
        &[
            ENVELOPE,
            (
                "transforms.outbox.route.topic.replacement",
                "${routedByValue}.denied",
            ),
            (
                "value.converter",
                "io.confluent.connect.json.JsonSchemaConverter",
            ),
            ("value.converter.schema.registry.url", &wrong),
            ("value.converter.basic.auth.credentials.source", "URL"),
        ],
    );
    let log = refused_log(&stack, &config);
    assert!(log.contains("value.converter.schema.registry.url"), "{log}");
    assert!(log.contains("relay:[hidden]@127.0.0.1"), "{log}");
    assert!(!log.contains("Wr0ng-Url-Secret"), "{log}");
}

/// Protobuf's base-128 varint at `at`: the value and the next position.
fn read_varint(b: &[u8], mut at: usize) -> (u64, usize) {
    let (mut n, mut shift) = (0u64, 0);
    loop {
        let byte = b[at];
        at += 1;
        n |= u64::from(byte & 0x7F) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return (n, at);
        }
    }
}

/// A Protobuf message's length-delimited fields: (field number, bytes).
fn decode_message(b: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let (key, next) = read_varint(b, at);
        assert_eq!(key & 7, 2, "a length-delimited field");
        let (len, next) = read_varint(b, next);
        let end = next + len as usize;
        fields.push((key >> 3, b[next..end].to_vec()));
        at = end;
    }
    fields
}

/// What Confluent's ProtobufConverter 7.0.16 registers for the EventRouter's envelope
/// `app.public.outbox.Order.Value {payload: optional Json string, type: string}` (its
/// `ProtobufData.fromConnectSchema(...).canonicalString()`).
const ORDER_PROTO: &str = "syntax = \"proto3\";\npackage app.public.outbox.Order;\n\nmessage Value {\n  string payload = 1;\n  string type = 2;\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_converter_writes_what_kafka_connect_writes() {
    let registry = Registry::start().expect("a schema registry");
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let url = registry.ccompat_url();
    let class = "io.confluent.connect.protobuf.ProtobufConverter";
    let config = outbox_connector(
        dir.path(),
        "protobuf_confluent",
        &[
            ENVELOPE,
            (
                "transforms.outbox.route.topic.replacement",
                "${routedByValue}.proto",
            ),
            ("key.converter", class),
            ("key.converter.schema.registry.url", &url),
            ("value.converter", class),
            ("value.converter.schema.registry.url", &url),
        ],
    );
    let mut relay = stack
        .spawn_relay_and_wait_for_slot("protobuf_confluent", &["--debezium-config", &config])
        .await;
    for n in 0..3 {
        insert(&stack, n, "Order").await;
    }
    let records = read_until(&stack, "Order.proto", 3).await;
    assert_eq!(records.len(), 3, "{}", relay.log());
    let subject = |name: &str| {
        get_json(
            registry.port(),
            &format!("/apis/ccompat/v7/subjects/{name}/versions/latest"),
        )
    };
    let value = subject("Order.proto-value");
    assert_eq!(value["schemaType"], "PROTOBUF", "{value}");
    assert_eq!(value["schema"].as_str(), Some(ORDER_PROTO), "{value}");
    let value_id = value["id"].as_u64().unwrap() as u32;
    // The key, a string, is google.protobuf.StringValue of wrappers.proto.
    let key = subject("Order.proto-key");
    let key_schema = key["schema"].as_str().unwrap();
    assert!(
        key_schema.starts_with("syntax = \"proto3\";\npackage google.protobuf;\n"),
        "{key}"
    );
    assert!(key_schema.contains("\nmessage StringValue {\n"), "{key}");
    let key_id = key["id"].as_u64().unwrap() as u32;
    for (n, r) in records.iter().enumerate() {
        let value = r.value.as_deref().unwrap();
        assert_eq!(value[0], 0, "magic byte");
        assert_eq!(
            u32::from_be_bytes(value[1..5].try_into().unwrap()),
            value_id
        );
        // Message indexes: the first message, written as a single 0.
        assert_eq!(value[5], 0);
        assert_eq!(
            decode_message(&value[6..]),
            [
                (1, format!("{{\"n\": {n}}}").into_bytes()),
                (2, b"Created".to_vec())
            ]
        );
        let key = r.key.as_deref().unwrap();
        assert_eq!(key[0], 0);
        assert_eq!(u32::from_be_bytes(key[1..5].try_into().unwrap()), key_id);
        // StringValue is wrappers.proto's eighth message: one index, 7, zigzag-encoded.
        assert_eq!(key[5..7], [2, 14]);
        assert_eq!(
            decode_message(&key[7..]),
            [(1, format!("agg-{n}").into_bytes())]
        );
    }
    relay.terminate(Duration::from_secs(10)).unwrap();
}
