//! Debezium's transaction metadata (`provide.transaction.metadata=true`): a BEGIN record
//! before a transaction's events and an END record after them, on
//! `<topic.prefix>.transaction` (`TransactionMonitor`, `AbstractTransactionStructMaker`,
//! `SchemaFactory.transactionKeySchema` / `transactionValueSchema`). PostgreSQL's id is
//! `<xid>:<lsn>`, the LSN of the message being processed (`PostgresTransactionMonitor.adjustTxId`).
//! The EventRouter passes these records through unchanged.

use super::Router;
use crate::config::Output;
use crate::connect::{java_hash_map_order, ConnectRecord, Data, Schema, SchemaType, Value};
use crate::kafka_record::RouteOutcome;

/// A transaction boundary to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransactionMark {
    Begin {
        id: String,
        ts_ms: i64,
    },
    End {
        id: String,
        ts_ms: i64,
        /// Events per table (`schema.table`), in the order they were first seen.
        per_table: Vec<(String, i64)>,
    },
}

fn key_schema() -> Schema {
    Schema::new(
        SchemaType::Struct(vec![("id".into(), Schema::new(SchemaType::String, false))]),
        false,
    )
    .named(
        "io.debezium.connector.common.TransactionMetadataKey",
        Some(1),
    )
}

fn value_schema() -> Schema {
    let collection = Schema::new(
        SchemaType::Struct(vec![
            (
                "data_collection".into(),
                Schema::new(SchemaType::String, false),
            ),
            ("event_count".into(), Schema::new(SchemaType::Int64, false)),
        ]),
        true,
    )
    .named("event.collection", Some(1));
    Schema::new(
        SchemaType::Struct(vec![
            ("status".into(), Schema::new(SchemaType::String, false)),
            ("id".into(), Schema::new(SchemaType::String, false)),
            ("event_count".into(), Schema::new(SchemaType::Int64, true)),
            (
                "data_collections".into(),
                Schema::new(SchemaType::Array(Box::new(collection)), true),
            ),
            ("ts_ms".into(), Schema::new(SchemaType::Int64, false)),
        ]),
        false,
    )
    .named(
        "io.debezium.connector.common.TransactionMetadataValue",
        Some(1),
    )
}

impl Router {
    /// The outbox tables (`schema.table`) one pgoutput change counts for in an END record:
    /// Debezium counts every change event it dispatches, inserts of the outbox tables and
    /// their updates, deletes and truncates. `None` for a change `skipped.operations` skips:
    /// Debezium never dispatches it, so it neither counts nor begins a transaction (one whose
    /// changes are all skipped has no BEGIN and no END).
    pub fn counted_tables(&self, data: &[u8]) -> Option<Vec<&str>> {
        let Output::Connect(format) = &self.config.output else {
            return Some(Vec::new());
        };
        let Some(metadata) = &format.transaction_metadata else {
            return Some(Vec::new());
        };
        let id_at = |at: usize| -> Option<u32> {
            data.get(at..at + 4)
                .map(|b| u32::from_be_bytes(b.try_into().expect("four bytes")))
        };
        let table = |id: u32| match self.relations.get(&id) {
            Some(Some(plan)) => Some(plan.table.as_str()),
            _ => None,
        };
        let op = match data.first() {
            Some(b'I') => 'c',
            Some(b'U') => 'u',
            Some(b'D') => 'd',
            Some(b'T') => 't',
            _ => return Some(Vec::new()),
        };
        if metadata.skipped.contains(&op) {
            return None;
        }
        if op == 't' {
            // Truncate: Int32 count, Int8 options, then the relation ids.
            let count = id_at(1).unwrap_or(0) as usize;
            return Some(
                (0..count)
                    .filter_map(|i| id_at(6 + 4 * i))
                    .filter_map(table)
                    .collect(),
            );
        }
        Some(id_at(1).and_then(table).into_iter().collect())
    }

    /// Whether BEGIN/END records are written.
    pub fn writes_transaction_metadata(&self) -> bool {
        matches!(&self.config.output, Output::Connect(f) if f.transaction_metadata.is_some())
    }

