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
    let c = crate::connect::Converter::Json(crate::connect::JsonConverter {
        schemas_enable: true,
        replace_null_with_default: true,
    });
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

fn named(kind: SchemaType, optional: bool, name: &str) -> Schema {
    Schema::new(kind, optional).named(name, Some(1))
}

fn decimal_schema(scale: &str) -> Schema {
    let mut schema = named(
        SchemaType::Bytes,
        false,
        "org.apache.kafka.connect.data.Decimal",
    );
    schema.parameters = vec![("scale".into(), scale.into())];
    schema
}

fn decimal(text: &str) -> Value {
    Value::Decimal(crate::connect::Numeric::parse(text).unwrap())
}

/// A record whose value is `schema` and `value` (`None`: schemaless).
fn valued(schema: Option<Schema>, value: Value) -> ConnectRecord {
    let mut r = record("t", &[], None);
    r.value = Data { schema, value };
    r
}

/// What a one-step chain of `class` with `options` makes of the value, or its error.
fn value_of(class: &str, options: &[(&str, &str)], r: ConnectRecord) -> Result<Data, String> {
    value_at(class, options, r, 0)
}

fn value_at(
    class: &str,
    options: &[(&str, &str)],
    r: ConnectRecord,
    now_ms: i64,
) -> Result<Data, String> {
    one(&format!("{T}{class}"), options)
        .apply(r, now_ms)
        .map(|out| out.unwrap().value)
        .map_err(|e| e.reason)
}

/// A struct of a field of each type Cast casts from, as Kafka's `Cast` tests were run
/// against Kafka 4.3.0.
fn castable() -> ConnectRecord {
    let schema = Schema::new(
        SchemaType::Struct(vec![
            ("big".into(), Schema::new(SchemaType::Float64, false)),
            ("half".into(), Schema::new(SchemaType::Float64, false)),
            (
                "count".into(),
                Schema {
                    default: Some(Value::Int(5)),
                    ..Schema::new(SchemaType::Int32, true)
                },
            ),
            ("amount".into(), decimal_schema("2")),
            ("at".into(), super::fields::timestamp_schema(false)),
            (
                "day".into(),
                named(
                    SchemaType::Int32,
                    false,
                    "org.apache.kafka.connect.data.Date",
                ),
            ),
            ("raw".into(), Schema::new(SchemaType::Bytes, false)),
            ("f".into(), Schema::new(SchemaType::Float32, false)),
            ("keep".into(), Schema::new(SchemaType::String, false)),
        ]),
        false,
    )
    .named("shop.Cast", Some(1));
    valued(
        Some(schema),
        Value::Struct(vec![
            Value::Float(300.7),
            Value::Float(0.5),
            Value::Null,
            decimal("12.34"),
            Value::Int(1_700_000_000_123),
            Value::Int(19_000),
            Value::Bytes(bytes::Bytes::from_static(&[1, 2, 3])),
            Value::Float(0.1),
            Value::text("x"),
        ]),
    )
}

