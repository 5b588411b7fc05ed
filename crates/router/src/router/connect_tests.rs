//! The Connect path on the seeds' table: bytes as Kafka Connect + Debezium write them.

use super::*;
use crate::connect::{ColumnFacts, Converter, ExpandBehaviour, HeaderConverter};
use crate::{AdditionalField, ConnectFormat, Output};
use pgoutput::{Column, ReplicaIdentity, TupleData};

const SEED_COLUMNS: &[&str] = &[
    "id",
    "aggregate_type",
    "aggregate_id",
    "event_type",
    "payload",
    "created_at",
];

/// The seeds' outbox table as pgoutput describes it: uuid, varchar, varchar, varchar,
/// jsonb, timestamptz.
fn seed_relation() -> LogicalMessage {
    let types = [2950, 1043, 1043, 1043, 3802, 1184];
    LogicalMessage::Relation(Relation {
        relation_id: 1,
        namespace: "public".into(),
        name: "outbox".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: SEED_COLUMNS
            .iter()
            .zip(types)
            .map(|(c, t)| Column {
                flags: 0,
                name: (*c).into(),
                type_oid: t,
                type_modifier: -1,
            })
            .collect(),
    })
}

fn format(key: Converter, value: Converter, tombstone: bool) -> ConnectFormat {
    ConnectFormat {
        tombstone_on_empty_payload: tombstone,
        ..ConnectFormat::new(key, value, "orders-server")
    }
}

fn router_with(config: RouterConfig) -> Router {
    // Records without a timestamp of their own are produced at time 0.
    let mut router = Router::new(config).with_clock(|| 0);
    let facts = SEED_COLUMNS
        .iter()
        .map(|c| ColumnFacts {
            name: (*c).into(),
            not_null: *c != "payload",
            default_expression: None,
            pg_type: None,
            key_position: (*c == "id").then_some(1),
        })
        .collect();
    router.route(&seed_relation());
    // Facts may arrive after the Relation message: the plan is rebuilt.
    router.set_column_facts(&TableName::parse("public.outbox").unwrap(), facts);
    router
}

fn router(key: Converter, value: Converter, tombstone: bool) -> Router {
    router_with(RouterConfig {
        additional: vec![],
        output: Output::Connect(format(key, value, tombstone)),
        ..RouterConfig::default()
    })
}

fn seed_insert(payload: Option<&str>) -> LogicalMessage {
    LogicalMessage::Insert(Insert {
        relation_id: 1,
        new_tuple: TupleData {
            columns: [
                Some("6b1c0e4e-0000-4000-8000-000000000001"),
                Some("Order"),
                Some("order-1"),
                Some("OrderCreated"),
                payload,
                Some("2026-01-01 10:00:00+00"),
            ]
            .iter()
            .map(|v| match v {
                Some(t) => ColumnValue::Text(Bytes::copy_from_slice(t.as_bytes())),
                None => ColumnValue::Null,
            })
            .collect(),
        },
    })
}

fn record(router: &mut Router, payload: Option<&str>) -> OutboxRecord {
    match router.route(&seed_insert(payload)) {
        RouteOutcome::Record(r) => r,
        other => panic!("{other:?}"),
    }
}

fn text(b: &Option<Bytes>) -> &str {
    std::str::from_utf8(b.as_deref().expect("not null")).unwrap()
}

const JSON_ON: Converter = Converter::Json(crate::connect::JsonConverter {
    schemas_enable: true,
    replace_null_with_default: true,
});
const JSON_OFF: Converter = Converter::Json(crate::connect::JsonConverter {
    schemas_enable: false,
    replace_null_with_default: true,
});

