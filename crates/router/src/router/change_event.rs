//! The change event Debezium's PostgreSQL connector makes of an outbox INSERT, which the
//! transforms before the EventRouter read: the envelope
//! (`<topic.prefix>.<schema>.<table>.Envelope`, version 2) with the row's images (`before`
//! null, `after` the row), its `source` block (`io.debezium.connector.postgresql.Source`),
//! `transaction` block (`event.block`), `op` and timestamps, the row's key, the connector's
//! context headers, on topic `<topic.prefix>.<schema>.<table>`.
//!
//! The source block's values are Debezium 3.6's for a streamed change (`SourceInfo`,
//! `PostgresSourceInfoStructMaker`, `AbstractSourceInfoStructMaker`): `ts_ms`, `ts_us`,
//! `ts_ns` from the transaction's commit time, `sequence` = `["<last commit LSN>","<LSN>"]`
//! (the LSN of the last COMMIT the session processed, `null` before the first), `txId`, `lsn`
//! of the change, `xmin` null (`xmin.fetch.interval.ms=0`), `snapshot` `"false"`.

use crate::connect::{ConnectRecord, Data, Header, Schema, SchemaType, Value};
use crate::transforms::Chain;
use std::sync::Arc;

/// The transforms before the EventRouter, and what the change events they read carry.
#[derive(Debug, Clone, Default)]
pub struct BeforeRouter {
    pub chain: Chain,
    /// The source block's `version` (Debezium's, e.g. `3.6.1.Final`).
    pub version: String,
    /// The source block's `db`: the database the connector reads.
    pub database: String,
}

/// Where a change is in the WAL and in its transaction: what the source and transaction
/// blocks say of it. The replication stream sets it before each change it routes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourcePosition {
    /// The change's LSN (its XLogData's start).
    pub lsn: u64,
    pub xid: Option<u32>,
    /// The transaction's commit time, microseconds since the Unix epoch.
    pub commit_time_us: Option<i64>,
    /// The end of the last transaction the session committed (`lastCommitLsn`).
    pub last_commit_lsn: Option<u64>,
    /// `snapshot`: `None` for a streamed change (`"false"`, the field's default).
    pub snapshot: Option<&'static str>,
    /// The transaction block (`provide.transaction.metadata=true`): id, total order, order
    /// in its table.
    pub transaction: Option<(String, i64, i64)>,
}

fn string(optional: bool) -> Schema {
    Schema::new(SchemaType::String, optional)
}

fn int64(optional: bool) -> Schema {
    Schema::new(SchemaType::Int64, optional)
}

/// `SchemaFactory.snapshotRecordSchema`: an optional `io.debezium.data.Enum` of
/// `SnapshotRecord`'s values, default `false`.
fn snapshot_schema() -> Schema {
    let mut schema = string(true).named("io.debezium.data.Enum", Some(1));
    schema.parameters = vec![(
        "allowed".into(),
        "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental".into(),
    )];
    schema.default = Some(Value::text("false"));
    schema
}

/// `io.debezium.connector.postgresql.Source`, version 1.
pub fn source_schema() -> Schema {
    let fields: Vec<(Arc<str>, Schema)> = vec![
        ("version".into(), string(false)),
        ("connector".into(), string(false)),
        ("name".into(), string(false)),
        ("ts_ms".into(), int64(false)),
        ("snapshot".into(), snapshot_schema()),
        ("db".into(), string(false)),
        ("sequence".into(), string(true)),
        ("ts_us".into(), int64(true)),
        ("ts_ns".into(), int64(true)),
        ("schema".into(), string(false)),
        ("table".into(), string(false)),
        ("txId".into(), int64(true)),
        ("lsn".into(), int64(true)),
        ("xmin".into(), int64(true)),
        ("origin".into(), string(true)),
        ("origin_lsn".into(), int64(true)),
    ];
    Schema::new(SchemaType::Struct(fields), false)
        .named("io.debezium.connector.postgresql.Source", Some(1))
}

/// `SchemaFactory.transactionBlockSchema`: `event.block`, version 1, optional.
pub fn transaction_schema() -> Schema {
    Schema::new(
        SchemaType::Struct(vec![
            ("id".into(), string(false)),
            ("total_order".into(), int64(false)),
            ("data_collection_order".into(), int64(false)),
        ]),
        true,
    )
    .named("event.block", Some(1))
}