#[test]
fn cast_casts_struct_fields_as_java_narrows_and_prints() {
    let out = value_of(
        "Cast$Value",
        &[(
            "spec",
            "big:int8, half:boolean,count:string,amount:float64,at:string,day:string,raw:string,f:float64",
        )],
        castable(),
    )
    .unwrap();
    // 300.7 → (byte)(int) 300.7 = 44; 0.5 → longValue() 0 → false; the null count is its
    // default 5, cast; a float widened exactly; dates in UTC; bytes base64.
    assert_eq!(
        json(&out),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int8","optional":false,"field":"big"},"#,
            r#"{"type":"boolean","optional":false,"field":"half"},"#,
            r#"{"type":"string","optional":true,"default":"5","field":"count"},"#,
            r#"{"type":"double","optional":false,"field":"amount"},{"type":"string","optional":false,"field":"at"},"#,
            r#"{"type":"string","optional":false,"field":"day"},{"type":"string","optional":false,"field":"raw"},"#,
            r#"{"type":"double","optional":false,"field":"f"},{"type":"string","optional":false,"field":"keep"}],"#,
            r#""optional":false,"name":"shop.Cast","version":1},"#,
            r#""payload":{"big":44,"half":false,"count":"5","amount":12.34,"at":"2023-11-14T22:13:20.123Z","#,
            r#""day":"2022-01-08","raw":"AQID","f":0.10000000149011612,"keep":"x"}}"#
        )
    );
    let out = value_of(
        "Cast$Value",
        &[(
            "spec",
            "big:int16,half:int64,amount:int8,f:string,day:int32,at:int64",
        )],
        castable(),
    )
    .unwrap();
    assert_eq!(
        json(&out),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int16","optional":false,"field":"big"},"#,
            r#"{"type":"int64","optional":false,"field":"half"},{"type":"int32","optional":true,"default":5,"field":"count"},"#,
            r#"{"type":"int8","optional":false,"field":"amount"},{"type":"int64","optional":false,"field":"at"},"#,
            r#"{"type":"int32","optional":false,"field":"day"},{"type":"bytes","optional":false,"field":"raw"},"#,
            r#"{"type":"string","optional":false,"field":"f"},{"type":"string","optional":false,"field":"keep"}],"#,
            r#""optional":false,"name":"shop.Cast","version":1},"#,
            r#""payload":{"big":300,"half":0,"count":5,"amount":12,"at":1700000000123,"day":19000,"raw":"AQID","f":"0.1","keep":"x"}}"#
        )
    );
    // replace.null.with.default=false casts the null itself (the converter writes the
    // default then).
    let out = value_of(
        "Cast$Value",
        &[
            ("spec", "count:string"),
            ("replace.null.with.default", "false"),
        ],
        castable(),
    )
    .unwrap();
    let Value::Struct(values) = &out.value else {
        panic!()
    };
    assert_eq!(values[2], Value::Null);
}

#[test]
fn cast_of_the_whole_value_keeps_its_schemas_name() {
    let micros = named(SchemaType::Int64, false, "io.debezium.time.MicroTimestamp");
    let out = value_of(
        "Cast$Value",
        &[("spec", "string")],
        valued(Some(micros), Value::Int(1_700_000_000_123_456)),
    )
    .unwrap();
    assert_eq!(
        json(&out),
        r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.time.MicroTimestamp","version":1},"payload":"1700000000123456"}"#
    );
    // A Timestamp cast to int64 is still named Timestamp (Kafka's JsonConverter then refuses
    // the record: "Invalid type for Timestamp, expected Date but was class java.lang.Long").
    let timestamp = super::fields::timestamp_schema(true);
    let out = value_of(
        "Cast$Value",
        &[("spec", "int64")],
        valued(Some(timestamp.clone()), Value::Int(1_700_000_000_123)),
    )
    .unwrap();
    let schema = out.schema.unwrap();
    assert_eq!(
        (&schema.kind, schema.name.as_deref(), schema.optional),
        (
            &SchemaType::Int64,
            Some("org.apache.kafka.connect.data.Timestamp"),
            true
        )
    );
    assert_eq!(out.value, Value::Int(1_700_000_000_123));
    // Its default, cast, no longer fits the logical type it is named after.
    let with_default = Schema {
        default: Some(Value::Int(5)),
        ..timestamp
    };
    assert_eq!(
        value_of(
            "Cast$Value",
            &[("spec", "int64")],
            valued(Some(with_default), Value::Int(1))
        )
        .unwrap_err(),
        "Invalid default value"
    );
    // A timestamp before the epoch prints as a time of day, as Values.dateFormatFor does.
    let out = value_of(
        "Cast$Value",
        &[("spec", "string")],
        valued(
            Some(super::fields::timestamp_schema(false)),
            Value::Int(-5000),
        ),
    )
    .unwrap();
    assert_eq!(out.value, Value::text("23:59:55.000Z"));
    let out = value_of(
        "Cast$Value",
        &[("spec", "string")],
        valued(Some(decimal_schema("8")), decimal("0.00000001")),
    )
    .unwrap();
    assert_eq!(out.value, Value::text("1E-8"));
    // An optional schema stays optional, its default cast.
    let seven = Schema {
        default: Some(Value::Int(7)),
        ..Schema::new(SchemaType::Int32, true)
    };
    let out = value_of(
        "Cast$Value",
        &[("spec", "string")],
        valued(Some(seven), Value::Int(12)),
    )
    .unwrap();
    assert_eq!(
        json(&out),
        r#"{"schema":{"type":"string","optional":true,"default":"7"},"payload":"12"}"#
    );
    // The key side.
    let mut r = record("t", &[], Some("v"));
    r.key = Data::text("42");
    let out = one(&format!("{T}Cast$Key"), &[("spec", "INT32")])
        .apply_now(r)
        .unwrap();
    assert_eq!(
        json(&out.key),
        r#"{"schema":{"type":"int32","optional":false},"payload":42}"#
    );
    assert_eq!(out.value, Data::text("v"));
}

