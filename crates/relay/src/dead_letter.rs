//! What a dead-lettered event looks like on the dead-letter topic: the original key, the
//! original payload when it fits, the event id, and headers that say why and where from.

use crate::postgres::format_lsn;
use crate::sink::RejectedRecord;
use bytes::Bytes;
use outbox_router::{InvalidRow, OutboxRecord};
use rdkafka::message::{Header, OwnedHeaders};

pub const REASON: &str = "outbox-relay.error.reason";
pub const SOURCE_TABLE: &str = "outbox-relay.source.table";
pub const SOURCE_LSN: &str = "outbox-relay.source.lsn";
pub const ORIGINAL_TOPIC: &str = "outbox-relay.original.topic";
pub const ORIGINAL_SIZE: &str = "outbox-relay.original.size";

/// An event that goes to the dead-letter topic instead of its own.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub reason: String,
    pub table: String,
    pub original_topic: Option<String>,
    pub key: Option<Bytes>,
    /// `None` when the payload itself is the problem (too large to produce).
    pub value: Option<Bytes>,
    pub event_id: Option<Bytes>,
    /// Size of a payload that was left out.
    pub original_size: Option<usize>,
    /// WAL position of the row; 0 in polling mode (no header is written then).
    pub lsn: u64,
}

impl DeadLetter {
    pub fn from_invalid_row(row: InvalidRow, lsn: u64) -> Self {
        Self {
            reason: row.reason,
            table: row.table,
            original_topic: row.original_topic,
            key: row.key,
            value: row.value,
            event_id: row.event_id,
            original_size: None,
            lsn,
        }
    }

    /// The broker refused `record` itself (too large, invalid): retrying cannot help.
    pub fn refused_by_broker(error: &str, record: RejectedRecord, table: String, lsn: u64) -> Self {
        Self {
            reason: format!("the broker refused the event: {error}"),
            table,
            original_topic: Some(record.topic),
            key: record.key,
            value: None,
            event_id: record.event_id,
            original_size: Some(record.value_len),
            lsn,
        }
    }

    /// The producer refused `record` before sending it (`reason` says why, e.g. its size).
    pub fn rejected_by_producer(
        reason: String,
        record: &OutboxRecord,
        table: String,
        lsn: u64,
    ) -> Self {
        Self {
            reason,
            table,
            original_topic: Some(record.topic.to_string()),
            key: record.key.clone(),
            value: None,
            event_id: record
                .headers
                .iter()
                .find(|(k, _)| &**k == "id")
                .map(|(_, v)| v.clone()),
            original_size: Some(record.value.as_ref().map_or(0, |v| v.len())),
            lsn,
        }
    }

    pub fn headers(&self) -> OwnedHeaders {
        let lsn = format_lsn(self.lsn);
        let size = self.original_size.map(|s| s.to_string());
        let mut headers = OwnedHeaders::new_with_capacity(6);
        if let Some(id) = &self.event_id {
            headers = headers.insert(Header {
                key: "id",
                value: Some(&id[..]),
            });
        }
        headers = headers
            .insert(Header {
                key: REASON,
                value: Some(self.reason.as_bytes()),
            })
            .insert(Header {
                key: SOURCE_TABLE,
                value: Some(self.table.as_bytes()),
            });
        // Polling mode reads rows with SQL: they have no WAL position (lsn 0).
        if self.lsn != 0 {
            headers = headers.insert(Header {
                key: SOURCE_LSN,
                value: Some(lsn.as_bytes()),
            });
        }
        if let Some(topic) = &self.original_topic {
            headers = headers.insert(Header {
                key: ORIGINAL_TOPIC,
                value: Some(topic.as_bytes()),
            });
        }
        if let Some(size) = &size {
            headers = headers.insert(Header {
                key: ORIGINAL_SIZE,
                value: Some(size.as_bytes()),
            });
        }
        headers
    }
}
