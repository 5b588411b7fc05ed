use super::*;
use crate::{AdditionalField, TopicTemplate};
use pgoutput::{decode, Column, ReplicaIdentity, TupleData};

fn relation(id: u32, schema: &str, name: &str, columns: &[&str]) -> LogicalMessage {
    LogicalMessage::Relation(Relation {
        relation_id: id,
        namespace: schema.into(),
        name: name.into(),
        replica_identity: ReplicaIdentity::Default,
        columns: columns
            .iter()
            .map(|c| Column {
                flags: 0,
                name: (*c).into(),
                type_oid: 25,
                type_modifier: -1,
            })
            .collect(),
    })
}

const SEED_COLUMNS: &[&str] = &[
    "id",
    "aggregate_type",
    "aggregate_id",
    "event_type",
    "payload",
    "created_at",
];

fn insert(id: u32, values: &[Option<&str>]) -> LogicalMessage {
    LogicalMessage::Insert(Insert {
        relation_id: id,
        new_tuple: TupleData {
            columns: values
                .iter()
                .map(|v| match v {
                    Some(t) => ColumnValue::Text(Bytes::copy_from_slice(t.as_bytes())),
                    None => ColumnValue::Null,
                })
                .collect(),
        },
    })
}

fn seed_row(aggregate_type: Option<&str>, payload: Option<&str>) -> LogicalMessage {
    insert(
        1,
        &[
            Some("e1"),
            aggregate_type,
            Some("order-1"),
            Some("OrderCreated"),
            payload,
            Some("2026-01-01"),
        ],
    )
}

fn record(outcome: RouteOutcome) -> OutboxRecord {
    match outcome {
        RouteOutcome::Record(r) => r,
        other => panic!("expected a record, got {other:?}"),
    }
}

fn invalid(outcome: RouteOutcome) -> InvalidRow {
    match outcome {
        RouteOutcome::Invalid(r) => r,
        other => panic!("expected an invalid row, got {other:?}"),
    }
}

fn seeded_router() -> Router {
    let mut router = Router::new(RouterConfig::default());
    assert_eq!(
        router.route(&relation(1, "public", "outbox", SEED_COLUMNS)),
        RouteOutcome::Ignored
    );
    router
}