#[test]
fn cast_parses_and_narrows_like_java() {
    let cast = |spec: &str, kind: SchemaType, value: Value| {
        value_of(
            "Cast$Value",
            &[("spec", spec)],
            valued(Some(Schema::new(kind, false)), value),
        )
        .map(|d| json(&d))
    };
    let payload = |spec: &str, kind: SchemaType, value: Value| {
        let json = cast(spec, kind, value).unwrap();
        json[json.find(r#""payload":"#).unwrap() + 10..json.len() - 1].to_owned()
    };
    assert_eq!(
        payload("int8", SchemaType::Float64, Value::Float(1e10)),
        "-1"
    );
    assert_eq!(payload("int8", SchemaType::Int64, Value::Int(300)), "44");
    assert_eq!(
        payload("int32", SchemaType::Float64, Value::Float(f64::NAN)),
        "0"
    );
    assert_eq!(
        payload("float32", SchemaType::String, Value::text(" 1.5f ")),
        "1.5"
    );
    assert_eq!(
        payload("float64", SchemaType::String, Value::text("0x1.8p1")),
        "3.0"
    );
    assert_eq!(
        payload("string", SchemaType::Float32, Value::Float(0.1)),
        r#""0.1""#
    );
    assert_eq!(
        payload("float32", SchemaType::Float64, Value::Float(0.1)),
        "0.1"
    );
    assert_eq!(
        payload("string", SchemaType::Float64, Value::Float(1e7)),
        r#""1.0E7""#
    );
    assert_eq!(
        payload("boolean", SchemaType::String, Value::text("TRUE")),
        "true"
    );
    assert_eq!(
        payload("boolean", SchemaType::String, Value::text("yes")),
        "false"
    );
    assert_eq!(
        payload("int64", SchemaType::Boolean, Value::Boolean(true)),
        "1"
    );
    assert_eq!(
        cast("int32", SchemaType::String, Value::text("abc")).unwrap_err(),
        "Value (abc) was out of range for requested data type"
    );
    assert_eq!(
        cast("int8", SchemaType::String, Value::text("128")).unwrap_err(),
        "Value (128) was out of range for requested data type"
    );
    assert_eq!(
        cast("float64", SchemaType::String, Value::text("inf")).unwrap_err(),
        "Value (inf) was out of range for requested data type"
    );
    assert_eq!(
        cast(
            "int32",
            SchemaType::Bytes,
            Value::Bytes(bytes::Bytes::from_static(&[1]))
        )
        .unwrap_err(),
        "Unexpected type in Cast transformation: class java.nio.HeapByteBuffer"
    );
    // Time.fromLogical refuses a time outside the day before it is cast.
    assert_eq!(
        value_of(
            "Cast$Value",
            &[("spec", "int32")],
            valued(
                Some(named(
                    SchemaType::Int32,
                    false,
                    "org.apache.kafka.connect.data.Time"
                )),
                Value::Int(86_400_001)
            )
        )
        .unwrap_err(),
        "Kafka Connect Time type should not have any date fields set to non-zero values."
    );
}

#[test]
fn cast_of_schemaless_maps_and_refusals() {
    let map = Value::Map(vec![
        (Value::text("a"), Value::text("12")),
        (Value::text("b"), Value::Float(1.9)),
    ]);
    let out = value_of(
        "Cast$Value",
        &[("spec", "a:int16,b:int32,c:boolean")],
        valued(None, map),
    )
    .unwrap();
    // An absent field is put as null.
    assert_eq!(
        json(&out),
        r#"{"schema":null,"payload":{"a":12,"b":1,"c":null}}"#
    );
    let cast = |spec: &str, r: ConnectRecord| value_of("Cast$Value", &[("spec", spec)], r);
    assert_eq!(
        cast("int32", valued(None, decimal("1.5"))).unwrap_err(),
        "Cast transformation was passed a value of type class java.math.BigDecimal which is not supported by Connect's data API"
    );
    assert_eq!(
        cast("string", valued(None, Value::Array(vec![Value::Int(1)]))).unwrap_err(),
        "Cast transformation does not support casting from ARRAY; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]"
    );
    // A struct schema with a default: Cast tries to cast the default struct.
    let fields = vec![("a".into(), Schema::new(SchemaType::Int32, false))];
    let with_default = Schema {
        default: Some(Value::Struct(vec![Value::Int(1)])),
        ..Schema::new(SchemaType::Struct(fields), false)
    };
    assert_eq!(
        cast(
            "a:string",
            valued(Some(with_default), Value::Struct(vec![Value::Int(2)]))
        )
        .unwrap_err(),
        "Cast transformation does not support casting from STRUCT; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]"
    );
    assert_eq!(
        cast(
            "a:string",
            valued(Some(Schema::new(SchemaType::Int32, false)), Value::Int(5))
        )
        .unwrap_err(),
        "Cannot list fields on non-struct type"
    );
    // A tombstone is left alone.
    let tombstone = record("t", &[], None);
    assert_eq!(
        one(&format!("{T}Cast$Value"), &[("spec", "string")])
            .apply_now(tombstone.clone())
            .unwrap(),
        tombstone
    );
    let spec = |spec: &str| refused(&format!("{T}Cast$Value"), &[("spec", spec)]);
    assert_eq!(
        spec("a:int8:x"),
        "transforms.t.spec: Invalid value [a:int8:x] for configuration renames: Invalid rename mapping: a:int8:x"
    );
    assert_eq!(
        spec("a:foo"),
        "transforms.t.spec: Invalid value java.lang.IllegalArgumentException: No enum constant \
         org.apache.kafka.connect.data.Schema.Type.FOO for configuration Invalid type found in casting spec: foo"
    );
    assert_eq!(
        spec("foo"),
        "transforms.t.spec: Invalid value java.lang.IllegalArgumentException: No enum constant \
         org.apache.kafka.connect.data.Schema.Type.FOO for configuration Invalid type found in casting spec: foo"
    );
    assert_eq!(
        spec("bytes"),
        "transforms.t.spec: Cast transformation does not support casting to BYTES; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]"
    );
    assert_eq!(
        spec("int8,a:int16"),
        "transforms.t.spec: Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec"
    );
    assert_eq!(
        spec(" "),
        "transforms.t.spec: Must specify at least one field to cast."
    );
    assert_eq!(
        spec(":"),
        "transforms.t.spec: Index 1 out of bounds for length 0"
    );
    assert!(spec("a:int8,")
        .ends_with("Schema.Type. for configuration Invalid type found in casting spec: "));
    assert_eq!(
        refused(&format!("{T}Cast$Value"), &[]),
        "transforms.t.spec is missing"
    );
}

/// `{id: int32, at: optional Timestamp (doc "when"), day: optional string default
/// "2024-01-31"}`, named `shop.Event` v3, optional.
fn event(value: Option<Value>) -> ConnectRecord {
    let schema = Schema::new(
        SchemaType::Struct(vec![
            ("id".into(), Schema::new(SchemaType::Int32, false)),
            (
                "at".into(),
                Schema {
                    doc: Some("when".into()),
                    ..super::fields::timestamp_schema(true)
                },
            ),
            (
                "day".into(),
                Schema {
                    default: Some(Value::text("2024-01-31")),
                    ..Schema::new(SchemaType::String, true)
                },
            ),
        ]),
        true,
    )
    .named("shop.Event", Some(3));
    valued(
        Some(schema),
        value.unwrap_or(Value::Struct(vec![
            Value::Int(1),
            Value::Int(1_700_000_000_123),
            Value::Null,
        ])),
    )
}

const TS: &str = "TimestampConverter$Value";

#[test]
fn timestamp_converter_converts_a_field_and_keeps_the_struct() {
    let out = value_of(
        TS,
        &[
            ("field", "at"),
            ("target.type", "string"),
            ("format", "yyyy-MM-dd'T'HH:mm:ss.SSS"),
        ],
        event(None),
    )
    .unwrap();
    assert_eq!(
        json(&out),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},"#,
            r#"{"type":"string","optional":true,"field":"at"},"#,
            r#"{"type":"string","optional":true,"default":"2024-01-31","field":"day"}],"optional":true,"name":"shop.Event","version":3},"#,
            r#""payload":{"id":1,"at":"2023-11-14T22:13:20.123","day":"2024-01-31"}}"#
        )
    );
    // A null field is its default, parsed (unless replace.null.with.default=false).
    let day = [
        ("field", " day "),
        ("target.type", "Date"),
        ("format", "yyyy-MM-dd"),
    ];
    let out = value_of(TS, &day, event(None)).unwrap();
    assert_eq!(
        json(&out),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},"#,
            r#"{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"doc":"when","field":"at"},"#,
            r#"{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"day"}],"optional":true,"name":"shop.Event","version":3},"#,
            r#""payload":{"id":1,"at":1700000000123,"day":19753}}"#
        )
    );
    let without_default = [&day[..], &[("replace.null.with.default", "false")]].concat();
    assert!(
        json(&value_of(TS, &without_default, event(None)).unwrap()).ends_with(r#""day":null}}"#)
    );
    // A null struct: the new schema, no value.
    let out = value_of(
        TS,
        &[("field", "at"), ("target.type", "unix")],
        event(Some(Value::Null)),
    )
    .unwrap();
    assert_eq!(
        json(&out),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},"#,
            r#"{"type":"int64","optional":true,"field":"at"},"#,
            r#"{"type":"string","optional":true,"default":"2024-01-31","field":"day"}],"optional":true,"name":"shop.Event","version":3},"#,
            r#""payload":null}"#
        )
    );
    // Schemaless: an absent field is put as null (after the others: Java's HashMap copy).
    let map = Value::Map(vec![(Value::text("id"), Value::Int(1))]);
    let out = value_of(
        TS,
        &[("field", "at"), ("target.type", "unix")],
        valued(None, map),
    )
    .unwrap();
    assert_eq!(
        json(&out),
        r#"{"schema":null,"payload":{"id":1,"at":null}}"#
    );
}

