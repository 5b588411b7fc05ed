use super::*;
use crate::connect::{Data, Header, Schema, SchemaType, Value};

/// A record as the EventRouter makes one: string key `k`, string `value` (`None`: a
/// tombstone), string headers.
pub(crate) fn record(topic: &str, headers: &[(&str, &str)], value: Option<&str>) -> ConnectRecord {
    ConnectRecord {
        topic: topic.into(),
        partition: None,
        key: Data::text("k"),
        value: value.map_or_else(Data::null, Data::text),
        headers: headers
            .iter()
            .map(|(k, v)| Header::new(*k, Data::text(v)))
            .collect(),
        timestamp_ms: None,
    }
}

/// The chain `steps` configure, each `(alias, class, options, predicate)`, parsed through
/// the registry as a connector's options are.
/// A step as the tests configure it: alias, class, options, predicate.
pub(crate) type StepConfig<'a> = (
    &'a str,
    &'a str,
    &'a [(&'a str, &'a str)],
    Option<(Predicate, bool)>,
);

pub(crate) fn chain(steps: &[StepConfig<'_>]) -> Chain {
    Chain {
        steps: steps
            .iter()
            .map(|(alias, class, options, predicate)| {
                let (entry, side) = lookup(class).unwrap_or_else(|| panic!("{class} unknown"));
                let get = |key: &str| {
                    let name = key.strip_prefix(&format!("transforms.{alias}."))?;
                    options
                        .iter()
                        .find(|(k, _)| *k == name)
                        .map(|(_, v)| (*v).to_owned())
                };
                let o = Options { alias, get: &get };
                Step {
                    alias: (*alias).into(),
                    class: (*class).into(),
                    transform: (entry.parse)(&o, side).unwrap(),
                    predicate: predicate.clone(),
                }
            })
            .collect(),
    }
}

/// The error parsing `class` with `options` gives.
pub(crate) fn refused(class: &str, options: &[(&str, &str)]) -> String {
    let (entry, side) = lookup(class).unwrap();
    let get = |key: &str| {
        let name = key.strip_prefix("transforms.t.")?;
        options
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    };
    (entry.parse)(
        &Options {
            alias: "t",
            get: &get,
        },
        side,
    )
    .unwrap_err()
}

fn names(r: &ConnectRecord) -> Vec<&str> {
    r.headers.iter().map(|h| &*h.name).collect()
}

impl Chain {
    pub(crate) fn apply_now(&self, record: ConnectRecord) -> Option<ConnectRecord> {
        self.apply(record, 0).unwrap()
    }
}

const REGEX_ROUTER: &str = "org.apache.kafka.connect.transforms.RegexRouter";
const FILTER: &str = "org.apache.kafka.connect.transforms.Filter";

#[test]
fn steps_apply_in_order_each_under_its_predicate() {
    let chain = chain(&[
        (
            "route",
            REGEX_ROUTER,
            &[("regex", "(.*)\\.events"), ("replacement", "prod.$1")],
            None,
        ),
        (
            "source",
            "org.apache.kafka.connect.transforms.InsertHeader",
            &[("header", "source"), ("value.literal", "orders")],
            // Only on the renamed Order topic.
            Some((
                Predicate::topic_name_matches("prod\\.Order").unwrap(),
                false,
            )),
        ),
        (
            "drop",
            "org.apache.kafka.connect.transforms.DropHeaders",
            &[("headers", "eventType")],
            None,
        ),
    ]);
    let out = chain
        .apply_now(record(
            "Order.events",
            &[("id", "1"), ("eventType", "Created")],
            Some("{}"),
        ))
        .unwrap();
    assert_eq!(&*out.topic, "prod.Order");
    assert_eq!(names(&out), ["id", "source"]);
    let out = chain
        .apply_now(record("Customer.events", &[("id", "2")], Some("{}")))
        .unwrap();
    assert_eq!(&*out.topic, "prod.Customer");
    assert_eq!(names(&out), ["id"], "the predicate did not match");
    // A topic the regex does not match all of is kept.
    let out = chain.apply_now(record("audit", &[], Some("{}"))).unwrap();
    assert_eq!(&*out.topic, "audit");
}

#[test]
fn filter_drops_what_its_predicate_says_and_negate_inverts_it() {
    let filter = |predicate: Predicate, negate: bool| {
        chain(&[("f", FILTER, &[], Some((predicate, negate)))])
    };
    let tombstone = record("t", &[], None);
    let event = record("t", &[("trace", "x")], Some("{}"));
    let drop_tombstones = filter(Predicate::RecordIsTombstone, false);
    assert!(drop_tombstones.apply_now(tombstone.clone()).is_none());
    assert!(drop_tombstones.apply_now(event.clone()).is_some());
    let keep_traced = filter(Predicate::HasHeaderKey("trace".into()), true);
    assert!(keep_traced.apply_now(event).is_some());
    assert!(keep_traced.apply_now(tombstone).is_none());
    let all = chain(&[("f", FILTER, &[], None)]);
    assert!(all.apply_now(record("t", &[], Some("{}"))).is_none());
}

#[test]
fn topic_name_matches_is_a_whole_match_with_javas_classes() {
    let p = Predicate::topic_name_matches("Order\\.\\w+").unwrap();
    assert!(p.test(&record("Order.events", &[], None)));
    assert!(!p.test(&record("xOrder.events", &[], None)), "whole topic");
    assert!(
        !p.test(&record("Order.événements", &[], None)),
        "\\w is ASCII in Java"
    );
}

#[test]
fn timestamp_router_names_the_topic_after_the_records_time_in_utc() {
    let format = DateFormat::parse("yyyyMMdd").unwrap();
    // 2026-11-26T05:59:33.123Z
    let t = 1_795_672_773_123;
    assert_eq!(format.format(t), "20261126");
    assert_eq!(
        DateFormat::parse("yy-M-d'T'HH:mm:ss.SSS''")
            .unwrap()
            .format(t),
        "26-11-26T05:59:33.123'"
    );
    assert_eq!(DateFormat::parse("yyyy").unwrap().format(0), "1970");
    assert_eq!(
        DateFormat::parse("yyyyMMdd")
            .unwrap()
            .format(951_782_400_000),
        "20000229"
    );
    assert!(DateFormat::parse("EEE").unwrap_err().contains("'E'"));
    assert!(DateFormat::parse("MMM").is_err());
    let chain = chain(&[(
        "ts",
        "org.apache.kafka.connect.transforms.TimestampRouter",
        &[],
        None,
    )]);
    let mut stamped = record("Order.events", &[], Some("{}"));
    stamped.timestamp_ms = Some(t);
    assert_eq!(
        &*chain.apply(stamped, 0).unwrap().unwrap().topic,
        "Order.events-20261126"
    );
    // Without a timestamp of its own: now, kept on the record.
    let out = chain
        .apply(record("Order.events", &[], Some("{}")), 0)
        .unwrap()
        .unwrap();
    assert_eq!(&*out.topic, "Order.events-19700101");
    assert_eq!(out.timestamp_ms, Some(0));
}

#[test]
fn insert_header_literals_are_typed_as_connect_parses_them() {
    assert_eq!(simple_header_literal("orders-service"), "orders-service");
    assert_eq!(simple_header_literal("007"), "7");
    assert_eq!(simple_header_literal("-12"), "-12");
    assert_eq!(simple_header_literal("true"), "true");
    assert_eq!(simple_header_literal("TRUE"), "TRUE", "a string to Connect");
    assert_eq!(simple_header_literal("1.5"), "1.5");
    let typed = |literal| insert_header::parse_literal(literal);
    assert_eq!(
        typed("7"),
        Data::new(Schema::new(SchemaType::Int8, false), Value::Int(7))
    );
    assert_eq!(typed("300").schema.unwrap().kind, SchemaType::Int16);
    assert_eq!(typed("70000").schema.unwrap().kind, SchemaType::Int32);
    assert_eq!(typed("5000000000").schema.unwrap().kind, SchemaType::Int64);
    assert_eq!(typed("true").value, Value::Boolean(true));
}

#[test]
fn classes_are_found_with_their_key_and_value_variants_only_where_they_have_them() {
    assert!(lookup(REGEX_ROUTER).is_some());
    assert!(lookup(&format!("{REGEX_ROUTER}$Value")).is_none());
    assert!(lookup("com.example.Custom").is_none());
    assert!(supported_classes().contains(&FILTER.to_owned()));
    assert!(refused(REGEX_ROUTER, &[("regex", "x")]).contains("transforms.t.replacement"));
}

/// A struct value `{id: int32, name: optional string, note: optional string default "n/a"}`
/// named `shop.Order` v2, as an expanded payload or an envelope is.
fn order(name: Option<&str>) -> ConnectRecord {
    let schema = Schema::new(
        SchemaType::Struct(vec![
            ("id".into(), Schema::new(SchemaType::Int32, false)),
            ("name".into(), Schema::new(SchemaType::String, true)),
            (
                "note".into(),
                Schema {
                    default: Some(Value::text("n/a")),
                    ..Schema::new(SchemaType::String, true)
                },
            ),
        ]),
        true,
    )
    .named("shop.Order", Some(2));
    let mut r = record("Order.events", &[("id", "e-1")], None);
    r.value = Data::new(
        schema,
        Value::Struct(vec![
            Value::Int(7),
            name.map_or(Value::Null, Value::text),
            Value::Null,
        ]),
    );
    r.timestamp_ms = Some(1_000);
    r
}

fn json(data: &Data) -> String {
    let c = crate::connect::Converter::Json {
        schemas_enable: true,
        replace_null_with_default: true,
    };
    String::from_utf8(data.encode(&c).unwrap().unwrap().to_vec()).unwrap()
}

const T: &str = "org.apache.kafka.connect.transforms.";

fn one(class: &str, options: &[(&str, &str)]) -> Chain {
    chain(&[("t", class, options, None)])
}

#[test]
fn insert_field_adds_topic_timestamp_and_a_static_field_after_the_others() {
    let out = one(
        &format!("{T}InsertField$Value"),
        &[
            ("topic.field", "topic!"),
            ("timestamp.field", "at"),
            ("static.field", "origin"),
            ("static.value", "shop"),
        ],
    )
    .apply_now(order(Some("a")))
    .unwrap();
    assert_eq!(
        json(&out.value),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},"#,
            r#"{"type":"string","optional":true,"field":"name"},"#,
            r#"{"type":"string","optional":true,"default":"n/a","field":"note"},"#,
            r#"{"type":"string","optional":false,"field":"topic"},"#,
            r#"{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"at"},"#,
            r#"{"type":"string","optional":true,"field":"origin"}],"optional":false,"name":"shop.Order","version":2},"#,
            r#""payload":{"id":7,"name":"a","note":"n/a","topic":"Order.events","at":1000,"origin":"shop"}}"#
        )
    );
    // A tombstone is left alone; offsets exist only for sink connectors.
    let tombstone = record("t", &[], None);
    assert_eq!(
        one(&format!("{T}InsertField$Value"), &[("topic.field", "t")])
            .apply_now(tombstone.clone())
            .unwrap(),
        tombstone
    );
    assert!(refused(&format!("{T}InsertField$Value"), &[("offset.field", "o")]).contains("sink"));
    assert!(
        refused(&format!("{T}InsertField$Value"), &[]).contains("No field insertion configured")
    );
    let err = one(&format!("{T}InsertField$Value"), &[("topic.field", "t")])
        .apply(record("t", &[], Some("text")), 0)
        .unwrap_err();
    assert_eq!(
        err.reason,
        "Only Struct objects supported for [field insertion], found: java.lang.String"
    );
}

