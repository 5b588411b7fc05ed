//! What one event costs the relay's CPU between the replication stream and the producer:
//! a pgoutput Insert decoded and routed, in the native mode and in the Debezium mode
//! (the record Kafka Connect would write through the JsonConverter, with and without a
//! chain of transforms, and with a transform before the EventRouter).
//!
//! The cases are the router configurations that `--debezium-config` makes of the connector
//! configurations in [`Case::connector`]; a test of the relay checks that they are exactly
//! what its translation makes, so this crate needs nothing but the decoder and the router and
//! builds in seconds (`--profile cost`). `scripts/cost-check.sh` counts the instructions of
//! [`route_events`] under callgrind for every case and size and compares them with the
//! committed baseline; `benches/decode_route.rs` times the same cases. The memory ceiling
//! beside it, `memory-ceiling.txt`, is `tests/memory_ceiling.rs`'s.

use bytes::{BufMut, Bytes, BytesMut};
use outbox_router::connect::{
    Converter, ExpandBehaviour, HeaderConverter, JsonConverter, TypeModes,
};
use outbox_router::transforms::{self, Chain, Predicate, Step};
use outbox_router::{
    AdditionalField, BeforeRouter, ConnectFormat, ContextHeaders, ErrorHandling, InvalidOperation,
    Output, RouteOutcome, Router, RouterConfig, TopicTemplate,
};

/// The record clock of every case: timestamps are part of the bytes.
pub const CLOCK_MS: i64 = 1_764_152_870_824;

/// The payload sizes the check and the bench measure.
pub const SIZES: [usize; 3] = [100, 1_000, 10_000];

/// A configuration under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// `run` with its defaults: raw bytes, no copy of the payload.
    Native,
    /// The seeds' shape: the EventRouter with the payload expanded, a string key and
    /// schemaless JSON values, the event type as a header.
    DebeziumJson,
    /// The same with JsonConverter's schemas (its default) and a chain after the
    /// EventRouter: a topic prefix (RegexRouter), a header (InsertHeader) and a Filter under
    /// a predicate that matches no record.
    DebeziumChain,
    /// DebeziumJson with a transform before the EventRouter, as Debezium's CloudEvents recipe
    /// puts one: the row's whole change event is made, HeaderFrom copies its source, op and
    /// transaction into headers, the EventRouter routes it.
    DebeziumBefore,
    /// The seeds' connector configuration as it is (`tests/fixtures/debezium/seed-000`): the
    /// EventRouter and the worker's default converters, JsonConverter with schemas for the key
    /// and the value, the payload a string.
    DebeziumSeed,
}

impl Case {
    pub const ALL: [Case; 5] = [
        Case::Native,
        Case::DebeziumJson,
        Case::DebeziumChain,
        Case::DebeziumBefore,
        Case::DebeziumSeed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Case::Native => "native",
            Case::DebeziumJson => "debezium-json",
            Case::DebeziumChain => "debezium-chain",
            Case::DebeziumBefore => "debezium-before",
            Case::DebeziumSeed => "debezium-seed",
        }
    }

    pub fn from_name(name: &str) -> Option<Case> {
        Case::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The connector configuration the case stands for (`None`: the native mode).
    pub fn connector(self) -> Option<&'static str> {
        match self {
            Case::Native => None,
            Case::DebeziumJson => Some(DEBEZIUM_JSON),
            Case::DebeziumChain => Some(DEBEZIUM_CHAIN),
            Case::DebeziumBefore => Some(DEBEZIUM_BEFORE),
            Case::DebeziumSeed => Some(DEBEZIUM_SEED),
        }
    }

    /// The router configuration: the native defaults, or what the relay's Debezium
    /// translation makes of [`Case::connector`].
    pub fn config(self) -> RouterConfig {
        match self {
            Case::Native => RouterConfig::default(),
            Case::DebeziumJson => event_router(false, Chain::default(), None),
            Case::DebeziumSeed => seed(),
            Case::DebeziumChain => event_router(
                true,
                Chain {
                    steps: vec![
                        step(
                            "prefix",
                            "org.apache.kafka.connect.transforms.RegexRouter",
                            &[("regex", "(.*)"), ("replacement", "prod.$1")],
                            None,
                        ),
                        step(
                            "origin",
                            "org.apache.kafka.connect.transforms.InsertHeader",
                            &[("header", "origin"), ("value.literal", "orders-service")],
                            None,
                        ),
                        step(
                            "drop",
                            "org.apache.kafka.connect.transforms.Filter",
                            &[],
                            Some((Predicate::RecordIsTombstone, false)),
                        ),
                    ],
                },
                None,
            ),
            Case::DebeziumBefore => event_router(
                false,
                Chain::default(),
                Some(BeforeRouter {
                    chain: Chain {
                        steps: vec![step(
                            "meta",
                            "org.apache.kafka.connect.transforms.HeaderFrom$Value",
                            &[
                                ("fields", "source,op,transaction"),
                                ("headers", "source,op,transaction"),
                                ("operation", "copy"),
                            ],
                            None,
                        )],
                    },
                    version: "3.6.1.Final".into(),
                    database: "postgres".into(),
                }),
            ),
        }
    }

    /// A router of the case, its clock fixed and the captured outbox Relation known.
    pub fn router(self) -> Router {
        let mut router = Router::new(self.config()).with_clock(|| CLOCK_MS);
        router.route(&outbox_relation());
        router
    }
}