#[test]
fn timestamp_converter_truncates_unix_time_toward_zero() {
    let whole = |options: &[(&str, &str)], schema: Schema, value: i64| {
        json(&value_of(TS, options, valued(Some(schema), Value::Int(value))).unwrap())
    };
    let int64 = Schema::new(SchemaType::Int64, false);
    let timestamp = super::fields::timestamp_schema(false);
    // −1500 µs is −1 ms (a floor would say −2).
    assert_eq!(
        whole(
            &[
                ("target.type", "Timestamp"),
                ("unix.precision", "microseconds")
            ],
            int64.clone(),
            -1500
        ),
        r#"{"schema":{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1},"payload":-1}"#
    );
    assert_eq!(
        whole(
            &[("target.type", "unix"), ("unix.precision", "seconds")],
            timestamp.clone(),
            -1500
        ),
        r#"{"schema":{"type":"int64","optional":false},"payload":-1}"#
    );
    assert_eq!(
        whole(
            &[("target.type", "unix"), ("unix.precision", "nanoseconds")],
            super::fields::timestamp_schema(true),
            1_700_000_000_123
        ),
        r#"{"schema":{"type":"int64","optional":true},"payload":1700000000123000000}"#
    );
    assert_eq!(
        whole(
            &[("target.type", "unix"), ("unix.precision", "nanoseconds")],
            timestamp.clone(),
            i64::MAX / 1000
        ),
        format!(
            r#"{{"schema":{{"type":"int64","optional":false}},"payload":{}}}"#,
            i64::MAX
        )
    );
    // Date floors to the day, Time keeps the time of day.
    assert_eq!(
        whole(&[("target.type", "Date")], timestamp.clone(), -1),
        r#"{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1},"payload":-1}"#
    );
    assert_eq!(
        whole(&[("target.type", "Time")], timestamp.clone(), -1),
        r#"{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Time","version":1},"payload":86399999}"#
    );
    // S is milliseconds, padded to the pattern's width.
    assert_eq!(
        whole(
            &[("target.type", "string"), ("format", "HH:mm:ss.SSSSSS")],
            int64,
            1_700_000_000_123
        ),
        r#"{"schema":{"type":"string","optional":false},"payload":"22:13:20.000123"}"#
    );
}

