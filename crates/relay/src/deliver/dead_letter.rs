//! What a dead-lettered event looks like on the dead-letter topic: the original key, the
//! original payload when it fits, the event id, and headers that say why and where from.
//! Every mode (replication, snapshot, polling) writes dead letters through this file only.

use bytes::Bytes;
use outbox_router::{InvalidRow, OutboxRecord};
use pgoutput::Lsn;
use std::sync::Arc;

pub const REASON: &str = "outbox-relay.error.reason";
pub const SOURCE_TABLE: &str = "outbox-relay.source.table";
pub const SOURCE_LSN: &str = "outbox-relay.source.lsn";
pub const ORIGINAL_TOPIC: &str = "outbox-relay.original.topic";
pub const ORIGINAL_SIZE: &str = "outbox-relay.original.size";
/// The row that could not be routed, as a JSON object of column name to text (or null) in the
/// table's column order: what `outbox-relay dead-letters replay` routes again.
pub const SOURCE_ROW: &str = "outbox-relay.source.row";
/// Where the whole row of an event this dead letter cannot give back is kept:
/// `<schema>.outbox_relay_dead_letters/<id>` (polling mode, which retires the outbox row).
/// Without it, a dead letter whose payload was left out names a row the outbox keeps (CDC
/// never deletes it). `outbox-relay dead-letters replay` routes that row again.
pub const ROW_KEPT: &str = "outbox-relay.row.kept";

/// Why, in one word, for the `reason` label of `outbox_relay_dead_letters_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The row could not be routed (a missing or malformed column).
    Unroutable,
    /// The broker or producer refused the event (too large, a refused topic, no such partition).
    Refused,
}

impl Cause {
    pub fn label(self) -> &'static str {
        match self {
            Cause::Unroutable => "unroutable",
            Cause::Refused => "refused",
        }
    }
}

/// What is kept of a refused record for its dead letter: its payload too, unless the payload
/// is what was refused (too large).
#[derive(Debug, Clone)]
pub struct RefusedRecord {
    pub topic: String,
    pub key: Option<Bytes>,
    pub event_id: Option<Bytes>,
    pub value: Option<Bytes>,
    pub value_len: usize,
}

impl RefusedRecord {
    /// Refused for its size: its payload stays out of the dead letter (its size is kept).
    pub fn oversized(mut self) -> Self {
        self.value = None;
        self
    }
}

/// An event that goes to the dead-letter topic instead of its own.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub cause: Cause,
    pub reason: String,
    pub table: Arc<str>,
    pub original_topic: Option<String>,
    pub key: Option<Bytes>,
    /// `None` when the payload itself is the problem (too large to produce).
    pub value: Option<Bytes>,
    pub event_id: Option<Bytes>,
    /// Size of a payload that was left out.
    pub original_size: Option<usize>,
    /// WAL position of the row; `None` for rows read with SQL (polling mode).
    pub lsn: Option<Lsn>,
    /// The row ([`SOURCE_ROW`]'s JSON) when the router had its columns as text.
    pub row: Option<Bytes>,
    /// The record Kafka Connect's dead-letter reporter writes for it, to its own topic
    /// (`errors.tolerance=all` with `errors.deadletterqueue.topic.name`): written instead.
    pub connect: Option<Box<OutboxRecord>>,
    /// [`ROW_KEPT`]: where the source keeps the event's whole row.
    pub row_kept: Option<String>,
}

impl DeadLetter {
    pub fn from_invalid_row(row: InvalidRow, lsn: Option<Lsn>) -> Self {
        Self {
            cause: Cause::Unroutable,
            reason: row.reason,
            table: row.table.into(),
            original_topic: row.original_topic,
            key: row.key,
            value: row.value,
            event_id: row.event_id,
            original_size: None,
            lsn,
            row: row.row.as_deref().and_then(row_json),
            connect: row.connect_dlq,
            row_kept: None,
        }
    }

    /// The broker or producer refused `record` (too large, invalid, its topic refused):
    /// retrying cannot help. Its payload is kept unless it is what was refused (too large):
    /// then its size is.
    pub fn refused(error: &str, record: RefusedRecord, table: Arc<str>, lsn: Option<Lsn>) -> Self {
        let original_size = record.value.is_none().then_some(record.value_len);
        Self {
            cause: Cause::Refused,
            reason: format!("the event was refused: {error}"),
            table,
            original_topic: Some(record.topic),
            key: record.key,
            value: record.value,
            event_id: record.event_id,
            original_size,
            lsn,
            row: None,
            connect: None,
            row_kept: None,
        }
    }

