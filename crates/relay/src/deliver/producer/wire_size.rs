//! Record sizes as the two limits count them: the broker's (`max.message.bytes`, a record
//! alone in its batch) and librdkafka's (`message.max.bytes`). Hand-written because no crate
//! exposes either count, and a refused record must be judged before it is sent: the broker
//! refuses a whole batch for one record, its neighbours included.

use outbox_router::OutboxRecord;

/// A record's size on the wire when it travels alone in a record batch (format v2,
/// uncompressed): what Kafka compares with the topic's `max.message.bytes`
/// (`batch.sizeInBytes()`). Alone in its batch, its offset and timestamp deltas are 0.
pub fn record_wire_size(record: &OutboxRecord) -> usize {
    const BATCH_HEADER: usize = 61;
    let bytes = |b: Option<usize>| varint_size(b.map_or(-1, |n| n as i64)) + b.unwrap_or(0);
    let key = bytes(record.key.as_ref().map(|k| k.len()));
    let value = bytes(record.value.as_ref().map(|v| v.len()));
    let headers: usize = record
        .headers
        .iter()
        .map(|(k, v)| bytes(Some(k.len())) + bytes(v.as_ref().map(|v| v.len())))
        .sum();
    // attributes, timestamp delta 0, offset delta 0, key, value, header count, headers.
    let body = 1 + 1 + 1 + key + value + varint_size(record.headers.len() as i64) + headers;
    BATCH_HEADER + varint_size(body as i64) + body
}

/// What librdkafka compares with the producer's `message.max.bytes` before accepting a record
/// (`rd_kafka_msg_new0`: `RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD` + key + value + serialized headers).
pub fn librdkafka_message_size(record: &OutboxRecord) -> usize {
    const MAX_OVERHEAD: usize = 36;
    let headers: usize = record
        .headers
        .iter()
        .map(|(k, v)| {
            let value = v.as_ref().map_or(0, |v| v.len());
            k.len()
                + value
                + varint_size(k.len() as i64)
                + varint_size(v.as_ref().map_or(-1, |v| v.len() as i64))
        })
        .sum();
    MAX_OVERHEAD
        + record.key.as_ref().map_or(0, |k| k.len())
        + record.value.as_ref().map_or(0, |v| v.len())
        + headers
}

/// Bytes of Kafka's zig-zag varint of `n`.
fn varint_size(n: i64) -> usize {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    let mut size = 1;
    while v >= 0x80 {
        v >>= 7;
        size += 1;
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn a_record_alone_in_a_batch_has_the_size_kafka_checks() {
        // A v2 batch holding one record of 3 B key, 1000 B value and header id=abc is
        // 61 (batch header) + 2 (length) + 1 + 1 + 1 + 1 + 3 + 2 + 1000 + 1 + 1 + 2 + 1 + 3 = 1080 B;
        let record = OutboxRecord {
            topic: "t".into(),
            key: Some(Bytes::from_static(b"key")),
            value: Some(Bytes::from(vec![0u8; 1000])),
            headers: vec![("id".into(), Some(Bytes::from_static(b"abc")))],
            partition: None,
            timestamp_ms: None,
        };
        assert_eq!(record_wire_size(&record), 1080);
        let tombstone = OutboxRecord {
            value: None,
            ..record
        };
        // value length -1 (1 byte) and no value; the record length now fits one byte:
        // 61 + 1 + (1 + 1 + 1 + 1 + 3 + 1 + 1 + 1 + 2 + 1 + 3) = 78.
        assert_eq!(record_wire_size(&tombstone), 78);
    }
}
