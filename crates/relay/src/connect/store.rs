//! Connector registrations kept as Kafka Connect's distributed mode keeps them
//! (`KafkaConfigBackingStore`): in the worker's `config.storage.topic` (one partition,
//! compacted, created when missing), keys `connector-<name>` → `{"properties":{…}}` and
//! `target-state-<name>` → `{"state":…,"state.v2":…}` as schemaless JSON, tombstones for
//! both on delete. A worker replays the topic at start, so registrations survive restarts
//! and a second worker with the same topic runs the same connectors (standing by for their
//! slots).

use super::herder::Target;
use crate::debezium::RawConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

pub struct ConfigTopic {
    topic: String,
    client: ClientConfig,
    producer: FutureProducer,
}

/// What the topic says about one connector.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Stored {
    pub config: Option<BTreeMap<String, String>>,
    pub target: Option<Target>,
}

impl ConfigTopic {
    /// The worker's config topic, created when missing; `None` without
    /// `config.storage.topic` (registrations then live in the process, as in standalone mode).
    pub async fn open(worker: &RawConfig) -> Result<Option<Self>, String> {
        let Some(topic) = worker.entries.get("config.storage.topic").cloned() else {
            return Ok(None);
        };
        let servers = worker
            .entries
            .get("bootstrap.servers")
            .ok_or("config.storage.topic needs bootstrap.servers in the worker config")?;
        let mut client = ClientConfig::new();
        client.set("bootstrap.servers", servers);
        let replication = match worker.entries.get("config.storage.replication.factor") {
            Some(v) => v
                .trim()
                .parse::<i32>()
                .map_err(|_| format!("config.storage.replication.factor: {v:?} is not a number"))?,
            None => -1,
        };
        let admin: AdminClient<DefaultClientContext> = client
            .create()
            .map_err(|e| format!("Kafka admin client: {e}"))?;
        let new = NewTopic::new(&topic, 1, TopicReplication::Fixed(replication))
            .set("cleanup.policy", "compact");
        let results = admin
            .create_topics(
                [&new],
                &AdminOptions::new().operation_timeout(Some(TIMEOUT)),
            )
            .await
            .map_err(|e| format!("creating {topic}: {e}"))?;
        for result in results {
            match result {
                Ok(_) => tracing::info!(%topic, "created the connector configuration topic"),
                Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code)) => return Err(format!("creating {topic}: {code}")),
            }
        }
        let producer: FutureProducer = client
            .clone()
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .create()
            .map_err(|e| format!("Kafka producer: {e}"))?;
        Ok(Some(Self {
            topic,
            client,
            producer,
        }))
    }

    /// Every connector the topic holds, replayed from the start to its end.
    pub async fn read(&self) -> Result<BTreeMap<String, Stored>, String> {
        let client = self.client.clone();
        let topic = self.topic.clone();
        tokio::task::spawn_blocking(move || read_blocking(&client, &topic))
            .await
            .map_err(|e| e.to_string())?
    }

    pub async fn put_config(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        let value = json!({ "properties": config }).to_string();
        self.send(&format!("connector-{name}"), Some(value)).await
    }

    pub async fn put_target(&self, name: &str, target: Target) -> Result<(), String> {
        // TARGET_STATE_V1: workers before KIP-875 read `state`, which has no STOPPED.
        let (state, v2) = match target {
            Target::Started => ("STARTED", "STARTED"),
            Target::Paused => ("PAUSED", "PAUSED"),
            Target::Stopped => ("PAUSED", "STOPPED"),
        };
        let value = json!({ "state": state, "state.v2": v2 }).to_string();
        self.send(&format!("target-state-{name}"), Some(value))
            .await
    }

    /// `removeConnectorConfig`: tombstones for the configuration and the target state.
    pub async fn delete(&self, name: &str) -> Result<(), String> {
        self.send(&format!("connector-{name}"), None).await?;
        self.send(&format!("target-state-{name}"), None).await
    }

    async fn send(&self, key: &str, value: Option<String>) -> Result<(), String> {
        let mut record = FutureRecord::<str, str>::to(&self.topic).key(key);
        if let Some(v) = &value {
            record = record.payload(v);
        }
        self.producer
            .send(record, TIMEOUT)
            .await
            .map(|_| ())
            .map_err(|(e, _)| format!("writing {key} to {}: {e}", self.topic))
    }
}