#[test]
fn routes_a_seed_row_like_the_event_router() {
    let mut router = seeded_router();
    let r = record(router.route(&seed_row(Some("Order"), Some(r#"{"a": 1}"#))));
    assert_eq!(&*r.topic, "Order.events");
    assert_eq!(r.key.as_deref(), Some(&b"order-1"[..]));
    assert_eq!(r.value.as_deref(), Some(&br#"{"a": 1}"#[..]));
    let headers: Vec<(&str, &[u8])> = r
        .headers
        .iter()
        .map(|(k, v)| (&**k, v.as_deref().unwrap()))
        .collect();
    assert_eq!(
        headers,
        [("id", &b"e1"[..]), ("eventType", &b"OrderCreated"[..])]
    );
}

#[test]
fn null_payload_is_a_tombstone_with_the_same_key() {
    let mut router = seeded_router();
    let r = record(router.route(&seed_row(Some("Order"), None)));
    assert_eq!(r.value, None);
    assert_eq!(r.key.as_deref(), Some(&b"order-1"[..]));
}

#[test]
fn other_tables_and_non_inserts_are_ignored() {
    let mut router = seeded_router();
    router.route(&relation(2, "public", "orders", &["id", "aggregate_type"]));
    router.route(&relation(3, "other_schema", "outbox", SEED_COLUMNS));
    assert_eq!(
        router.route(&insert(2, &[Some("1"), Some("Order")])),
        RouteOutcome::Ignored
    );
    assert_eq!(
        router.route(&insert(3, &[Some("1"), Some("Order")])),
        RouteOutcome::Ignored
    );
    let captured = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pgoutput/tests/fixtures/pg15-session.hex"
    ))
    .unwrap();
    let mut router = Router::new(RouterConfig::default());
    let mut topics = Vec::new();
    for line in captured.lines() {
        let hex = line.split_once(' ').unwrap().1;
        let message = decode(Bytes::from(hex::decode(hex).unwrap())).unwrap();
        match router.route(&message) {
            RouteOutcome::Record(r) => topics.push((r.topic.to_string(), r.value.is_none())),
            RouteOutcome::Ignored => {}
            other => panic!("{other:?}"),
        }
    }
    // Exactly the three INSERTs into public.outbox, including the one after ALTER TABLE.
    assert_eq!(
        topics,
        [
            ("Order.events".into(), false),
            ("Order.events".into(), true),
            ("Customer.events".into(), false)
        ]
    );
}

#[test]
fn unroutable_rows_are_invalid_with_a_reason_not_dropped() {
    let mut router = seeded_router();
    let null = invalid(router.route(&seed_row(None, Some("{}"))));
    assert!(null.reason.contains("NULL"), "{}", null.reason);
    assert_eq!(null.table, "public.outbox");
    assert_eq!(null.value.as_deref(), Some(&b"{}"[..]));
    assert_eq!(null.event_id.as_deref(), Some(&b"e1"[..]));

    let empty = invalid(router.route(&seed_row(Some(" "), Some("{}"))));
    assert!(empty.reason.contains("empty"), "{}", empty.reason);

    let bad = invalid(router.route(&seed_row(Some("Order Lines"), Some("{}"))));
    assert!(bad.reason.contains("[a-zA-Z0-9._-]"), "{}", bad.reason);
    assert_eq!(bad.original_topic.as_deref(), Some("Order Lines.events"));
    // The cached answer is the same.
    assert_eq!(
        invalid(router.route(&seed_row(Some("Order Lines"), Some("{}")))).reason,
        bad.reason
    );
}

#[test]
fn a_missing_column_after_alter_table_is_invalid_per_row() {
    let mut router = seeded_router();
    router.route(&relation(
        1,
        "public",
        "outbox",
        &["id", "aggregate_id", "event_type", "payload"],
    ));
    let row = invalid(router.route(&insert(
        1,
        &[Some("e1"), Some("o-1"), Some("T"), Some("{}")],
    )));
    assert!(
        row.reason.contains("\"aggregate_type\" is missing"),
        "{}",
        row.reason
    );
    // A later Relation with the column restores routing.
    router.route(&relation(1, "public", "outbox", SEED_COLUMNS));
    record(router.route(&seed_row(Some("Order"), Some("{}"))));
}

#[test]
fn a_row_before_its_relation_is_invalid() {
    let mut router = Router::new(RouterConfig::default());
    let row = invalid(router.route(&seed_row(Some("Order"), Some("{}"))));
    assert!(row.reason.contains("before its Relation"));
}

#[test]
fn column_names_and_template_are_configurable() {
    let config = RouterConfig {
        tables: vec![TableName::parse("app.outbox_events").unwrap()],
        id_column: "event_id".into(),
        key_column: "entity".into(),
        payload_column: "body".into(),
        route_by_column: "kind".into(),
        topic_template: TopicTemplate::parse("outbox.event.${routedByValue}").unwrap(),
        additional: AdditionalField::parse_list("type:header, trace : header : traceparent")
            .unwrap(),
        tombstone_on_null_payload: true,
        expand_json_payload: false,
        ..RouterConfig::default()
    };
    let mut router = Router::new(config);
    router.route(&relation(
        7,
        "app",
        "outbox_events",
        &["event_id", "kind", "entity", "type", "body", "trace"],
    ));
    let r = record(router.route(&insert(
        7,
        &[
            Some("9"),
            Some("Invoice"),
            Some("i-1"),
            Some("Paid"),
            Some("[]"),
            None,
        ],
    )));
    assert_eq!(&*r.topic, "outbox.event.Invoice");
    let headers: Vec<&str> = r.headers.iter().map(|(k, _)| &**k).collect();
    assert_eq!(
        headers,
        ["id", "type"],
        "a NULL header column writes no header"
    );
}

#[test]
fn placement_lists_are_validated() {
    assert!(AdditionalField::parse_list("event_type:header:eventType").is_ok());
    assert!(AdditionalField::parse_list("").unwrap().is_empty());
    assert!(AdditionalField::parse_list("event_type").is_err());
    assert!(AdditionalField::parse_list("event_type:body").is_err());
}

#[test]
fn the_message_fast_path_routes_exactly_like_decode_then_route() {
    let captured = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pgoutput/tests/fixtures/pg15-session.hex"
    ))
    .unwrap();
    let mut fast = Router::new(RouterConfig::default());
    let mut slow = Router::new(RouterConfig::default());
    let mut records = 0;
    for line in captured.lines() {
        let message = Bytes::from(hex::decode(line.split_once(' ').unwrap().1).unwrap());
        let expected = slow.route(&decode(message.clone()).unwrap());
        let got = fast.route_message(&message).unwrap();
        assert_eq!(got, expected, "{line}");
        records += matches!(got, RouteOutcome::Record(_)) as usize;
    }
    assert_eq!(records, 3);
    // A row of an unknown relation, and a malformed message, on the fast path.
    let mut fresh = Router::new(RouterConfig::default());
    let row = Bytes::from_static(b"I\x00\x00\x00\x09N\x00\x01n");
    assert!(matches!(
        fresh.route_message(&row).unwrap(),
        RouteOutcome::Invalid(_)
    ));
    assert!(fresh
        .route_message(&Bytes::from_static(b"I\x00\x00"))
        .is_err());
}

/// pgoutput's Insert message for `values` (text columns, `None` = NULL).
fn insert_message(relation_id: u32, values: &[Option<&str>]) -> Bytes {
    let mut m = vec![b'I'];
    m.extend_from_slice(&relation_id.to_be_bytes());
    m.push(b'N');
    m.extend_from_slice(&(values.len() as u16).to_be_bytes());
    for v in values {
        match v {
            None => m.push(b'n'),
            Some(t) => {
                m.push(b't');
                m.extend_from_slice(&(t.len() as u32).to_be_bytes());
                m.extend_from_slice(t.as_bytes());
            }
        }
    }
    Bytes::from(m)
}

#[test]
fn a_row_that_cannot_be_routed_carries_its_columns_for_a_replay_on_both_paths() {
    let values = [
        Some("e1"),
        None,
        Some("order-1"),
        Some("OrderCreated"),
        Some("{}"),
        Some("2026-01-01"),
    ];
    let expected: Vec<(String, Option<Bytes>)> = SEED_COLUMNS
        .iter()
        .zip(values)
        .map(|(c, v)| {
            (
                c.to_string(),
                v.map(|t| Bytes::copy_from_slice(t.as_bytes())),
            )
        })
        .collect();
    let mut router = seeded_router();
    let decoded = invalid(router.route(&insert(1, &values)));
    assert!(decoded.reason.contains("is NULL"), "{}", decoded.reason);
    assert_eq!(decoded.row.as_ref(), Some(&expected));
    let fast = invalid(router.route_message(&insert_message(1, &values)).unwrap());
    assert_eq!(fast, decoded, "the fast path keeps the same row");
    // A routed row carries nothing extra, and a row of an unknown relation has no columns.
    assert!(matches!(
        router.route(&seed_row(Some("Order"), Some("{}"))),
        RouteOutcome::Record(_)
    ));
    let mut fresh = Router::new(RouterConfig::default());
    assert_eq!(invalid(fresh.route(&insert(9, &values))).row, None);
}