    /// Whether the event can be had back whole from this letter: it carries the row (which
    /// replay routes again), or it is Kafka Connect's record with its payload. A refused
    /// event's letter never is: it keeps the key, the id and at most the payload.
    pub fn gives_back_whole(&self) -> bool {
        match &self.connect {
            Some(record) => record.value.is_some() && self.original_size.is_none(),
            None => self.row.is_some(),
        }
    }

    /// The same dead letter cut down, for a dead-letter topic that refused it as it was:
    /// first without its payload (the row, which holds the payload too, stays: the dead
    /// letter can still be replayed), then, refused again, without the row; `None` when
    /// nothing is left to cut.
    pub fn without_payload(&self, why: &str) -> Option<Self> {
        if let Some(record) = &self.connect {
            // Kafka Connect's record: its value, then nothing more.
            let value = record.value.as_ref()?;
            return Some(Self {
                reason: format!("{}; payload left out: {why}", self.reason),
                original_size: Some(value.len()),
                connect: Some(Box::new(OutboxRecord {
                    value: None,
                    ..(**record).clone()
                })),
                ..self.clone()
            });
        }
        if let Some(value) = &self.value {
            return Some(Self {
                reason: format!("{}; payload left out: {why}", self.reason),
                value: None,
                original_size: Some(value.len()),
                ..self.clone()
            });
        }
        self.row.as_ref()?;
        Some(Self {
            reason: format!("{}; row left out: {why}", self.reason),
            row: None,
            ..self.clone()
        })
    }

    /// The topic it goes to: Kafka Connect's dead-letter queue for a record written as
    /// Connect writes them there, else `dead_letter_topic`.
    pub fn topic(&self, dead_letter_topic: &Arc<str>) -> Arc<str> {
        match &self.connect {
            Some(record) => record.topic.clone(),
            None => dead_letter_topic.clone(),
        }
    }

    /// The record written to `topic` (see [`Self::topic`]).
    pub fn to_record(&self, topic: &Arc<str>) -> OutboxRecord {
        if let Some(record) = &self.connect {
            let mut record = OutboxRecord {
                topic: topic.clone(),
                ..(**record).clone()
            };
            if let Some(kept) = &self.row_kept {
                record
                    .headers
                    .push((ROW_KEPT.into(), Some(Bytes::from(kept.clone()))));
            }
            return record;
        }
        let mut headers: Vec<(Arc<str>, Option<Bytes>)> = Vec::with_capacity(7);
        if let Some(id) = &self.event_id {
            headers.push(("id".into(), Some(id.clone())));
        }
        headers.push((REASON.into(), Some(Bytes::from(self.reason.clone()))));
        headers.push((
            SOURCE_TABLE.into(),
            Some(Bytes::from(self.table.to_string())),
        ));
        if let Some(lsn) = self.lsn {
            headers.push((SOURCE_LSN.into(), Some(Bytes::from(lsn.to_string()))));
        }
        if let Some(original) = &self.original_topic {
            headers.push((ORIGINAL_TOPIC.into(), Some(Bytes::from(original.clone()))));
        }
        if let Some(size) = self.original_size {
            headers.push((ORIGINAL_SIZE.into(), Some(Bytes::from(size.to_string()))));
        }
        if let Some(row) = &self.row {
            headers.push((SOURCE_ROW.into(), Some(row.clone())));
        }
        if let Some(kept) = &self.row_kept {
            headers.push((ROW_KEPT.into(), Some(Bytes::from(kept.clone()))));
        }
        OutboxRecord {
            topic: topic.clone(),
            key: self.key.clone(),
            value: self.value.clone(),
            headers,
            partition: None,
            timestamp_ms: None,
        }
    }
}