#[test]
fn kafka_connect_defaults_write_schema_envelopes() {
    let mut r = router(JSON_ON, JSON_ON, false);
    let rec = record(&mut r, Some(r#"{"id": 1}"#));
    assert_eq!(&*rec.topic, "Order.events");
    assert_eq!(
        text(&rec.key),
        r#"{"schema":{"type":"string","optional":false},"payload":"order-1"}"#
    );
    assert_eq!(
        text(&rec.value),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"id\": 1}"}"#
    );
    assert_eq!(&*rec.headers[0].0, "id");
    assert_eq!(
        rec.headers[0].1.as_deref().unwrap(),
        b"6b1c0e4e-0000-4000-8000-000000000001"
    );
    assert_eq!(rec.timestamp_ms, None);
    // NULL payload without route.tombstone.on.empty.payload: JSON null, not a tombstone.
    let rec = record(&mut r, None);
    assert_eq!(
        text(&rec.value),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#
    );
}

/// Found by the differential test (seed 10): Debezium infers no schema from a top-level empty
/// array and keeps the text with a null schema.
#[test]
fn an_expanded_empty_array_keeps_its_text_with_a_null_schema() {
    let expanded = |value: Converter| {
        let mut f = format(JSON_ON, value, false);
        f.expand = Some(ExpandBehaviour::default());
        router_with(RouterConfig {
            additional: vec![],
            output: Output::Connect(f),
            ..RouterConfig::default()
        })
    };
    let mut r = expanded(JSON_ON);
    assert_eq!(
        text(&record(&mut r, Some("[]")).value),
        r#"{"schema":null,"payload":"[]"}"#
    );
    let mut r = expanded(JSON_OFF);
    assert_eq!(text(&record(&mut r, Some("[]")).value), r#""[]""#);
    let mut r = expanded(JSON_ON);
    assert_eq!(
        text(&record(&mut r, Some(r#"{"a": []}"#)).value),
        r#"{"schema":{"type":"struct","fields":[],"optional":true,"name":"payload"},"payload":{}}"#,
        "an object is expanded as before"
    );
}

#[test]
fn string_key_and_schemaless_json_value_double_encode_the_payload() {
    let mut r = router(Converter::String, JSON_OFF, true);
    let rec = record(&mut r, Some(r#"{"id": 1}"#));
    assert_eq!(text(&rec.key), "order-1");
    assert_eq!(text(&rec.value), r#""{\"id\": 1}""#);
    // route.tombstone.on.empty.payload=true: NULL and blank payloads are tombstones.
    assert_eq!(record(&mut r, None).value, None);
    assert_eq!(record(&mut r, Some("  ")).value, None);
}

#[test]
fn envelope_header_partition_and_timestamp_placements() {
    let mut r = router_with(RouterConfig {
        additional: AdditionalField::parse_list(
            "event_type:envelope:type, event_type:header:eventType, aggregate_type:envelope",
        )
        .unwrap(),
        timestamp_column: Some("created_at".into()),
        output: Output::Connect(format(Converter::String, JSON_ON, false)),
        ..RouterConfig::default()
    });
    let rec = record(&mut r, Some("{}"));
    assert_eq!(
        text(&rec.value),
        concat!(
            r#"{"schema":{"type":"struct","fields":["#,
            r#"{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},"#,
            r#"{"type":"string","optional":false,"field":"type"},"#,
            r#"{"type":"string","optional":false,"field":"aggregate_type"}],"#,
            r#""optional":false,"name":"orders-server.public.outbox.Order.Value"},"#,
            r#""payload":{"payload":"{}","type":"OrderCreated","aggregate_type":"Order"}}"#
        )
    );
    let names: Vec<&str> = rec.headers.iter().map(|(k, _)| &**k).collect();
    assert_eq!(names, ["id", "eventType"]);
    // timestamptz: Debezium's task fails; outbox-relay uses the instant.
    assert_eq!(rec.timestamp_ms, Some(1_767_261_600_000));
}

#[test]
fn unsupported_column_types_stop_the_relay_instead_of_guessing_bytes() {
    let mut r = router(JSON_ON, JSON_ON, false);
    let LogicalMessage::Relation(mut relation) = seed_relation() else {
        unreachable!()
    };
    relation.columns[4].type_oid = 3615; // a tsquery payload: Debezium leaves it out
    r.route(&LogicalMessage::Relation(relation));
    match r.route(&seed_insert(Some("'fat' & 'cat'"))) {
        RouteOutcome::Fatal(reason) => assert!(
            reason.contains("\"payload\"") && reason.contains("include.unknown.datatypes"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn updates_follow_table_op_invalid_behavior() {
    let update = LogicalMessage::Update(pgoutput::Update {
        relation_id: 1,
        key_tuple: None,
        old_tuple: None,
        new_tuple: TupleData { columns: vec![] },
    });
    for (behaviour, expected) in [
        (InvalidOperation::Ignore, "Ignored"),
        (InvalidOperation::Warn, "SkippedUpdate"),
        (InvalidOperation::Fatal, "Fatal"),
    ] {
        let mut r = router_with(RouterConfig {
            on_update: behaviour,
            output: Output::Connect(format(JSON_ON, JSON_ON, false)),
            ..RouterConfig::default()
        });
        let outcome = format!("{:?}", r.route(&update));
        assert!(outcome.starts_with(expected), "{behaviour:?}: {outcome}");
    }
}

/// Debezium's CloudEvents recipe for the outbox: `HeaderFrom$Value` before the EventRouter
/// copies the change event's `source`, `op` and `transaction` into headers (JsonConverter
/// with schemas), the CloudEventsConverter reads them back. The bytes below are what the
/// differential test found Debezium 3.6.1 writing for such a record (its `time` and `id`
/// from the commit time and WAL position given).
#[test]
fn the_cloudevents_recipe_writes_debeziums_cloudevent() {
    use crate::connect::cloudevents::{CloudEvents, Source};
    use crate::transforms::{lookup, Chain, Options, Step};
    let class = "org.apache.kafka.connect.transforms.HeaderFrom$Value";
    let (entry, side) = lookup(class).unwrap();
    let get = |k: &str| match k {
        "transforms.meta.fields" | "transforms.meta.headers" => {
            Some("source,op,transaction".to_owned())
        }
        "transforms.meta.operation" => Some("copy".to_owned()),
        _ => None,
    };
    let transform = (entry.parse)(
        &Options {
            alias: "meta",
            get: &get,
        },
        side,
    )
    .unwrap();
    let cloudevents = |metadata: &str, extensions: bool| {
        let (global, id, kind, trace, name) =
            CloudEvents::metadata_source(metadata, false, false).unwrap();
        assert_eq!(trace, Source::Generate);
        Converter::CloudEvents(Box::new(CloudEvents {
            global,
            id,
            kind,
            trace_parent: None,
            data_schema_name: name,
            extension_attributes: extensions,
            data: crate::connect::JsonConverter {
                schemas_enable: false,
                replace_null_with_default: true,
            },
            expanded_payload: None,
        }))
    };
    let mut format = format(JSON_OFF, cloudevents("header,id:generate", true), false);
    format.header = HeaderConverter::Other(JSON_ON);
    format.expand = Some(ExpandBehaviour::default());
    format.context_headers = None;
    let config = RouterConfig {
        additional: vec![AdditionalField {
            column: "event_type".into(),
            placement: crate::Placement::Header,
            alias: "type".into(),
        }],
        output: Output::Connect(format),
        before: Some(crate::BeforeRouter {
            chain: Chain {
                steps: vec![Step {
                    alias: "meta".into(),
                    class: class.into(),
                    transform,
                    predicate: None,
                }],
            },
            version: "3.6.1.Final".into(),
            database: "postgres".into(),
        }),
        ..RouterConfig::default()
    };
    let mut r = router_with(config);
    r.set_position(streamed_position());
    let outcome = r.route(&seed_insert(Some(r#"{"total": 42, "note": "ü"}"#)));
    let rec = crate::Router::converted(Some(outcome));
    assert_eq!(
        text(&rec.value),
        concat!(
            r#"{"id":"name:orders-server;lsn:28844416;txId:983;sequence:[\"28844176\",\"28844416\"]","#,
            r#""source":"/debezium/postgresql/orders-server","specversion":"1.0","type":"OrderCreated","#,
            r#""time":"2025-11-26T10:27:50.824Z","datacontenttype":"application/json","#,
            r#""iodebeziumop":"c","iodebeziumversion":"3.6.1.Final","iodebeziumconnector":"postgresql","#,
            r#""iodebeziumname":"orders-server","iodebeziumtsms":"1764152870824","iodebeziumsnapshot":"false","#,
            r#""iodebeziumdb":"postgres","iodebeziumsequence":"[\"28844176\",\"28844416\"]","#,
            r#""iodebeziumtsus":"1764152870824123","iodebeziumtsns":"1764152870824123000","#,
            r#""iodebeziumschema":"public","iodebeziumtable":"outbox","iodebeziumtxId":"983","#,
            r#""iodebeziumlsn":"28844416","iodebeziumxmin":null,"iodebeziumorigin":null,"#,
            r#""iodebeziumoriginlsn":null,"iodebeziumtxid":null,"iodebeziumtxtotalorder":null,"#,
            r#""iodebeziumtxdatacollectionorder":null,"data":{"total":42,"note":"ü"}}"#
        )
    );
    // The metadata headers come first, then the EventRouter's own.
    let names: Vec<&str> = rec.headers.iter().map(|(n, _)| &**n).collect();
    assert_eq!(names, ["source", "op", "transaction", "id", "type"]);
    assert_eq!(
        text(&rec.headers[1].1),
        r#"{"schema":{"type":"string","optional":false},"payload":"c"}"#
    );

    // Without extension attributes, and with the id and type generated.
    let mut r2 = {
        let mut config = r.config.clone();
        if let Output::Connect(f) = &mut config.output {
            f.value = cloudevents("header,id:generate,type:generate", false);
        }
        router_with(config)
    };
    r2.set_position(r.position.clone());
    let outcome = r2.route(&seed_insert(Some(r#"{"total": 42}"#)));
    let value = text(&crate::Router::converted(Some(outcome)).value).to_owned();
    assert!(
        value.contains(r#""type":"io.debezium.connector.postgresql.DataChangeEvent","time""#)
            && value.contains(r#""datacontenttype":"application/json","data":{"total":42}}"#),
        "{value}"
    );

    // A payload that is not a struct fails the converter as Debezium's does.
    match r.route(&seed_insert(Some(r#"[1, 2]"#))) {
        RouteOutcome::Invalid(dead) => assert_eq!(
            dead.reason,
            "value converter io.debezium.converters.CloudEventsConverter failed: Mismatching schema"
        ),
        other => panic!("{other:?}"),
    }
}

/// A transform before the EventRouter, configured as `transforms.<alias>.*` would be.
fn before_step(alias: &str, class: &str, options: &[(&str, &str)]) -> crate::transforms::Step {
    use crate::transforms::{lookup, Options, Step};
    let (entry, side) = lookup(class).unwrap();
    let options: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| (format!("transforms.{alias}.{k}"), (*v).to_owned()))
        .collect();
    let get = |k: &str| options.iter().find(|(o, _)| o == k).map(|(_, v)| v.clone());
    let transform = (entry.parse)(&Options { alias, get: &get }, side).unwrap();
    Step {
        alias: alias.into(),
        class: class.into(),
        transform,
        predicate: None,
    }
}

const T: &str = "org.apache.kafka.connect.transforms.";

/// A streamed change's position: the differential test's, whose CloudEvent bytes the
/// CloudEvents test keeps.
fn streamed_position() -> crate::SourcePosition {
    crate::SourcePosition {
        lsn: 28_844_416,
        xid: Some(983),
        commit_time_us: Some(1_764_152_870_824_123),
        last_commit_lsn: Some(28_844_176),
        snapshot: None,
        transaction: None,
    }
}

/// A router of the seeds' table with `steps` before the EventRouter, at a WAL position.
fn router_before(config: RouterConfig, steps: Vec<crate::transforms::Step>) -> Router {
    let mut r = router_with(RouterConfig {
        before: Some(crate::BeforeRouter {
            chain: crate::transforms::Chain { steps },
            version: "3.6.1.Final".into(),
            database: "postgres".into(),
        }),
        ..config
    });
    r.set_position(streamed_position());
    r
}

/// The EventRouter reads the change event the transforms before it made: where they leave
/// the row alone, it routes exactly what it routes from the row itself (headers, envelope,
/// key, timestamp, tombstone).
#[test]
fn the_event_router_routes_a_change_event_as_it_routes_the_row() {
    let mut format = format(JSON_ON, JSON_ON, true);
    format.header = HeaderConverter::Other(JSON_ON);
    let config = RouterConfig {
        additional: vec![
            AdditionalField {
                column: "event_type".into(),
                placement: crate::Placement::Header,
                alias: "type".into(),
            },
            AdditionalField {
                column: "created_at".into(),
                placement: crate::Placement::Envelope,
                alias: "at".into(),
            },
        ],
        timestamp_column: Some("created_at".into()),
        output: Output::Connect(format),
        ..RouterConfig::default()
    };
    let mut plain = router_with(config.clone());
    let mut before = router_before(
        config,
        vec![
            before_step(
                "drop",
                &format!("{T}ReplaceField$Value"),
                &[("exclude", "source,transaction")],
            ),
            before_step(
                "tag",
                &format!("{T}InsertField$Value"),
                &[("static.field", "origin"), ("static.value", "shop")],
            ),
        ],
    );
    for payload in [Some(r#"{"total": 42}"#), None, Some("  ")] {
        let outcome = plain.route(&seed_insert(payload));
        let expected = crate::Router::converted(Some(outcome));
        let outcome = before.route(&seed_insert(payload));
        let got = crate::Router::converted(Some(outcome));
        assert_eq!(got, expected, "{payload:?}");
        assert_eq!(got.timestamp_ms, Some(1_767_261_600_000));
    }
    // Without a timestamp column, the record's time is the change event's ts_ms: when the
    // relay processed it.
    let mut config = before.config.clone();
    config.timestamp_column = None;
    let mut r = router_before(config, vec![]).with_clock(|| 1_700_000_000_123);
    match r.route(&seed_insert(Some("{}"))) {
        RouteOutcome::Record(record) => assert_eq!(record.timestamp_ms, Some(1_700_000_000_123)),
        other => panic!("{other:?}"),
    }
}

/// The change event carries the row as Debezium's connector writes it: `after` the row
/// (`<prefix>.<schema>.<table>.Value`, each column with Debezium's schema), `before` null,
/// the key the primary key's struct, `op` `c` (`r` for a snapshot row).
#[test]
fn transforms_before_the_event_router_read_the_row_and_its_key() {
    let mut format = format(JSON_ON, JSON_ON, false);
    format.header = HeaderConverter::Other(JSON_OFF);
    format.context_headers = None;
    let config = RouterConfig {
        output: Output::Connect(format),
        ..RouterConfig::default()
    };
    let mut r = router_before(
        config,
        vec![
            before_step(
                "row",
                &format!("{T}HeaderFrom$Value"),
                &[
                    ("fields", "after,before,op"),
                    ("headers", "row,old,op"),
                    ("operation", "copy"),
                ],
            ),
            before_step(
                "pk",
                &format!("{T}HeaderFrom$Key"),
                &[("fields", "id"), ("headers", "pk"), ("operation", "copy")],
            ),
        ],
    );
    let outcome = r.route(&seed_insert(Some(r#"{"a":1}"#)));
    let rec = crate::Router::converted(Some(outcome));
    let names: Vec<&str> = rec.headers.iter().map(|(n, _)| &**n).collect();
    assert_eq!(names, ["row", "old", "op", "pk", "id", "eventType"]);
    assert_eq!(
        text(&rec.headers[0].1),
        concat!(
            r#"{"id":"6b1c0e4e-0000-4000-8000-000000000001","aggregate_type":"Order","#,
            r#""aggregate_id":"order-1","event_type":"OrderCreated","payload":"{\"a\":1}","#,
            r#""created_at":"2026-01-01T10:00:00.000000Z"}"#
        )
    );
    assert_eq!(text(&rec.headers[1].1), "null");
    assert_eq!(text(&rec.headers[2].1), r#""c""#);
    assert_eq!(
        text(&rec.headers[3].1),
        r#""6b1c0e4e-0000-4000-8000-000000000001""#
    );
    // The routing is the EventRouter's, from the row.
    assert_eq!(&*rec.topic, "Order.events");
    assert_eq!(
        text(&rec.key),
        r#"{"schema":{"type":"string","optional":false},"payload":"order-1"}"#
    );

    // With schemas: the row's schema is the table's Value struct.
    let mut with_schemas = r.config.clone();
    if let Output::Connect(f) = &mut with_schemas.output {
        f.header = HeaderConverter::Other(JSON_ON);
    }
    let steps = r.config.before.clone().unwrap().chain.steps;
    let mut r = router_before(with_schemas, steps);
    r.set_position(crate::SourcePosition {
        snapshot: Some("true"),
        ..r.position.clone()
    });
    let outcome = r.route(&seed_insert(None));
    let rec = crate::Router::converted(Some(outcome));
    let row = text(&rec.headers[0].1);
    assert!(
        row.starts_with(r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1,"field":"id"}"#)
            && row.contains(r#""optional":true,"name":"orders-server.public.outbox.Value"},"payload":{"id":"#)
            && row.contains(r#""payload":null,"#),
        "{row}"
    );
    assert_eq!(
        text(&rec.headers[2].1),
        r#"{"schema":{"type":"string","optional":false},"payload":"r"}"#
    );
}

/// What the transforms before the EventRouter make of a change event decides what the
/// EventRouter does: a record that is no longer a change event passes it unchanged, one
/// whose row is gone is dead-lettered with Debezium's reason, a filtered one is dropped.
#[test]
fn the_event_router_follows_what_the_transforms_before_it_made() {
    let config = RouterConfig {
        output: Output::Connect(format(JSON_OFF, JSON_OFF, false)),
        ..RouterConfig::default()
    };
    let mut renamed = router_before(
        config.clone(),
        vec![before_step(
            "meta",
            &format!("{T}SetSchemaMetadata$Value"),
            &[("schema.name", "shop.Change")],
        )],
    );
    let outcome = renamed.route(&seed_insert(Some("{}")));
    let rec = crate::Router::converted(Some(outcome));
    assert_eq!(&*rec.topic, "orders-server.public.outbox");
    let value = text(&rec.value);
    assert!(
        value.starts_with(r#"{"before":null,"after":{"id":"6b1c0e4e-0000-4000-8000-000000000001","#)
            && value.contains(r#""source":{"version":"3.6.1.Final","connector":"postgresql","name":"orders-server","ts_ms":1764152870824,"#)
            && value.contains(r#""transaction":null,"op":"c","ts_ms":0,"ts_us":0,"ts_ns":0}"#),
        "{value}"
    );
    assert_eq!(
        text(&rec.key),
        r#"{"id":"6b1c0e4e-0000-4000-8000-000000000001"}"#
    );

    // A change event without its row or its `op` fails the EventRouter as it fails
    // Debezium's, and is dead-lettered with the row; a tombstone the transforms made is
    // dropped, as the EventRouter drops tombstones.
    for (step, expected) in [
        (
            before_step(
                "drop",
                &format!("{T}ReplaceField$Value"),
                &[("exclude", "after")],
            ),
            Some("Unknown field: after"),
        ),
        (
            before_step(
                "drop",
                &format!("{T}ReplaceField$Value"),
                &[("exclude", "op")],
            ),
            Some("op is not a valid field name"),
        ),
        (
            before_step(
                "extract",
                &format!("{T}ExtractField$Value"),
                &[("field", "before")],
            ),
            None,
        ),
    ] {
        let mut r = router_before(config.clone(), vec![step]);
        match (r.route(&seed_insert(Some("{}"))), expected) {
            (RouteOutcome::Invalid(dead), Some(reason)) => {
                assert_eq!(dead.reason, reason);
                assert_eq!(text(&dead.event_id), "6b1c0e4e-0000-4000-8000-000000000001");
                assert!(dead.row.is_some());
            }
            (RouteOutcome::Ignored, None) => {}
            (other, _) => panic!("{expected:?}: {other:?}"),
        }
    }

    let mut filtered = router_before(
        config,
        vec![before_step("drop", &format!("{T}Filter"), &[])],
    );
    assert_eq!(
        filtered.route(&seed_insert(Some("{}"))),
        RouteOutcome::Ignored
    );
}

/// Debezium's EventRouter names an envelope once per payload schema (without schema
/// versions): a payload of another schema (another table's column type) gets a name of its
/// own, from its first event's routed topic.
#[test]
fn envelope_names_are_kept_per_payload_schema() {
    use crate::connect::{Schema, SchemaType};
    let mut names = connect_record::EnvelopeNames::default();
    let text = Schema::new(SchemaType::String, false);
    let json = Schema::new(SchemaType::String, true).named("io.debezium.data.Json", Some(1));
    assert_eq!(
        &*names.name(None, &text, || "a.Order.Value".into()),
        "a.Order.Value"
    );
    assert_eq!(
        &*names.name(None, &text, || "a.Customer.Value".into()),
        "a.Order.Value"
    );
    assert_eq!(
        &*names.name(None, &json, || "a.Customer.Value".into()),
        "a.Customer.Value"
    );
    // Per schema version where versions are configured, whatever the payload.
    assert_eq!(&*names.name(Some(Some(2)), &json, || "v2".into()), "v2");
    assert_eq!(&*names.name(Some(Some(2)), &text, || "other".into()), "v2");
}

/// A column Debezium writes as a struct of its own (a geometric type) cannot be left out of
/// the change event the transforms before the EventRouter read: the plan refuses the table
/// rather than make a row image Debezium would not.
#[test]
fn a_change_event_with_a_column_debezium_writes_otherwise_is_refused() {
    let mut r = router_before(
        RouterConfig {
            output: Output::Connect(format(JSON_OFF, JSON_OFF, false)),
            ..RouterConfig::default()
        },
        vec![before_step(
            "drop",
            &format!("{T}ReplaceField$Value"),
            &[("exclude", "source")],
        )],
    );
    let LogicalMessage::Relation(mut relation) = seed_relation() else {
        unreachable!()
    };
    relation.columns.push(Column {
        flags: 0,
        name: "spot".into(),
        type_oid: 600,
        type_modifier: -1,
    });
    r.route(&LogicalMessage::Relation(relation));
    let mut insert = seed_insert(Some("{}"));
    if let LogicalMessage::Insert(i) = &mut insert {
        i.new_tuple
            .columns
            .push(ColumnValue::Text(Bytes::from_static(b"(1,2)")));
    }
    match r.route(&insert) {
        RouteOutcome::Fatal(reason) => assert!(
            reason.contains("\"spot\"") && reason.contains("OID 600"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

/// A row routed with a transform that changes nothing after the EventRouter (a Filter under a
/// predicate no record matches) goes the general way; without it, where it can, the direct
/// way. Both write the same records, for every converter, payload and header the direct way
/// may take, and for the rows it leaves to the general one.
#[test]
fn the_direct_way_writes_what_the_general_way_writes() {
    let json = |schemas_enable| {
        Converter::Json(crate::connect::JsonConverter {
            schemas_enable,
            replace_null_with_default: true,
        })
    };
    let expand = ExpandBehaviour::default();
    let formats = [
        (Converter::String, Converter::String, None, false),
        (json(true), json(true), None, false),
        (json(false), json(false), None, true),
        (Converter::String, json(true), None, true),
        (json(true), json(false), Some(expand), false),
        (Converter::String, json(false), Some(expand), true),
        (json(false), Converter::String, None, false),
    ];
    let payloads = [
        Some(r#"{"orderId": "o-1", "total": 42.5, "lines": [], "note": null}"#),
        Some(r#"{"items": [{"sku": "a"}, {"sku": "b", "n": 2}]}"#),
        Some("{\"é\": \"\\u00e9 🚀 \\\"quoted\\\" \\\\ \\n\"}"),
        Some("not json \"at\" all\u{1}"),
        Some("   "),
        Some(""),
        None,
    ];
    let mut direct_taken = 0;
    for (key, value, expand, tombstone) in formats {
        let config = |chain: crate::transforms::Chain| RouterConfig {
            additional: AdditionalField::parse_list(
                "event_type:header:eventType,aggregate_type:header",
            )
            .unwrap(),
            output: Output::Connect(ConnectFormat {
                expand,
                context_headers: Some(crate::ContextHeaders::postgres("orders-server", None)),
                ..format(key.clone(), value.clone(), tombstone)
            }),
            chain,
            ..RouterConfig::default()
        };
        let mut filter = before_step("noop", &format!("{T}Filter"), &[]);
        filter.predicate = Some((
            crate::transforms::Predicate::topic_name_matches("no-such-topic").unwrap(),
            false,
        ));
        let mut general = router_with(config(crate::transforms::Chain {
            steps: vec![filter],
        }));
        let mut direct = router_with(config(crate::transforms::Chain::default()));
        for payload in payloads {
            let outcome =
                |router: &mut Router| format!("{:?}", router.route(&seed_insert(payload)));
            let (general_outcome, direct_outcome) = (outcome(&mut general), outcome(&mut direct));
            assert_eq!(
                direct_outcome, general_outcome,
                "{key:?} / {value:?} / {expand:?}, payload {payload:?}"
            );
            // The same row as the stream brings it: the message's bytes, read in place.
            let from_message = format!(
                "{:?}",
                direct.route_message(&insert_message(payload)).unwrap()
            );
            assert_eq!(
                from_message, general_outcome,
                "from the message, payload {payload:?}"
            );
            direct_taken += usize::from(direct_outcome.starts_with("Record"));
        }
    }
    assert!(direct_taken >= 30, "{direct_taken}");
}

/// `seed_insert`'s row as pgoutput's Insert message (text format).
fn insert_message(payload: Option<&str>) -> Bytes {
    let LogicalMessage::Insert(insert) = seed_insert(payload) else {
        unreachable!()
    };
    let mut m = vec![b'I'];
    m.extend_from_slice(&insert.relation_id.to_be_bytes());
    m.push(b'N');
    m.extend_from_slice(&(insert.new_tuple.columns.len() as i16).to_be_bytes());
    for column in &insert.new_tuple.columns {
        match column {
            ColumnValue::Text(text) => {
                m.push(b't');
                m.extend_from_slice(&(text.len() as i32).to_be_bytes());
                m.extend_from_slice(text);
            }
            _ => m.push(b'n'),
        }
    }
    Bytes::from(m)
}
