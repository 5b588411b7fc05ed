//! Debezium's offsets written to the worker's `offset.storage.topic` as Kafka Connect's
//! `OffsetStorageWriter` writes them: key `["<connector>",{"server":"<topic.prefix>"}]`,
//! value `{"lsn":…,"lsn_proc":…,"lsn_commit":…}` (`PostgresOffsetContext`'s keys), both
//! schemaless JSON, every `offset.flush.interval.ms`. A tool that reads the topic sees what
//! it saw under Debezium. The relay itself resumes from its slot: the slot stays the source
//! of truth, and the topic is never read back.

use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

pub struct OffsetTopic {
    topic: String,
    producer: FutureProducer,
    /// The last position written per connector.
    written: Mutex<BTreeMap<String, u64>>,
}

/// Connect's key of a connector's source partition.
pub fn key(connector: &str, server: &str) -> String {
    json!([connector, { "server": server }]).to_string()
}

pub fn value(lsn: u64) -> String {
    json!({ "lsn": lsn, "lsn_proc": lsn, "lsn_commit": lsn }).to_string()
}

impl OffsetTopic {
    /// The topic, created when missing (`offset.storage.partitions`, default 25, and
    /// `offset.storage.replication.factor`).
    pub async fn open(
        client: &ClientConfig,
        topic: &str,
        partitions: i32,
        replication: i32,
    ) -> Result<Self, String> {
        let producer =
            super::compacted_topic_writer(client, topic, partitions, replication).await?;
        Ok(Self {
            topic: topic.to_owned(),
            producer,
            written: Mutex::default(),
        })
    }

    /// Writes each `(connector, server, confirmed LSN)` that moved since it was last written.
    pub async fn flush(&self, positions: Vec<(String, String, u64)>) {
        for (connector, server, lsn) in positions {
            if self.written.lock().unwrap().get(&connector) == Some(&lsn) {
                continue;
            }
            let key = key(&connector, &server);
            let value = value(lsn);
            let record = FutureRecord::to(&self.topic).key(&key).payload(&value);
            match self.producer.send(record, Duration::from_secs(30)).await {
                Ok(_) => {
                    self.written.lock().unwrap().insert(connector, lsn);
                }
                Err((e, _)) => {
                    tracing::warn!(topic = %self.topic, "writing {connector}'s offset: {e}")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connects_offset_record() {
        assert_eq!(
            key("inventory", "dbserver1"),
            r#"["inventory",{"server":"dbserver1"}]"#
        );
        assert_eq!(value(42), r#"{"lsn":42,"lsn_proc":42,"lsn_commit":42}"#);
    }
}