#[test]
fn replace_field_keeps_renames_and_drops_fields_in_schema_order() {
    let out = one(
        &format!("{T}ReplaceField$Value"),
        &[("exclude", "name"), ("renames", "id:orderId,note:remark")],
    )
    .apply_now(order(Some("a")))
    .unwrap();
    assert_eq!(
        json(&out.value),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"orderId"},"#,
            r#"{"type":"string","optional":true,"default":"n/a","field":"remark"}],"optional":false,"name":"shop.Order","version":2},"#,
            r#""payload":{"orderId":7,"remark":"n/a"}}"#
        )
    );
    assert!(
        refused(&format!("{T}ReplaceField$Value"), &[("renames", "a:b:c")])
            .contains("Invalid rename mapping: a:b:c")
    );
}

#[test]
fn value_to_key_makes_an_unnamed_key_struct_and_refuses_tombstones() {
    let out = one(&format!("{T}ValueToKey"), &[("fields", "id,name")])
        .apply_now(order(None))
        .unwrap();
    assert_eq!(
        json(&out.key),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},"#,
            r#"{"type":"string","optional":true,"field":"name"}],"optional":false},"payload":{"id":7,"name":null}}"#
        )
    );
    let missing = one(&format!("{T}ValueToKey"), &[("fields", "nope")])
        .apply(order(None), 0)
        .unwrap_err();
    assert_eq!(missing.reason, "Field does not exist: nope");
    let tombstone = one(&format!("{T}ValueToKey"), &[("fields", "id")])
        .apply(record("t", &[], None), 0)
        .unwrap_err();
    assert!(
        tombstone.reason.ends_with("found: java.lang.String") || tombstone.reason.contains("Map"),
        "{}",
        tombstone.reason
    );
}