fn read_blocking(client: &ClientConfig, topic: &str) -> Result<BTreeMap<String, Stored>, String> {
    let consumer: BaseConsumer = client
        .clone()
        .set("group.id", "outbox-relay-connect-config-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .map_err(|e| format!("Kafka consumer: {e}"))?;
    let (low, high) = consumer
        .fetch_watermarks(topic, 0, TIMEOUT)
        .map_err(|e| format!("reading {topic}: {e}"))?;
    let mut stored: BTreeMap<String, Stored> = BTreeMap::new();
    if high <= low {
        return Ok(stored);
    }
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(low))
        .map_err(|e| e.to_string())?;
    consumer.assign(&assignment).map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                let key = message
                    .key()
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .unwrap_or_default();
                apply(&mut stored, &key, message.payload());
                if message.offset() + 1 >= high {
                    return Ok(stored);
                }
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => return Ok(stored),
            Some(Err(e)) => return Err(format!("reading {topic}: {e}")),
            None if std::time::Instant::now() > deadline => {
                return Err(format!("reading {topic}: no records within {TIMEOUT:?}"))
            }
            None => {}
        }
    }
}

/// One record of the config topic applied to what is known (other keys, such as task
/// configurations, are Connect's own bookkeeping and change nothing here).
fn apply(stored: &mut BTreeMap<String, Stored>, key: &str, value: Option<&[u8]>) {
    let json = value.and_then(|v| serde_json::from_slice::<serde_json::Value>(v).ok());
    if let Some(name) = key.strip_prefix("connector-") {
        let config = json
            .as_ref()
            .and_then(|j| j["properties"].as_object())
            .map(|p| {
                p.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                    .collect()
            });
        stored.entry(name.to_owned()).or_default().config = config;
    } else if let Some(name) = key.strip_prefix("target-state-") {
        let target = json.as_ref().and_then(|j| {
            let state = j["state.v2"].as_str().or_else(|| j["state"].as_str())?;
            match state {
                "STARTED" => Some(Target::Started),
                "PAUSED" => Some(Target::Paused),
                "STOPPED" => Some(Target::Stopped),
                _ => None,
            }
        });
        stored.entry(name.to_owned()).or_default().target = target;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KafkaConfigBackingStore's records, replayed: the latest value of each key wins, a
    /// tombstone removes, `state.v2` is preferred over `state`.
    #[test]
    fn replaying_the_config_topic() {
        let mut stored = BTreeMap::new();
        let records: &[(&str, Option<&str>)] = &[
            (
                "connector-a",
                Some(r#"{"properties":{"name":"a","x":"1"}}"#),
            ),
            (
                "target-state-a",
                Some(r#"{"state":"PAUSED","state.v2":"STOPPED"}"#),
            ),
            ("task-a-0", Some(r#"{"properties":{}}"#)),
            ("connector-b", Some(r#"{"properties":{"name":"b"}}"#)),
            ("connector-b", None),
            ("target-state-c", Some(r#"{"state":"PAUSED"}"#)),
        ];
        for (k, v) in records {
            apply(&mut stored, k, v.map(str::as_bytes));
        }
        assert_eq!(stored["a"].config.as_ref().unwrap()["x"], "1");
        assert_eq!(stored["a"].target, Some(Target::Stopped));
        assert_eq!(stored["b"].config, None);
        assert_eq!(stored["c"].target, Some(Target::Paused));
    }
}
