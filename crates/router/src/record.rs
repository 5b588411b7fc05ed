use bytes::Bytes;
use std::sync::Arc;

/// A Kafka record ready to produce. Key, value and header values share the replication
/// message's buffer (no copy of the payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRecord {
    pub topic: Arc<str>,
    pub key: Option<Bytes>,
    /// `None` is a tombstone.
    pub value: Option<Bytes>,
    /// In order: `id` first, then additional fields, as Debezium writes them.
    pub headers: Vec<(Arc<str>, Bytes)>,
}

/// An outbox row that cannot be routed; the relay dead-letters it with `reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRow {
    pub reason: String,
    /// `schema.table` the row came from.
    pub table: String,
    /// The topic the row would have gone to, when it could be computed.
    pub original_topic: Option<String>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub event_id: Option<Bytes>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteOutcome {
    /// Not an event: another table, or an UPDATE/DELETE/TRUNCATE of the outbox.
    Ignored,
    Record(OutboxRecord),
    Invalid(InvalidRow),
}