#[test]
fn header_from_moves_fields_into_headers_with_their_schemas() {
    let out = one(
        &format!("{T}HeaderFrom$Value"),
        &[
            ("fields", "id,note"),
            ("headers", "orderId,note"),
            ("operation", "move"),
        ],
    )
    .apply_now(order(Some("a")))
    .unwrap();
    assert_eq!(names(&out), ["id", "orderId", "note"]);
    assert_eq!(out.headers[1].data.value, Value::Int(7));
    assert_eq!(
        out.headers[2].data.value,
        Value::text("n/a"),
        "the default, written out"
    );
    assert_eq!(
        json(&out.value),
        r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"field":"name"}],"optional":false,"name":"shop.Order","version":2},"payload":{"name":"a"}}"#
    );
    assert!(refused(
        &format!("{T}HeaderFrom$Value"),
        &[("fields", "a"), ("headers", "a"), ("operation", "MOVE")]
    )
    .contains("String must be one of: move, copy"));
    assert!(refused(
        &format!("{T}HeaderFrom$Value"),
        &[("fields", "a,b"), ("headers", "a"), ("operation", "copy")]
    )
    .contains("same number of elements"));
}

#[test]
fn mask_extract_hoist_and_schema_metadata_follow_connect() {
    let masked = one(&format!("{T}MaskField$Value"), &[("fields", "id,name")])
        .apply_now(order(Some("secret")))
        .unwrap();
    assert!(json(&masked.value).ends_with(r#""payload":{"id":0,"name":"","note":"n/a"}}"#));
    let replaced = one(
        &format!("{T}MaskField$Value"),
        &[("fields", "id"), ("replacement", "1.9")],
    )
    .apply_now(order(None))
    .unwrap();
    assert!(json(&replaced.value).contains(r#""payload":{"id":1,"#));

    let extracted = one(&format!("{T}ExtractField$Value"), &[("field", "name")])
        .apply_now(order(Some("a")))
        .unwrap();
    assert_eq!(
        json(&extracted.value),
        r#"{"schema":{"type":"string","optional":true},"payload":"a"}"#
    );
    let unknown = one(&format!("{T}ExtractField$Value"), &[("field", "nope")])
        .apply(order(None), 0)
        .unwrap_err();
    assert_eq!(unknown.reason, "Unknown field: nope");

    let hoisted = one(&format!("{T}HoistField$Key"), &[("field", "k")])
        .apply_now(order(None))
        .unwrap();
    assert_eq!(
        json(&hoisted.key),
        r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"k"}],"optional":false},"payload":{"k":"k"}}"#
    );

    let renamed = one(
        &format!("{T}SetSchemaMetadata$Value"),
        &[("schema.name", "shop.OrderV3"), ("schema.version", "3")],
    )
    .apply_now(order(None))
    .unwrap();
    let schema = renamed.value.schema.unwrap();
    assert_eq!(
        (schema.name.as_deref(), schema.version, schema.optional),
        (Some("shop.OrderV3"), Some(3), true)
    );
    let err = one(
        &format!("{T}SetSchemaMetadata$Key"),
        &[("schema.name", "k")],
    )
    .apply(order(None), 0)
    .unwrap_err();
    assert_eq!(err.reason, "Cannot list fields on non-struct type");
}

#[test]
fn debeziums_header_to_value_adds_the_headers_in_record_order_and_moves_them() {
    let out = one(
        "io.debezium.transforms.HeaderToValue",
        &[
            ("headers", "id"),
            ("fields", "eventId"),
            ("operation", "move"),
        ],
    )
    .apply_now(order(None))
    .unwrap();
    assert!(out.headers.is_empty());
    assert!(
        json(&out.value)
            .ends_with(r#""payload":{"id":7,"name":null,"note":"n/a","eventId":"e-1"}}"#),
        "{}",
        json(&out.value)
    );
    assert!(refused(
        "io.debezium.transforms.HeaderToValue",
        &[("headers", "a b"), ("fields", "x"), ("operation", "copy")]
    )
    .contains("Element(s) containing space not permitted"));
}