/// The row as [`SOURCE_ROW`]'s JSON object; `None` if a value is not text (not UTF-8).
pub fn row_json(row: &[(String, Option<Bytes>)]) -> Option<Bytes> {
    let mut object = serde_json::Map::with_capacity(row.len());
    for (name, value) in row {
        let value = match value {
            None => serde_json::Value::Null,
            Some(v) => std::str::from_utf8(v).ok()?.into(),
        };
        object.insert(name.clone(), value);
    }
    Some(serde_json::to_vec(&object).ok()?.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(r: &'a OutboxRecord, name: &str) -> Option<&'a [u8]> {
        r.headers
            .iter()
            .find(|(k, _)| &**k == name)
            .and_then(|(_, v)| v.as_deref())
    }

    #[test]
    fn headers_say_why_and_where_from() {
        let letter = DeadLetter::refused(
            "too large",
            RefusedRecord {
                topic: "Order.events".into(),
                key: Some(Bytes::from_static(b"o-1")),
                event_id: Some(Bytes::from_static(b"e-1")),
                value: Some(Bytes::from_static(b"{}")),
                value_len: 2_000_000,
            }
            .oversized(),
            "public.outbox".into(),
            Some(Lsn::from_u64(0x1_0000_0010)),
        );
        let r = letter.to_record(&"dlq".into());
        assert_eq!(&*r.topic, "dlq");
        assert_eq!(r.key.as_deref(), Some(&b"o-1"[..]));
        assert_eq!(r.value, None);
        assert_eq!(
            r.headers[0].0.as_ref(),
            "id",
            "id first, as on event topics"
        );
        assert_eq!(header(&r, SOURCE_LSN), Some(&b"1/10"[..]));
        assert_eq!(header(&r, ORIGINAL_SIZE), Some(&b"2000000"[..]));
        assert_eq!(header(&r, ORIGINAL_TOPIC), Some(&b"Order.events"[..]));
        assert!(letter.without_payload("x").is_none(), "nothing left to cut");

        // Refused for something else than its size (a refused topic, a compacted topic and
        // no key): the payload is kept.
        let kept = DeadLetter::refused(
            "Broker: Policy violation",
            RefusedRecord {
                topic: "Order.events".into(),
                key: None,
                event_id: None,
                value: Some(Bytes::from_static(b"{\"n\": 1}")),
                value_len: 8,
            },
            "public.outbox".into(),
            None,
        );
        let r = kept.to_record(&"dlq".into());
        assert_eq!(r.value.as_deref(), Some(&b"{\"n\": 1}"[..]));
        assert_eq!(header(&r, ORIGINAL_SIZE), None);
    }

    /// A dead letter with its row: cut first to the row (still replayable), then to nothing
    /// of either, then there is nothing left to cut.
    #[test]
    fn a_refused_dead_letter_keeps_its_row_as_long_as_it_can() {
        let letter = DeadLetter {
            row: Some(Bytes::from_static(b"{\"payload\":\"{}\"}")),
            ..DeadLetter::from_invalid_row(
                InvalidRow {
                    reason: "NULL routing value".into(),
                    table: "public.outbox".into(),
                    original_topic: None,
                    key: None,
                    value: Some(Bytes::from_static(b"{}")),
                    event_id: None,
                    row: None,
                    connect_dlq: None,
                },
                None,
            )
        };
        let first = letter.without_payload("too large").unwrap();
        assert_eq!(first.value, None);
        assert!(first.row.is_some(), "the row stays: it can be replayed");
        let second = first.without_payload("too large").unwrap();
        assert_eq!(second.row, None);
        assert!(second.reason.contains("row left out"), "{}", second.reason);
        assert!(second.without_payload("too large").is_none());
    }

    #[test]
    fn rows_without_a_wal_position_carry_no_lsn_header_and_can_lose_their_payload() {
        let letter = DeadLetter::from_invalid_row(
            InvalidRow {
                reason: "NULL routing value".into(),
                table: "public.outbox".into(),
                original_topic: None,
                key: None,
                value: Some(Bytes::from_static(b"{\"big\": 1}")),
                event_id: None,
                row: Some(vec![
                    ("id".into(), Some(Bytes::from_static(b"e-1"))),
                    ("aggregate_type".into(), None),
                    ("payload".into(), Some(Bytes::from_static(b"{\"big\": 1}"))),
                ]),
                connect_dlq: None,
            },
            None,
        );
        let r = letter.to_record(&"dlq".into());
        assert_eq!(header(&r, SOURCE_LSN), None);
        assert_eq!(
            header(&r, SOURCE_ROW),
            Some(&br#"{"id":"e-1","aggregate_type":null,"payload":"{\"big\": 1}"}"#[..]),
            "the row, in column order, NULL as null"
        );
        let cut = letter
            .without_payload("the dead-letter topic refused it")
            .unwrap();
        let r = cut.to_record(&"dlq".into());
        assert_eq!(r.value, None);
        assert!(
            header(&r, SOURCE_ROW).is_some(),
            "the row stays, cut only if the topic refuses the dead letter again"
        );
        assert_eq!(header(&r, ORIGINAL_SIZE), Some(&b"10"[..]));
        assert!(std::str::from_utf8(header(&r, REASON).unwrap())
            .unwrap()
            .contains("payload left out"));
    }
}