/// The EventRouter of the Debezium cases but the seed's, on `public.outbox` with
/// `topic.prefix=bench`.
fn event_router(schemas_enable: bool, chain: Chain, before: Option<BeforeRouter>) -> RouterConfig {
    RouterConfig {
        topic_template: TopicTemplate::parse("outbox.event.${routedByValue}")
            .expect("Debezium's default route.topic.replacement"),
        additional: AdditionalField::parse_list("event_type:header:eventType")
            .expect("a valid placement"),
        on_update: InvalidOperation::Warn,
        // Debezium's route.tombstone.on.empty.payload=false.
        tombstone_on_null_payload: false,
        output: Output::Connect(connect_format(
            Converter::String,
            Converter::Json(JsonConverter {
                schemas_enable,
                replace_null_with_default: true,
            }),
            Some(ExpandBehaviour {
                keep_nulls: false,
                keep_empty_arrays: false,
            }),
            ("bench", "bench"),
        )),
        chain,
        before,
        ..RouterConfig::default()
    }
}

/// What Kafka Connect writes with these converters for a connector named `connector` of
/// `topic.prefix` `prefix`, Debezium's defaults otherwise.
fn connect_format(
    key: Converter,
    value: Converter,
    expand: Option<ExpandBehaviour>,
    (prefix, connector): (&str, &str),
) -> ConnectFormat {
    ConnectFormat {
        avro_schema_names: false,
        key,
        value,
        header: HeaderConverter::Simple,
        topic_prefix: prefix.into(),
        expand,
        schema_version_column: None,
        tracing_span_context_column: Some("tracingspancontext".into()),
        tombstone_on_empty_payload: false,
        context_headers: Some(ContextHeaders::postgres(prefix, None)),
        types: TypeModes::default(),
        heartbeat_topic: None,
        transaction_metadata: None,
        notifications: None,
        errors: ErrorHandling {
            connector: connector.into(),
            ..ErrorHandling::default()
        },
    }
}

/// A transform of the chain, made by the router's registry from its options.
fn step(
    alias: &str,
    class: &str,
    options: &[(&str, &str)],
    predicate: Option<(Predicate, bool)>,
) -> Step {
    let (entry, side) = transforms::lookup(class).expect("a transform outbox-relay applies");
    let get = |key: &str| {
        options
            .iter()
            .find(|(name, _)| format!("transforms.{alias}.{name}") == key)
            .map(|(_, value)| (*value).to_owned())
    };
    let transform = (entry.parse)(&transforms::Options { alias, get: &get }, side)
        .expect("the case's options are valid");
    Step {
        alias: alias.into(),
        class: class.into(),
        transform,
        predicate,
    }
}

/// The seeds' connector: `orders-server`, JsonConverter with schemas (Kafka Connect's
/// default) for key and value, no placement but `id`, the payload a string.
fn seed() -> RouterConfig {
    let json = Converter::Json(JsonConverter {
        schemas_enable: true,
        replace_null_with_default: true,
    });
    RouterConfig {
        topic_template: TopicTemplate::parse("${routedByValue}.events").expect("a valid template"),
        additional: Vec::new(),
        on_update: InvalidOperation::Warn,
        tombstone_on_null_payload: false,
        output: Output::Connect(connect_format(
            json.clone(),
            json,
            None,
            ("orders-server", "outbox-connector"),
        )),
        ..RouterConfig::default()
    }
}

const DEBEZIUM_SEED: &str =
    include_str!("../../../tests/fixtures/debezium/seed-000-outbox-connector.json");

