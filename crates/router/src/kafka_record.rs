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

/// Bytes in an allocation of their own when they are small: a record kept for long (parked
/// behind a partition's first write, refused and waiting for its dead letter) then holds only
/// its own bytes, not the whole buffer they were split off (a replication message's read
/// buffer, the Debezium mode's write buffer). Larger bytes have an allocation of their own
/// already and are shared, not copied.
pub fn detached(bytes: &Bytes) -> Bytes {
    const SHARED_ABOVE: usize = 64 << 10;
    if bytes.len() > SHARED_ABOVE {
        bytes.clone()
    } else {
        Bytes::copy_from_slice(bytes)
    }
}

impl OutboxRecord {
    /// The record with [`detached`] bytes: for one kept beyond its hand-over.
    pub fn detached(&self) -> OutboxRecord {
        OutboxRecord {
            topic: self.topic.clone(),
            key: self.key.as_ref().map(detached),
            value: self.value.as_ref().map(detached),
            headers: self
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), value.as_ref().map(detached)))
                .collect(),
            partition: self.partition,
            timestamp_ms: self.timestamp_ms,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_record_holds_its_own_bytes_only() {
        let shared = Bytes::from(vec![b'a'; 100_000]);
        let record = OutboxRecord {
            topic: "t".into(),
            key: Some(shared.slice(0..3)),
            value: Some(shared.slice(10..20)),
            headers: vec![
                ("id".into(), Some(shared.slice(30..40))),
                ("n".into(), None),
            ],
            partition: Some(1),
            timestamp_ms: Some(7),
        };
        let detached = record.detached();
        assert_eq!(detached, record);
        // Small parts are copies (another address); a part above 64 KiB is shared.
        assert_ne!(
            detached.key.as_ref().unwrap().as_ptr(),
            record.key.as_ref().unwrap().as_ptr()
        );
        assert_ne!(
            detached.value.as_ref().unwrap().as_ptr(),
            record.value.as_ref().unwrap().as_ptr()
        );
        let big = shared.slice(0..70_000);
        assert_eq!(super::detached(&big).as_ptr(), big.as_ptr());
    }
}
