//! Debezium's signals (`signal.enabled.channels`): what an operator asks of a running relay,
//! as Debezium reads it from each channel, and what it asks for.
//!
//! - **source**: an INSERT into the signal table (`signal.data.collection`), read from the
//!   stream in the writer's transaction. The row's first three columns are the signal's id,
//!   type and data, by position, as Debezium reads them. Updates and deletes are no signal.
//! - **kafka**: a record on `signal.kafka.topic` (partition 0) whose key is the connector's
//!   name (`topic.prefix`) and whose value is `{"id"?, "type", "data"}`.
//! - **file**: a line `{"id", "type", "data"}` of `signal.file`; the file is emptied once read.
//!
//! Pure: parsing and the watermark rows' text. The stream acts on the signals
//! (`replication/stream.rs`), the incremental snapshot runs them (`incremental.rs`).

pub mod channels;

use pgoutput::{Insert, Relation};
use serde_json::Value;

/// The signal types (`type`) outbox-relay acts on.
pub const EXECUTE_SNAPSHOT: &str = "execute-snapshot";
pub const STOP_SNAPSHOT: &str = "stop-snapshot";
pub const PAUSE_SNAPSHOT: &str = "pause-snapshot";
pub const RESUME_SNAPSHOT: &str = "resume-snapshot";
pub const LOG: &str = "log";
/// The watermarks an incremental snapshot writes into the signal table around each chunk.
pub const WINDOW_OPEN: &str = "snapshot-window-open";
pub const WINDOW_CLOSE: &str = "snapshot-window-close";

/// One signal as a channel delivered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    /// The signal's id: the signal table's first column, the Kafka value's optional `id`, the
    /// file line's `id`. The notifications of the snapshot it starts carry it.
    pub id: Option<String>,
    pub kind: String,
    /// `data`, parsed (an empty object when the channel gave none).
    pub data: Value,
}

/// Which snapshot a snapshot signal is about (`data.type`, `incremental` when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotKind {
    Incremental,
    Blocking,
}

/// One `additional-conditions` entry: rows of the tables `collection` matches (a regular
/// expression, case-insensitive) are read only where `filter` (SQL) holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub collection: String,
    pub filter: String,
}

/// What a signal asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `execute-snapshot`: the tables `collections` match (regular expressions, matched whole
    /// against `schema.table`), read again.
    ExecuteSnapshot {
        kind: SnapshotKind,
        collections: Vec<String>,
        conditions: Vec<Condition>,
        surrogate_key: Option<String>,
    },
    /// `stop-snapshot`: the tables `collections` match leave the snapshot (all when empty).
    StopSnapshot {
        kind: SnapshotKind,
        collections: Vec<String>,
    },
    PauseSnapshot,
    ResumeSnapshot,
    /// `log`: `message` logged, its first `{}` replaced by the position.
    Log {
        message: String,
    },
    /// A chunk's watermarks, named `<chunk id>-open` / `<chunk id>-close`.
    WindowOpen,
    WindowClose,
}

