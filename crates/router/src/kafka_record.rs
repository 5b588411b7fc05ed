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
    /// In order, as Debezium writes them: its context headers (Debezium mode), `id`, then
    /// additional fields. `None` is a header with a null value (a NULL column).
    pub headers: Vec<(Arc<str>, Option<Bytes>)>,
    /// An explicit partition (`partition` placement); `None` = by key.
    pub partition: Option<i32>,
    /// Record timestamp in epoch milliseconds (`table.field.event.timestamp`); `None` =
    /// the time the relay read the event, which the route stage fills in.
    pub timestamp_ms: Option<i64>,
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
    /// The row as the router saw it: each column's name and text (`None`: NULL), in the
    /// table's column order, so that the row can be routed again once the configuration is
    /// fixed. `None` when there was no row (a logical decoding message, a row of an unknown
    /// relation) or a column had no value to keep (unchanged TOAST).
    pub row: Option<Vec<(String, Option<Bytes>)>>,
    /// What Kafka Connect's dead-letter reporter writes for a record a transform or converter
    /// failed on (`errors.tolerance=all` with `errors.deadletterqueue.topic.name`): written
    /// instead of the relay's own dead letter.
    pub connect_dlq: Option<Box<OutboxRecord>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RouteOutcome {
    /// Not an event: another table, or an UPDATE/DELETE/TRUNCATE of the outbox.
    Ignored,
    Record(OutboxRecord),
    /// A Kafka Connect record the connector's transforms and converters have yet to make
    /// bytes of: inside the router only; every public routing call finishes it first.
    Connect(Box<PendingRecord>),
    Invalid(InvalidRow),
    /// An UPDATE of an outbox row with `table.op.invalid.behavior` warn or error: skipped,
    /// and the relay logs it at that level.
    SkippedUpdate {
        table: String,
        error: bool,
    },
    /// The configuration cannot handle this stream (e.g. a column type whose Kafka Connect
    /// bytes outbox-relay does not produce, or an UPDATE with `fatal`): stop, confirm nothing more.
    Fatal(String),
    /// A service the converters need (a schema registry) is unavailable: the relay stops the
    /// session without confirming this record and converts it again when it resumes.
    Unavailable(String),
}

/// A Kafka Connect record on its way to the transforms and converters, with the dead letter
/// it becomes if one of them fails on it (its reason filled in then).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRecord {
    pub record: crate::connect::ConnectRecord,
    pub dead: InvalidRow,
    /// Set when `record` is an outbox row's change event, which transforms before the
    /// EventRouter run on.
    pub event: Option<Box<ChangeEventAt>>,
}

/// Marks a [`PendingRecord`] that is the change event of an outbox row of relation
/// `relation_id`: the transforms before the EventRouter run on it, then the EventRouter
/// routes what they made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeEventAt {
    pub relation_id: u32,
}