#[test]
fn timestamp_converter_parses_strings_leniently() {
    let parse = |format: &str, text: &str| {
        value_at(
            TS,
            &[("target.type", "unix"), ("format", format)],
            valued(
                Some(Schema::new(SchemaType::String, false)),
                Value::text(text),
            ),
            // 2026-06-01: two-digit years fall in 1946-06-01 .. 2046-05-31.
            1_780_272_000_000,
        )
        .map(|d| d.value)
    };
    let ms = |v: i64| Ok(Value::Int(v));
    // 30 February is 1 March; what follows the pattern is ignored.
    assert_eq!(
        parse("yyyy-MM-dd", "2024-02-30garbage"),
        ms(1_709_251_200_000)
    );
    assert_eq!(
        parse("yyyy-MM-dd", "x2024").unwrap_err(),
        "Could not parse timestamp: value (x2024) does not match pattern (yyyy-MM-dd)"
    );
    // Abutting fields read their width (spaces before a number count in it).
    assert_eq!(
        parse("yyyyMMddHHmmss", "20240305 71503"),
        ms(1_709_622_903_000)
    );
    assert_eq!(parse("yyyyMMdd", "2024035"), ms(1_709_596_800_000));
    assert_eq!(parse("yyyyMMdd", "202403051"), ms(1_713_571_200_000));
    // Every field rolls over; a month of −1 is November of the year before.
    assert_eq!(
        parse("yyyy-MM-dd HH:mm:ss.SSS", "2023-13-01  25:61:61.1234"),
        ms(1_704_160_922_234)
    );
    assert_eq!(parse("yyyy-MM-dd", "2024--1-01"), ms(1_698_796_800_000));
    assert_eq!(parse("'at' yyyy", "at 1999"), ms(915_148_800_000));
    assert!(parse("'at' yyyy", "At 1999").is_err());
    // Two-digit years: within 80 years before and 20 after now; 46 is 2046 before June.
    assert_eq!(parse("yy-MM-dd", "24-06-15"), ms(1_718_409_600_000));
    assert_eq!(parse("yy-MM-dd", "70-06-15"), ms(14_256_000_000));
    assert_eq!(parse("yy-MM-dd", "2024-06-15"), ms(1_718_409_600_000));
    assert_eq!(parse("yy-MM-dd", "46-01-01"), ms(2_398_377_600_000));
    assert_eq!(parse("yy-MM-dd", "46-12-01"), ms(-728_524_800_000));
}