impl Signal {
    /// What the signal asks for; why it is passed over otherwise (Debezium logs the same and
    /// goes on).
    pub fn action(&self) -> Result<Action, String> {
        let text = |key: &str| self.data.get(key).and_then(Value::as_str).map(str::trim);
        let kind = || match text("type").map(str::to_ascii_lowercase).as_deref() {
            None | Some("incremental") => Ok(SnapshotKind::Incremental),
            Some("blocking") => Ok(SnapshotKind::Blocking),
            Some(other) => Err(format!(
                "Detected an unexpected snapshot type '{other}' (signal '{}')",
                self.id()
            )),
        };
        let collections = || -> Vec<String> {
            self.data
                .get("data-collections")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        match self.kind.as_str() {
            EXECUTE_SNAPSHOT => {
                let collections = collections();
                if collections.is_empty() {
                    return Err(format!(
                        "Execute snapshot signal '{}' has arrived but the requested field 'data-collections' is missing from data or is empty",
                        self.id()
                    ));
                }
                let conditions = self
                    .data
                    .get("additional-conditions")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|c| {
                                Some(Condition {
                                    collection: c.get("data-collection")?.as_str()?.to_owned(),
                                    filter: c.get("filter")?.as_str()?.to_owned(),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Action::ExecuteSnapshot {
                    kind: kind()?,
                    collections,
                    conditions,
                    surrogate_key: text("surrogate-key")
                        .filter(|k| !k.is_empty())
                        .map(str::to_owned),
                })
            }
            STOP_SNAPSHOT => Ok(Action::StopSnapshot {
                kind: kind()?,
                collections: collections(),
            }),
            PAUSE_SNAPSHOT => Ok(Action::PauseSnapshot),
            RESUME_SNAPSHOT => Ok(Action::ResumeSnapshot),
            LOG => match text("message") {
                Some(message) => Ok(Action::Log {
                    message: message.to_owned(),
                }),
                None => Err(format!(
                    "Logging signal '{}' has arrived but the requested field 'message' is missing from data",
                    self.id()
                )),
            },
            WINDOW_OPEN => Ok(Action::WindowOpen),
            WINDOW_CLOSE => Ok(Action::WindowClose),
            other => Err(format!(
                "Signal '{}' has been received but the type '{other}' is not recognized",
                self.id()
            )),
        }
    }

    fn id(&self) -> &str {
        self.id.as_deref().unwrap_or("")
    }
}

/// `data` as a channel gives it: null or blank is an empty object.
fn parse_data(id: Option<&str>, data: Option<&str>) -> Result<Value, String> {
    match data.map(str::trim).filter(|d| !d.is_empty()) {
        None => Ok(Value::Object(Default::default())),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            format!(
                "Signal '{}' has been received but the data '{text}' cannot be parsed ({e})",
                id.unwrap_or("")
            )
        }),
    }
}

/// The signal an INSERT into the signal table (described by `relation`) carries: its first
/// three columns, id, type and data, by position.
pub fn from_row(relation: &Relation, insert: &Insert) -> Result<Signal, String> {
    if relation.columns.len() != 3 {
        return Err(format!(
            "The signal table {}.{} should have 3 fields (id, type, data) but has {}",
            relation.namespace,
            relation.name,
            relation.columns.len()
        ));
    }
    let text = |i: usize| -> Option<String> {
        let bytes = insert.new_tuple.columns.get(i)?.bytes()?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    };
    let id = text(0);
    let kind = text(1).ok_or_else(|| "a signal row without a type".to_owned())?;
    let data = parse_data(id.as_deref(), text(2).as_deref())?;
    Ok(Signal { id, kind, data })
}

/// The signal of a Kafka signal record: `None` when it is not for the connector named
/// `name` (its key is the connector's name) or has no value.
pub fn from_kafka(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    name: &str,
) -> Option<Result<Signal, String>> {
    let key = key.map(String::from_utf8_lossy).unwrap_or_default();
    if key != name {
        tracing::info!("Signal key '{key}' doesn't match the connector's name '{name}'");
        return None;
    }
    let value = value.filter(|v| !v.is_empty())?;
    Some(from_json(&String::from_utf8_lossy(value)))
}

/// The signal of one line of the signal file; `None` for a blank line.
pub fn from_file_line(line: &str) -> Option<Result<Signal, String>> {
    let line = line.trim();
    (!line.is_empty()).then(|| from_json(line))
}

/// `{"id"?, "type", "data"?}`.
fn from_json(text: &str) -> Result<Signal, String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("a signal that is not JSON ({e}): {text}"))?;
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("a signal without a type: {text}"))?
        .to_owned();
    let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
    let data = match value.get("data") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(s)) => parse_data(id.as_deref(), Some(s))?,
        Some(other) => other.clone(),
    };
    Ok(Signal { id, kind, data })
}

/// The JSON line or record value a signal is written as (the Kafka and file channels).
pub fn to_json(signal: &Signal) -> String {
    let mut value = serde_json::Map::new();
    if let Some(id) = &signal.id {
        value.insert("id".into(), Value::String(id.clone()));
    }
    value.insert("type".into(), Value::String(signal.kind.clone()));
    value.insert("data".into(), signal.data.clone());
    Value::Object(value).to_string()
}

/// The `log` signal's line: `message` with its first `{}` replaced by `position` (an SLF4J
/// pattern's first argument); further `{}` stay.
pub fn log_line(message: &str, position: &str) -> String {
    message.replacen("{}", position, 1)
}

/// `java.time.Instant.toString()` of `micros` since the epoch: ISO-8601 in UTC, the fraction
/// in groups of three digits, none when zero.
pub fn java_instant(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let time = jiff::Timestamp::from_second(seconds)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default();
    match fraction {
        0 => format!("{time}Z"),
        f if f % 1000 == 0 => format!("{time}.{:03}Z", f / 1000),
        f => format!("{time}.{f:06}Z"),
    }
}

/// The `data` of a chunk's open watermark.
pub fn open_data(open_micros: i64) -> String {
    format!(
        "{{\"openWindowTimestamp\": \"{}\"}}",
        java_instant(open_micros)
    )
}