    /// The BEGIN or END record, transformed and converted, or `None` when transaction
    /// metadata is not written.
    pub fn transaction_record(&mut self, mark: &TransactionMark) -> Option<RouteOutcome> {
        let outcome = self.transaction_record_unfinished(mark)?;
        Some(self.finish(outcome))
    }

    fn transaction_record_unfinished(&self, mark: &TransactionMark) -> Option<RouteOutcome> {
        let Output::Connect(format) = &self.config.output else {
            return None;
        };
        let topic = format.transaction_metadata.as_ref()?.topic.clone();
        let (status, id, ts_ms, counts) = match mark {
            TransactionMark::Begin { id, ts_ms } => ("BEGIN", id, *ts_ms, None),
            TransactionMark::End {
                id,
                ts_ms,
                per_table,
            } => ("END", id, *ts_ms, Some(per_table)),
        };
        let (event_count, data_collections) = match counts {
            None => (Value::Null, Value::Null),
            // The counts live in a java.util.HashMap: written in its iteration order.
            Some(per_table) => (
                Value::Int(per_table.iter().map(|(_, n)| n).sum()),
                Value::Array(
                    java_hash_map_order(per_table.clone())
                        .into_iter()
                        .map(|(table, n)| Value::Struct(vec![Value::text(&table), Value::Int(n)]))
                        .collect(),
                ),
            ),
        };
        let value = Value::Struct(vec![
            Value::text(status),
            Value::text(id),
            event_count,
            data_collections,
            Value::Int(ts_ms),
        ]);
        let record = ConnectRecord {
            topic,
            partition: None,
            key: Data::new(key_schema(), Value::Struct(vec![Value::text(id)])),
            value: Data::new(value_schema(), value),
            headers: Vec::new(),
            timestamp_ms: None,
        };
        Some(self.connect_record(record, "transaction"))
    }
}

#[cfg(test)]
mod tests {
    use super::TransactionMark;
    use crate::config::{ConnectFormat, Output, RouterConfig};
    use crate::connect::Converter;
    use crate::Router;

    fn router() -> Router {
        let json = Converter::Json(crate::connect::JsonConverter {
            schemas_enable: false,
            replace_null_with_default: true,
        });
        Router::new(RouterConfig {
            output: Output::Connect(ConnectFormat {
                transaction_metadata: Some(crate::config::TransactionMetadata {
                    topic: "dbserver1.transaction".into(),
                    skipped: vec!['t'],
                }),
                ..ConnectFormat::new(json.clone(), json, "dbserver1")
            }),
            ..RouterConfig::default()
        })
    }

    fn text(b: &Option<bytes::Bytes>) -> &str {
        std::str::from_utf8(b.as_deref().unwrap()).unwrap()
    }

    /// Debezium's documented example (postgresql connector, "Transaction metadata"): BEGIN
    /// with null counts, END with the total and per-table counts.
    #[test]
    fn begin_and_end_records_as_debezium_writes_them() {
        let mut r = router();
        let begin = crate::Router::converted(r.transaction_record(&TransactionMark::Begin {
            id: "571:53195829".into(),
            ts_ms: 1_486_500_577_125,
        }));
        assert_eq!(&*begin.topic, "dbserver1.transaction");
        assert_eq!(text(&begin.key), r#"{"id":"571:53195829"}"#);
        assert_eq!(
            text(&begin.value),
            r#"{"status":"BEGIN","id":"571:53195829","event_count":null,"data_collections":null,"ts_ms":1486500577125}"#
        );
        let end = crate::Router::converted(r.transaction_record(&TransactionMark::End {
            id: "571:53195832".into(),
            ts_ms: 1_486_500_577_691,
            // Seen in this order; java.util.HashMap puts s1.a (bucket 4) before s2.a (7).
            per_table: vec![("s2.a".into(), 1), ("s1.a".into(), 1)],
        }));
        assert_eq!(
            text(&end.value),
            concat!(
                r#"{"status":"END","id":"571:53195832","event_count":2,"data_collections":["#,
                r#"{"data_collection":"s1.a","event_count":1},{"data_collection":"s2.a","event_count":1}],"ts_ms":1486500577691}"#
            )
        );
        assert!(Router::new(RouterConfig::default())
            .transaction_record(&TransactionMark::Begin {
                id: "1:2".into(),
                ts_ms: 0
            })
            .is_none());
    }
}