#[test]
fn timestamp_converter_refusals_are_kafkas() {
    let refused = |options: &[(&str, &str)]| refused(&format!("{T}{TS}"), options);
    assert_eq!(
        refused(&[("target.type", "string")]),
        "transforms.t.format: TimestampConverter requires format option to be specified when using string timestamps"
    );
    assert_eq!(
        refused(&[("target.type", "string"), ("format", "  ")]),
        "transforms.t.format: TimestampConverter requires format option to be specified when using string timestamps"
    );
    assert_eq!(
        refused(&[("target.type", "string"), ("format", "yyyy-qq")]),
        "transforms.t.format: Invalid value java.lang.IllegalArgumentException: Illegal pattern character 'q' for configuration \
         TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: yyyy-qq"
    );
    assert_eq!(
        refused(&[("target.type", "string"), ("format", "yyyy 'x")]),
        "transforms.t.format: Invalid value java.lang.IllegalArgumentException: Unterminated quote for configuration \
         TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: yyyy 'x"
    );
    // Java formats day names; outbox-relay does not.
    assert!(refused(&[("target.type", "unix"), ("format", "EEE yyyy")])
        .starts_with("transforms.t.format: \"EEE yyyy\": the pattern letter 'E' is not supported"));
    assert_eq!(
        refused(&[("target.type", "date")]),
        "Invalid value date for configuration transforms.t.target.type: String must be one of: string, unix, Date, Time, Timestamp"
    );
    assert_eq!(
        refused(&[("target.type", "unix"), ("unix.precision", "millis")]),
        "Invalid value millis for configuration transforms.t.unix.precision: String must be one of: nanoseconds, microseconds, milliseconds, seconds"
    );
    assert_eq!(refused(&[]), "transforms.t.target.type is missing");

    let convert = |options: &[(&str, &str)], schema: Option<Schema>, value: Value| {
        value_of(TS, options, valued(schema, value)).unwrap_err()
    };
    // The source's kind is read from the schema even for a null.
    assert_eq!(
        convert(
            &[("target.type", "unix")],
            Some(Schema::new(SchemaType::Int32, true)),
            Value::Null
        ),
        "Schema Schema{INT32} does not correspond to a known timestamp type format"
    );
    assert_eq!(
        convert(
            &[("target.type", "unix")],
            Some(Schema::new(SchemaType::String, false)),
            Value::text("2024")
        ),
        "Cannot invoke \"java.text.SimpleDateFormat.parse(String)\" because \"config.format\" is null"
    );
    assert_eq!(
        convert(&[("target.type", "unix")], None, Value::Float(1.5)),
        "TimestampConverter does not support class java.lang.Double objects as timestamps"
    );
    assert_eq!(
        convert(
            &[("target.type", "unix")],
            Some(Schema::new(SchemaType::Int64, false)),
            Value::text("x")
        ),
        "Expected Unix timestamp to be a Long, but found class java.lang.String"
    );
    // Schemaless: a long is Unix time.
    let out = value_of(
        TS,
        &[("target.type", "string"), ("format", "yyyy")],
        valued(None, Value::Int(5)),
    )
    .unwrap();
    assert_eq!(json(&out), r#"{"schema":null,"payload":"1970"}"#);
}

/// `shop.Order` v2 ("an order"), optional: `{id: int32, customer: optional shop.Customer
/// {name: string, address: shop.Address {city: string default "?", zip: optional
/// string}}, tags: [string], amount: Decimal(2)}`.
fn nested(customer: Value) -> ConnectRecord {
    let address = Schema::new(
        SchemaType::Struct(vec![
            (
                "city".into(),
                Schema {
                    default: Some(Value::text("?")),
                    ..Schema::new(SchemaType::String, false)
                },
            ),
            ("zip".into(), Schema::new(SchemaType::String, true)),
        ]),
        false,
    )
    .named("shop.Address", None);
    let customer_schema = Schema::new(
        SchemaType::Struct(vec![
            ("name".into(), Schema::new(SchemaType::String, false)),
            ("address".into(), address),
        ]),
        true,
    )
    .named("shop.Customer", None);
    let schema = Schema {
        doc: Some("an order".into()),
        ..Schema::new(
            SchemaType::Struct(vec![
                ("id".into(), Schema::new(SchemaType::Int32, false)),
                ("customer".into(), customer_schema),
                (
                    "tags".into(),
                    Schema::new(
                        SchemaType::Array(Box::new(Schema::new(SchemaType::String, false))),
                        false,
                    ),
                ),
                ("amount".into(), decimal_schema("2")),
            ]),
            true,
        )
        .named("shop.Order", Some(2))
    };
    valued(
        Some(schema),
        Value::Struct(vec![
            Value::Int(7),
            customer,
            Value::Array(vec![Value::text("a"), Value::text("b")]),
            decimal("1.50"),
        ]),
    )
}

#[test]
fn flatten_names_leaves_by_path_and_keeps_the_structs_name() {
    let customer = Value::Struct(vec![
        Value::text("Ann"),
        Value::Struct(vec![Value::text("Paris"), Value::text("123")]),
    ]);
    let out = value_of("Flatten$Value", &[], nested(customer)).unwrap();
    // The root is optional, so every leaf is; the flat struct is required.
    assert_eq!(
        json(&out),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"id"},"#,
            r#"{"type":"string","optional":true,"field":"customer.name"},"#,
            r#"{"type":"string","optional":true,"default":"?","field":"customer.address.city"},"#,
            r#"{"type":"string","optional":true,"field":"customer.address.zip"},"#,
            r#"{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"},"#,
            r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},"field":"amount"}],"#,
            r#""optional":false,"name":"shop.Order","version":2,"doc":"an order"},"#,
            r#""payload":{"id":7,"customer.name":"Ann","customer.address.city":"Paris","customer.address.zip":"123","tags":["a","b"],"amount":"AJY="}}"#
        )
    );
    // A null nested struct leaves its leaves null (the converter writes their defaults); a
    // blank delimiter is an empty one.
    let out = value_of("Flatten$Value", &[("delimiter", " ")], nested(Value::Null)).unwrap();
    assert!(json(&out).ends_with(
        r#""payload":{"id":7,"customername":null,"customeraddresscity":"?","customeraddresszip":null,"tags":["a","b"],"amount":"AJY="}}"#
    ));
    let out = value_of("Flatten$Value", &[("delimiter", "_")], nested(Value::Null)).unwrap();
    assert!(json(&out).contains(r#""field":"customer_address_city""#));
    // A leaf's default can come from its parent struct's default.
    let parent = Schema {
        default: Some(Value::Struct(vec![Value::Int(3), Value::Null])),
        ..Schema::new(
            SchemaType::Struct(vec![
                ("x".into(), Schema::new(SchemaType::Int32, false)),
                (
                    "y".into(),
                    Schema {
                        default: Some(Value::Int(9)),
                        ..Schema::new(SchemaType::Int32, false)
                    },
                ),
            ]),
            true,
        )
    };
    let root = Schema::new(SchemaType::Struct(vec![("p".into(), parent)]), false);
    let out = value_of(
        "Flatten$Value",
        &[],
        valued(Some(root), Value::Struct(vec![Value::Null])),
    )
    .unwrap();
    assert_eq!(
        json(&out),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"default":3,"field":"p.x"},"#,
            r#"{"type":"int32","optional":true,"default":9,"field":"p.y"}],"optional":false},"payload":{"p.x":3,"p.y":9}}"#
        )
    );
}