/// The source block of a change of `schema.table`.
pub fn source_value(
    before: &BeforeRouter,
    topic_prefix: &str,
    schema: &str,
    table: &str,
    position: &SourcePosition,
) -> Value {
    // Instant of the commit; when unknown, now, which [`stamp`] sets.
    let time = |f: fn(i64) -> i64| {
        position
            .commit_time_us
            .map_or(Value::Null, |us| Value::Int(f(us)))
    };
    let lsn_text = |lsn: Option<u64>| match lsn {
        Some(l) => format!("\"{l}\""),
        None => "null".into(),
    };
    Value::Struct(vec![
        Value::text(&before.version),
        Value::text("postgresql"),
        Value::text(topic_prefix),
        time(|us| us.div_euclid(1000)),
        Value::text(position.snapshot.unwrap_or("false")),
        Value::text(&before.database),
        Value::text(&format!(
            "[{},{}]",
            lsn_text(position.last_commit_lsn),
            lsn_text(Some(position.lsn))
        )),
        time(|us| us),
        time(|us| us.saturating_mul(1000)),
        Value::text(schema),
        Value::text(table),
        position
            .xid
            .map_or(Value::Null, |x| Value::Int(i64::from(x))),
        Value::Int(position.lsn as i64),
        Value::Null,
        Value::Null,
        Value::Null,
    ])
}

/// The topic of `schema.table`'s change events, `<topic.prefix>.<schema>.<table>`, as
/// Debezium's topic naming makes it (`sanitizedTopicName`): a character a topic name cannot
/// hold (other than ASCII letters, digits, `.`, `_` and `-`) becomes `_`, one per UTF-16
/// unit as Java counts them, and a name longer than Kafka's 249 characters is cut there.
pub fn change_event_topic(topic_prefix: &str, schema: &str, table: &str) -> String {
    const MAX_NAME_LENGTH: usize = 249;
    let mut topic = String::new();
    for c in format!("{topic_prefix}.{schema}.{table}").chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            topic.push(c);
        } else {
            topic.extend(std::iter::repeat_n('_', c.len_utf16()));
        }
    }
    // ASCII only by now: characters are bytes.
    topic.truncate(MAX_NAME_LENGTH);
    topic
}

/// A row's image in its change event: the `after` struct and the event's key (`….Key`, or
/// no key).
pub struct RowImage {
    pub after: Value,
    pub key: Data,
}

/// The schema of a table's change events, `envelope_name` (`….Envelope`, version 2): `before`
/// and `after` of the row's schema `value_schema` (`….Value`), `source`, `transaction`, `op`,
/// `ts_ms`, `ts_us`, `ts_ns`, in `TableSchemaBuilder`'s order.
pub fn envelope_schema(envelope_name: &str, value_schema: Schema) -> Schema {
    Schema::new(
        SchemaType::Struct(vec![
            ("before".into(), value_schema.clone()),
            ("after".into(), value_schema),
            ("source".into(), source_schema()),
            ("transaction".into(), transaction_schema()),
            ("op".into(), string(false)),
            ("ts_ms".into(), int64(true)),
            ("ts_us".into(), int64(true)),
            ("ts_ns".into(), int64(true)),
        ]),
        false,
    )
    .named(envelope_name, Some(2))
}

/// The change event of an INSERT of `schema.table`, as Debezium's PostgreSQL connector makes
/// it (`Envelope.create`, or `read` for a snapshot row), on its `topic` ([`change_event_topic`])
/// with the schema [`envelope_schema`] made: the connector's context headers, the row's key,
/// `before` null and `after` the row. Its timestamps are set when the transforms run
/// ([`stamp`]).
#[allow(clippy::too_many_arguments)]
pub fn insert_event(
    before: &BeforeRouter,
    (topic, envelope): (Arc<str>, Schema),
    topic_prefix: &str,
    schema: &str,
    table: &str,
    position: &SourcePosition,
    context: &[Header],
    image: RowImage,
) -> ConnectRecord {
    let transaction = match &position.transaction {
        Some((id, total, in_table)) => Value::Struct(vec![
            Value::text(id),
            Value::Int(*total),
            Value::Int(*in_table),
        ]),
        None => Value::Null,
    };
    ConnectRecord {
        topic,
        partition: None,
        key: image.key,
        value: Data::new(
            envelope,
            Value::Struct(vec![
                Value::Null,
                image.after,
                source_value(before, topic_prefix, schema, table, position),
                transaction,
                Value::text(if position.snapshot.is_some() {
                    "r"
                } else {
                    "c"
                }),
                Value::Null,
                Value::Null,
                Value::Null,
            ]),
        ),
        headers: context.to_vec(),
        timestamp_ms: None,
    }
}

