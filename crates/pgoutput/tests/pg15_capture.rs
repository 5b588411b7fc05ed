//! The decoder on every message a real PostgreSQL 15 wrote for the session in
//! scripts/capture-pgoutput-fixtures.sh (text and binary column formats).

use bytes::Bytes;
use pgoutput::{decode, ColumnValue, LogicalMessage, ReplicaIdentity};

fn load(name: &str) -> Vec<(String, Bytes)> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| {
            panic!("{path}: {e}; regenerate with scripts/capture-pgoutput-fixtures.sh")
        })
        .lines()
        .map(|line| {
            let (lsn, hex) = line.split_once(' ').expect("'<lsn> <hex>' lines");
            (lsn.to_owned(), Bytes::from(hex::decode(hex).expect("hex")))
        })
        .collect()
}

fn decode_all(name: &str) -> Vec<LogicalMessage> {
    load(name)
        .into_iter()
        .map(|(lsn, data)| decode(data).unwrap_or_else(|e| panic!("message at {lsn}: {e}")))
        .collect()
}

fn text(v: &ColumnValue) -> &str {
    match v {
        ColumnValue::Text(b) => std::str::from_utf8(b).unwrap(),
        other => panic!("expected text, got {other:?}"),
    }
}

#[test]
fn every_message_of_the_session_decodes() {
    let messages = decode_all("pg15-session.hex");
    let kinds: std::collections::BTreeSet<&str> = messages
        .iter()
        .map(|m| match m {
            LogicalMessage::Begin(_) => "Begin",
            LogicalMessage::Commit(_) => "Commit",
            LogicalMessage::Origin(_) => "Origin",
            LogicalMessage::Relation(_) => "Relation",
            LogicalMessage::Type(_) => "Type",
            LogicalMessage::Insert(_) => "Insert",
            LogicalMessage::Update(_) => "Update",
            LogicalMessage::Delete(_) => "Delete",
            LogicalMessage::Truncate(_) => "Truncate",
            LogicalMessage::Message(_) => "Message",
        })
        .collect();
    assert_eq!(
        kinds.len(),
        10,
        "the capture should hold every message kind, has {kinds:?}"
    );
}

#[test]
fn outbox_relation_and_insert_match_the_sql() {
    let messages = decode_all("pg15-session.hex");
    let LogicalMessage::Begin(begin) = &messages[0] else {
        panic!("{:?}", messages[0])
    };
    let LogicalMessage::Relation(rel) = &messages[1] else {
        panic!("{:?}", messages[1])
    };
    assert_eq!(
        (rel.namespace.as_str(), rel.name.as_str()),
        ("public", "outbox")
    );
    assert_eq!(rel.replica_identity, ReplicaIdentity::Default);
    let names: Vec<&str> = rel.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "id",
            "aggregate_type",
            "aggregate_id",
            "event_type",
            "payload",
            "created_at"
        ]
    );
    assert!(rel.columns[0].is_key());
    assert_eq!(rel.columns[0].type_oid, 2950, "uuid");
    assert_eq!(rel.columns[4].type_oid, 3802, "jsonb");
    assert_eq!(rel.columns[1].type_modifier, 255 + 4, "varchar(255)");

    let LogicalMessage::Insert(first) = &messages[2] else {
        panic!()
    };
    assert_eq!(first.relation_id, rel.relation_id);
    let cols = &first.new_tuple.columns;
    assert_eq!(text(&cols[0]), "8a0e6a0e-6c9b-4d3a-9a57-2b3f0f6b1c01");
    assert_eq!(text(&cols[1]), "Order");
    assert_eq!(text(&cols[2]), "order-1");
    assert_eq!(text(&cols[3]), "OrderCreated");
    // jsonb's text output normalises spacing: this is what consumers will receive.
    assert_eq!(text(&cols[4]), r#"{"total": 42.5, "orderId": "order-1"}"#);
    assert_eq!(text(&cols[5]), "2026-01-01 00:00:00+00");

    let LogicalMessage::Insert(second) = &messages[3] else {
        panic!()
    };
    assert_eq!(second.new_tuple.columns[4], ColumnValue::Null);

    let LogicalMessage::Commit(commit) = &messages[4] else {
        panic!()
    };
    assert_eq!(commit.commit_lsn, begin.final_lsn);
    assert!(commit.end_lsn > commit.commit_lsn);
    assert_eq!(commit.commit_time_micros, begin.commit_time_micros);
}