/// The `data` of a chunk's close watermark.
pub fn close_data(open_micros: i64, close_micros: i64) -> String {
    format!(
        "{{\"openWindowTimestamp\": \"{}\", \"closeWindowTimestamp\": \"{}\"}}",
        java_instant(open_micros),
        java_instant(close_micros)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use pgoutput::{Column, ColumnValue, ReplicaIdentity, TupleData};

    fn signal(kind: &str, data: &str) -> Signal {
        Signal {
            id: Some("s-1".into()),
            kind: kind.into(),
            data: serde_json::from_str(data).unwrap(),
        }
    }

    #[test]
    fn execute_snapshot_reads_debeziums_fields() {
        let s = signal(
            EXECUTE_SNAPSHOT,
            r#"{"data-collections": [" public.outbox ", "public.b"], "type": "INCREMENTAL",
               "additional-conditions": [{"data-collection": "public.outbox", "filter": "aggregate_type = 'A'"}]}"#,
        );
        assert_eq!(
            s.action().unwrap(),
            Action::ExecuteSnapshot {
                kind: SnapshotKind::Incremental,
                collections: vec!["public.outbox".into(), "public.b".into()],
                conditions: vec![Condition {
                    collection: "public.outbox".into(),
                    filter: "aggregate_type = 'A'".into()
                }],
                surrogate_key: None,
            }
        );
        let blocking = signal(
            EXECUTE_SNAPSHOT,
            r#"{"data-collections": ["public.outbox"], "type": "blocking"}"#,
        );
        assert!(matches!(
            blocking.action().unwrap(),
            Action::ExecuteSnapshot {
                kind: SnapshotKind::Blocking,
                ..
            }
        ));
        let none = signal(EXECUTE_SNAPSHOT, r#"{"type": "incremental"}"#);
        assert!(none.action().unwrap_err().contains("data-collections"));
        let odd = signal(
            EXECUTE_SNAPSHOT,
            r#"{"data-collections": ["a.b"], "type": "sideways"}"#,
        );
        assert!(odd.action().unwrap_err().contains("sideways"));
    }

    #[test]
    fn the_other_signals_and_unknown_ones() {
        assert_eq!(
            signal(STOP_SNAPSHOT, "{}").action().unwrap(),
            Action::StopSnapshot {
                kind: SnapshotKind::Incremental,
                collections: vec![]
            }
        );
        assert_eq!(
            signal(PAUSE_SNAPSHOT, "{}").action().unwrap(),
            Action::PauseSnapshot
        );
        assert_eq!(
            signal(LOG, r#"{"message": "at {} and {}"}"#)
                .action()
                .unwrap(),
            Action::Log {
                message: "at {} and {}".into()
            }
        );
        assert!(signal(LOG, "{}").action().unwrap_err().contains("message"));
        assert!(signal("schema-dance", "{}")
            .action()
            .unwrap_err()
            .contains("not recognized"));
        assert_eq!(log_line("at {} and {}", "{lsn=1}"), "at {lsn=1} and {}");
    }

    #[test]
    fn a_signal_rows_three_columns_by_position() {
        let relation = Relation {
            relation_id: 7,
            namespace: "public".into(),
            name: "debezium_signal".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: ["sid", "kind", "payload"]
                .iter()
                .map(|n| Column {
                    flags: 0,
                    name: (*n).into(),
                    type_oid: 25,
                    type_modifier: -1,
                })
                .collect(),
        };
        let row = |data: Option<&str>| Insert {
            relation_id: 7,
            new_tuple: TupleData {
                columns: vec![
                    ColumnValue::Text(Bytes::from_static(b"ad-hoc-1")),
                    ColumnValue::Text(Bytes::from_static(b"log")),
                    data.map_or(ColumnValue::Null, |d| {
                        ColumnValue::Text(Bytes::copy_from_slice(d.as_bytes()))
                    }),
                ],
            },
        };
        let s = from_row(&relation, &row(Some(r#"{"message": "hi"}"#))).unwrap();
        assert_eq!(s.id.as_deref(), Some("ad-hoc-1"));
        assert_eq!(s.kind, "log");
        assert_eq!(s.data["message"], "hi");
        assert_eq!(
            from_row(&relation, &row(None)).unwrap().data,
            serde_json::json!({})
        );
        assert!(from_row(&relation, &row(Some("{nope")))
            .unwrap_err()
            .contains("cannot be parsed"));
        let mut four = relation.clone();
        four.columns.push(four.columns[0].clone());
        assert!(from_row(&four, &row(None))
            .unwrap_err()
            .contains("should have 3 fields"));
    }

    #[test]
    fn kafka_records_and_file_lines() {
        let value = br#"{"id": "k-1", "type": "execute-snapshot", "data": {"data-collections": ["public.outbox"]}}"#;
        assert!(from_kafka(Some(b"other"), Some(value), "app").is_none());
        let s = from_kafka(Some(b"app"), Some(value), "app")
            .unwrap()
            .unwrap();
        assert_eq!(s.id.as_deref(), Some("k-1"));
        assert!(from_kafka(Some(b"app"), None, "app").is_none());
        assert!(from_file_line("   ").is_none());
        let line = from_file_line(r#"{"id":"f","type":"log","data":{"message":"m"}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(from_file_line(&to_json(&line)).unwrap().unwrap(), line);
        assert!(from_file_line("not json").unwrap().is_err());
    }

    #[test]
    fn watermark_data_as_debezium_writes_it() {
        assert_eq!(java_instant(1_714_557_600_000_000), "2024-05-01T10:00:00Z");
        assert_eq!(
            java_instant(1_714_557_600_123_000),
            "2024-05-01T10:00:00.123Z"
        );
        assert_eq!(
            java_instant(1_714_557_600_123_456),
            "2024-05-01T10:00:00.123456Z"
        );
        assert_eq!(
            open_data(1_714_557_600_000_000),
            r#"{"openWindowTimestamp": "2024-05-01T10:00:00Z"}"#
        );
        assert_eq!(
            close_data(1_714_557_600_000_000, 1_714_557_601_000_000),
            r#"{"openWindowTimestamp": "2024-05-01T10:00:00Z", "closeWindowTimestamp": "2024-05-01T10:00:01Z"}"#
        );
    }
}