const DEBEZIUM_JSON: &str = r#"{"name": "bench", "config": {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "localhost", "database.dbname": "postgres",
    "database.user": "postgres", "topic.prefix": "bench",
    "table.include.list": "public.outbox",
    "transforms": "outbox",
    "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
    "transforms.outbox.route.by.field": "aggregate_type",
    "transforms.outbox.table.field.event.key": "aggregate_id",
    "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType",
    "transforms.outbox.table.expand.json.payload": "true",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false"}}"#;

const DEBEZIUM_CHAIN: &str = r#"{"name": "bench", "config": {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "localhost", "database.dbname": "postgres",
    "database.user": "postgres", "topic.prefix": "bench",
    "table.include.list": "public.outbox",
    "transforms": "outbox,prefix,origin,drop",
    "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
    "transforms.outbox.route.by.field": "aggregate_type",
    "transforms.outbox.table.field.event.key": "aggregate_id",
    "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType",
    "transforms.outbox.table.expand.json.payload": "true",
    "transforms.prefix.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.prefix.regex": "(.*)",
    "transforms.prefix.replacement": "prod.$1",
    "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertHeader",
    "transforms.origin.header": "origin",
    "transforms.origin.value.literal": "orders-service",
    "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.drop.predicate": "tombstone",
    "predicates": "tombstone",
    "predicates.tombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter"}}"#;

const DEBEZIUM_BEFORE: &str = r#"{"name": "bench", "config": {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "localhost", "database.dbname": "postgres",
    "database.user": "postgres", "topic.prefix": "bench",
    "table.include.list": "public.outbox",
    "transforms": "meta,outbox",
    "transforms.meta.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
    "transforms.meta.fields": "source,op,transaction",
    "transforms.meta.headers": "source,op,transaction",
    "transforms.meta.operation": "copy",
    "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
    "transforms.outbox.route.by.field": "aggregate_type",
    "transforms.outbox.table.field.event.key": "aggregate_id",
    "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType",
    "transforms.outbox.table.expand.json.payload": "true",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false"}}"#;

const FIXTURE: &str = include_str!("../../pgoutput/tests/fixtures/pg15-session.hex");

/// The Relation message of the seeds' outbox table, as PostgreSQL 15 sent it.
pub fn outbox_relation() -> pgoutput::LogicalMessage {
    let line = FIXTURE
        .lines()
        .nth(1)
        .expect("the second captured message is the outbox Relation");
    let hex = line.split_once(' ').expect("offset and message").1;
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    pgoutput::decode(Bytes::from(bytes)).expect("a Relation message")
}

/// An Insert into the captured relation with a JSON payload of `payload_len` bytes.
pub fn insert_message(payload_len: usize) -> Bytes {
    let pgoutput::LogicalMessage::Relation(relation) = outbox_relation() else {
        unreachable!("outbox_relation is a Relation")
    };
    let mut payload = String::from("{\"data\": \"");
    while payload.len() < payload_len - 2 {
        payload.push('x');
    }
    payload.push_str("\"}");
    let columns: [&[u8]; 6] = [
        b"8a0e6a0e-6c9b-4d3a-9a57-2b3f0f6b1c01",
        b"Order",
        b"order-12345",
        b"OrderCreated",
        payload.as_bytes(),
        b"2026-01-01 00:00:00.123456+00",
    ];
    let mut m = BytesMut::new();
    m.put_u8(b'I');
    m.put_u32(relation.relation_id);
    m.put_u8(b'N');
    m.put_i16(columns.len() as i16);
    for c in columns {
        m.put_u8(b't');
        m.put_i32(c.len() as i32);
        m.put_slice(c);
    }
    m.freeze()
}

/// What the relay does with each Insert: `Router::route_message` decodes the column
/// positions and routes in one pass; in the Debezium mode it also applies the transforms and
/// the converters, as `run` does. The value's length.
pub fn decode_and_route(router: &mut Router, message: &Bytes) -> usize {
    match router.route_message(message).expect("a valid message") {
        RouteOutcome::Record(r) => r.value.map_or(0, |v| v.len()),
        other => panic!("an Insert of the outbox is a record: {other:?}"),
    }
}

/// `events` Inserts decoded and routed: what the cost check counts (never inlined, so that
/// callgrind can count this function alone).
#[inline(never)]
pub fn route_events(router: &mut Router, message: &Bytes, events: usize) -> usize {
    (0..events)
        .map(|_| std::hint::black_box(decode_and_route(router, message)))
        .sum()
}