#[test]
fn updates_deletes_truncates_and_messages_decode() {
    let messages = decode_all("pg15-session.hex");
    let mut saw_key_update = false;
    let mut saw_old_update = false;
    let mut saw_unchanged_toast = false;
    let mut saw_old_delete = false;
    let mut saw_key_delete = false;
    let mut truncated = Vec::new();
    let mut logical = Vec::new();
    let mut origin = None;
    let mut types = Vec::new();
    for m in &messages {
        match m {
            LogicalMessage::Update(u) => {
                saw_key_update |= u.key_tuple.is_some();
                saw_old_update |= u.old_tuple.is_some();
                saw_unchanged_toast |= u.new_tuple.columns.contains(&ColumnValue::UnchangedToast);
            }
            LogicalMessage::Delete(d) => {
                saw_old_delete |= d.old_tuple.is_some();
                saw_key_delete |= d.key_tuple.is_some();
            }
            LogicalMessage::Truncate(t) => truncated.push(t.relation_ids.len()),
            LogicalMessage::Message(msg) => {
                logical.push((msg.transactional, msg.prefix.clone(), msg.content.clone()))
            }
            LogicalMessage::Origin(o) => origin = Some(o.name.clone()),
            LogicalMessage::Type(t) => types.push(t.name.clone()),
            _ => {}
        }
    }
    assert!(
        saw_key_update,
        "UPDATE of the primary key sends the old key ('K')"
    );
    assert!(
        saw_old_update,
        "REPLICA IDENTITY FULL sends the old row ('O')"
    );
    assert!(
        saw_unchanged_toast,
        "an untouched out-of-line value is sent as 'u'"
    );
    assert!(saw_old_delete && saw_key_delete);
    assert_eq!(truncated, [2], "TRUNCATE outbox, other");
    assert_eq!(
        logical,
        [
            (
                true,
                "outbox-relay".to_owned(),
                Bytes::from_static(b"transactional")
            ),
            (
                false,
                "outbox-relay".to_owned(),
                Bytes::from_static(b"non-transactional")
            ),
        ]
    );
    assert_eq!(origin.as_deref(), Some("upstream"));
    assert!(types.iter().all(|t| t == "mood") && !types.is_empty());
}

#[test]
fn added_column_arrives_as_a_new_relation() {
    let messages = decode_all("pg15-session.hex");
    let last_outbox = messages
        .iter()
        .filter_map(|m| match m {
            LogicalMessage::Relation(r) if r.name == "outbox" => Some(r),
            _ => None,
        })
        .last()
        .unwrap();
    assert_eq!(
        last_outbox.columns.last().unwrap().name,
        "tracingspancontext"
    );
    assert_eq!(last_outbox.column_index("payload"), Some(4));
}

#[test]
fn binary_format_values_decode() {
    let messages = decode_all("pg15-session-binary.hex");
    let LogicalMessage::Insert(first) = &messages[2] else {
        panic!("{:?}", messages[2])
    };
    let ColumnValue::Binary(uuid) = &first.new_tuple.columns[0] else {
        panic!()
    };
    assert_eq!(uuid.len(), 16);
    assert_eq!(uuid[0], 0x8a);
    // jsonb's binary format is a version byte (1) followed by the text.
    let ColumnValue::Binary(jsonb) = &first.new_tuple.columns[4] else {
        panic!()
    };
    assert_eq!(jsonb[0], 1);
    assert_eq!(&jsonb[1..], br#"{"total": 42.5, "orderId": "order-1"}"#);
}

#[test]
fn every_strict_prefix_of_a_real_message_is_an_error_not_a_panic() {
    for (lsn, data) in load("pg15-session.hex")
        .into_iter()
        .chain(load("pg15-session-binary.hex"))
    {
        for cut in 0..data.len() {
            assert!(
                decode(data.slice(..cut)).is_err(),
                "prefix {cut} of message at {lsn} decoded"
            );
        }
    }
}