/// Sets the time an [`insert_event`] was processed: its `ts_ms`, `ts_us` and `ts_ns`, and
/// the source block's time when the commit's is unknown (as `AbstractSourceInfoStructMaker`).
pub fn stamp(event: &mut ConnectRecord, now_ms: i64) {
    let Value::Struct(values) = &mut event.value.value else {
        return;
    };
    if let [_, _, Value::Struct(source), _, _, ms, us, ns] = &mut values[..] {
        *ms = Value::Int(now_ms);
        *us = Value::Int(now_ms * 1000);
        *ns = Value::Int(now_ms * 1_000_000);
        if let [_, _, _, ts_ms @ Value::Null, _, _, _, ts_us @ Value::Null, ts_ns @ Value::Null, ..] =
            &mut source[..]
        {
            *ts_ms = Value::Int(now_ms);
            *ts_us = Value::Int(now_ms * 1000);
            *ts_ns = Value::Int(now_ms * 1_000_000);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::{Converter, HeaderConverter};

    #[test]
    fn the_source_block_is_written_as_debeziums_json_header_converter_writes_it() {
        let before = BeforeRouter {
            chain: Chain::default(),
            version: "3.6.1.Final".into(),
            database: "postgres".into(),
        };
        let position = SourcePosition {
            lsn: 23_456_789,
            xid: Some(771),
            commit_time_us: Some(1_764_151_521_123_456),
            last_commit_lsn: Some(23_450_000),
            snapshot: None,
            transaction: None,
        };
        let value = source_value(&before, "dbserver1", "public", "outbox", &position);
        let json = HeaderConverter::Other(Converter::Json(crate::connect::JsonConverter {
            schemas_enable: true,
            replace_null_with_default: true,
        }))
        .encode(&source_schema(), &value)
        .unwrap()
        .unwrap();
        assert_eq!(
            std::str::from_utf8(&json).unwrap(),
            concat!(
                r#"{"schema":{"type":"struct","fields":["#,
                r#"{"type":"string","optional":false,"field":"version"},"#,
                r#"{"type":"string","optional":false,"field":"connector"},"#,
                r#"{"type":"string","optional":false,"field":"name"},"#,
                r#"{"type":"int64","optional":false,"field":"ts_ms"},"#,
                r#"{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"},"#,
                r#"{"type":"string","optional":false,"field":"db"},"#,
                r#"{"type":"string","optional":true,"field":"sequence"},"#,
                r#"{"type":"int64","optional":true,"field":"ts_us"},"#,
                r#"{"type":"int64","optional":true,"field":"ts_ns"},"#,
                r#"{"type":"string","optional":false,"field":"schema"},"#,
                r#"{"type":"string","optional":false,"field":"table"},"#,
                r#"{"type":"int64","optional":true,"field":"txId"},"#,
                r#"{"type":"int64","optional":true,"field":"lsn"},"#,
                r#"{"type":"int64","optional":true,"field":"xmin"},"#,
                r#"{"type":"string","optional":true,"field":"origin"},"#,
                r#"{"type":"int64","optional":true,"field":"origin_lsn"}],"#,
                r#""optional":false,"name":"io.debezium.connector.postgresql.Source","version":1},"#,
                r#""payload":{"version":"3.6.1.Final","connector":"postgresql","name":"dbserver1","#,
                r#""ts_ms":1764151521123,"snapshot":"false","db":"postgres","#,
                r#""sequence":"[\"23450000\",\"23456789\"]","ts_us":1764151521123456,"#,
                r#""ts_ns":1764151521123456000,"schema":"public","table":"outbox","txId":771,"#,
                r#""lsn":23456789,"xmin":null,"origin":null,"origin_lsn":null}}"#
            )
        );
    }

    /// Debezium's topic naming: what a topic name cannot hold becomes `_` (the predicate on
    /// the EventRouter and the transforms before it read this topic).
    #[test]
    fn change_event_topics_are_named_as_debezium_names_them() {
        assert_eq!(
            change_event_topic("app", "public", "outbox"),
            "app.public.outbox"
        );
        assert_eq!(
            change_event_topic("app", "public", "outbox$v2"),
            "app.public.outbox_v2"
        );
        assert_eq!(
            change_event_topic("app-1", "Zürich", "x y"),
            "app-1.Z_rich.x_y"
        );
        let long = "t".repeat(63);
        let topic = change_event_topic(&"p".repeat(150), &long, &long);
        assert_eq!(topic.len(), 249);
        assert!(
            topic.starts_with(&"p".repeat(150)) && topic.ends_with(&format!(".{}", "t".repeat(34)))
        );
    }
}