#[test]
fn flatten_of_schemaless_maps_and_refusals() {
    let map = |entries: Vec<(&str, Value)>| {
        Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (Value::text(k), v))
                .collect(),
        )
    };
    let top = map(vec![
        ("z", Value::text("first")),
        (
            "a",
            map(vec![
                ("b", Value::Int(1)),
                ("c", map(vec![("d", Value::Null)])),
                ("e", map(vec![])),
            ]),
        ),
        ("l", Value::Array(vec![Value::Int(1), Value::Int(2)])),
    ]);
    let out = value_of("Flatten$Value", &[], valued(None, top)).unwrap();
    // In order (a LinkedHashMap); nulls kept, empty maps gone, lists left whole.
    assert_eq!(
        json(&out),
        r#"{"schema":null,"payload":{"z":"first","a.b":1,"a.c.d":null,"l":[1,2]}}"#
    );
    // A name met twice keeps its first place and its last value.
    let collide = map(vec![
        ("a.b", Value::Int(1)),
        ("a", map(vec![("b", Value::Int(2))])),
    ]);
    assert_eq!(
        json(&value_of("Flatten$Value", &[], valued(None, collide)).unwrap()),
        r#"{"schema":null,"payload":{"a.b":2}}"#
    );
    let flatten = |r: ConnectRecord| value_of("Flatten$Value", &[], r).unwrap_err();
    assert_eq!(
        flatten(valued(None, map(vec![("d", decimal("1"))]))),
        "Flatten transformation was passed a value of type class java.math.BigDecimal which is not supported by Connect's data API"
    );
    assert_eq!(
        flatten(valued(None, map(vec![("s", Value::Struct(vec![]))]))),
        "Flatten transformation does not support class org.apache.kafka.connect.data.Struct for record without schemas (for field s)."
    );
    assert_eq!(
        flatten(valued(None, Value::text("x"))),
        "Only Map objects supported in absence of schema for [flattening], found: java.lang.String"
    );
    assert_eq!(
        flatten(valued(
            Some(Schema::new(SchemaType::String, false)),
            Value::text("x")
        )),
        "Only Struct objects supported for [flattening], found: java.lang.String"
    );
    let string_map = Schema::new(
        SchemaType::Map(
            Box::new(Schema::new(SchemaType::String, false)),
            Box::new(Schema::new(SchemaType::String, false)),
        ),
        false,
    );
    assert_eq!(
        flatten(valued(
            Some(Schema::new(
                SchemaType::Struct(vec![("m".into(), string_map)]),
                false
            )),
            Value::Struct(vec![Value::Map(vec![])])
        )),
        "Flatten transformation does not support MAP for record with schemas (for field m)."
    );
    let inner = Schema::new(
        SchemaType::Struct(vec![("b".into(), Schema::new(SchemaType::Int32, false))]),
        false,
    );
    let colliding = Schema::new(
        SchemaType::Struct(vec![
            ("a.b".into(), Schema::new(SchemaType::Int32, false)),
            ("a".into(), inner),
        ]),
        false,
    );
    assert_eq!(
        flatten(valued(
            Some(colliding),
            Value::Struct(vec![Value::Int(1), Value::Struct(vec![Value::Int(2)])])
        )),
        "Cannot create field because of field name duplication a.b"
    );
    // A tombstone is left alone.
    let tombstone = record("t", &[], None);
    assert_eq!(
        one(&format!("{T}Flatten$Value"), &[])
            .apply_now(tombstone.clone())
            .unwrap(),
        tombstone
    );
}
