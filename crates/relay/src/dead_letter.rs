//! What a dead-lettered row looks like on the dead-letter topic: the original key and
//! payload bytes, the event id, and headers that say why and where from.

use crate::postgres::format_lsn;
use outbox_router::InvalidRow;
use rdkafka::message::{Header, OwnedHeaders};

pub const REASON: &str = "outbox-relay.error.reason";
pub const SOURCE_TABLE: &str = "outbox-relay.source.table";
pub const SOURCE_LSN: &str = "outbox-relay.source.lsn";
pub const ORIGINAL_TOPIC: &str = "outbox-relay.original.topic";

pub fn dead_letter_headers(row: &InvalidRow, lsn: u64) -> OwnedHeaders {
    let lsn = format_lsn(lsn);
    let mut headers = OwnedHeaders::new_with_capacity(5);
    if let Some(id) = &row.event_id {
        headers = headers.insert(Header {
            key: "id",
            value: Some(&id[..]),
        });
    }
    headers = headers
        .insert(Header {
            key: REASON,
            value: Some(row.reason.as_bytes()),
        })
        .insert(Header {
            key: SOURCE_TABLE,
            value: Some(row.table.as_bytes()),
        })
        .insert(Header {
            key: SOURCE_LSN,
            value: Some(lsn.as_bytes()),
        });
    if let Some(topic) = &row.original_topic {
        headers = headers.insert(Header {
            key: ORIGINAL_TOPIC,
            value: Some(topic.as_bytes()),
        });
    }
    headers
}
