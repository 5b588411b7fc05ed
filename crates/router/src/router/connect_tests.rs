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
    let mut router = Router::new(config);
    let facts = SEED_COLUMNS
        .iter()
        .map(|c| ColumnFacts {
            name: (*c).into(),
            not_null: *c != "payload",
            default_expression: None,
            pg_type: None,
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
    r.set_position(crate::SourcePosition {
        lsn: 28_844_416,
        xid: Some(983),
        commit_time_us: Some(1_764_152_870_824_123),
        last_commit_lsn: Some(28_844_176),
        snapshot: None,
        transaction: None,
    });
    let outcome = r.route(&seed_insert(Some(r#"{"total": 42, "note": "ü"}"#)));
    let rec = r.converted(Some(outcome));
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
    let value = text(&r2.converted(Some(outcome)).value).to_owned();
    assert!(
        value.contains(r#""type":"io.debezium.connector.postgresql.DataChangeEvent","time""#)
            && value.contains(r#""datacontenttype":"application/json","data":{"total":42}}"#),
        "{value}"
    );

    // A payload that is not a struct fails the converter as Debezium's does.
    let outcome = r.route(&seed_insert(Some(r#"[1, 2]"#)));
    match r.transformed(outcome, 0) {
        RouteOutcome::Invalid(dead) => assert_eq!(
            dead.reason,
            "value converter io.debezium.converters.CloudEventsConverter failed: Mismatching schema"
        ),
        other => panic!("{other:?}"),
    }
}
