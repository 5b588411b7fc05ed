//! Connector registrations kept as Kafka Connect's distributed mode keeps them
//! (`KafkaConfigBackingStore`): in the worker's `config.storage.topic` (one partition,
//! compacted, created when missing), keys `connector-<name>` → `{"properties":{…}}` and
//! `target-state-<name>` → `{"state":…,"state.v2":…}` as schemaless JSON, tombstones for
//! both on delete. A worker replays the topic at start, so registrations survive restarts,
//! and then follows it: a second worker with the same topic runs the same connectors
//! (standing by for their slots) and applies the changes made through the other one as
//! they arrive.

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a connector should be doing (Connect's `TargetState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Started,
    Paused,
    Stopped,
}

const TIMEOUT: Duration = Duration::from_secs(30);

pub struct ConfigTopic {
    topic: String,
    client: ClientConfig,
    producer: FutureProducer,
    /// Records this worker wrote and has not read back yet, per key, in the order written.
    own: Echoes,
}

/// The values this worker wrote under each key and has not read back yet. Reading the
/// topic back, a record is this worker's own when it is the first of them; a record of
/// another worker found while some of ours under the same key are still to come precedes
/// them in the topic (one partition), so ours win and it changes nothing.
#[derive(Default)]
struct Echoes(Mutex<HashMap<String, VecDeque<Option<Vec<u8>>>>>);

impl Echoes {
    fn wrote(&self, key: &str, value: Option<&[u8]>) {
        let mut own = self.0.lock().unwrap();
        own.entry(key.to_owned())
            .or_default()
            .push_back(value.map(<[u8]>::to_vec));
    }

    /// The write failed: it will not come back.
    fn unwrote(&self, key: &str) {
        let mut own = self.0.lock().unwrap();
        if let Some(queue) = own.get_mut(key) {
            queue.pop_back();
            if queue.is_empty() {
                own.remove(key);
            }
        }
    }

    /// Whether the record read back decides anything: false for this worker's own writes
    /// but the latest, and for another's that one of ours overrides.
    fn decides(&self, key: &str, value: Option<&[u8]>) -> bool {
        let mut own = self.0.lock().unwrap();
        let Some(queue) = own.get_mut(key) else {
            return true;
        };
        if queue.front().map(Option::as_deref) == Some(value) {
            queue.pop_front();
        }
        if queue.is_empty() {
            own.remove(key);
            true
        } else {
            false
        }
    }
}

/// What librdkafka says when a client of `client`'s settings asks the brokers for metadata (a
/// refused login, an unknown host): an admin client serves no such events itself.
async fn why_no_answer(client: &ClientConfig) -> String {
    let client = client.clone();
    tokio::task::spawn_blocking(move || {
        let errors = ClientErrors::default();
        let consumer: BaseConsumer<ClientErrors> = match client
            .clone()
            .set("log_level", "4")
            .create_with_context(errors.clone())
        {
            Ok(c) => c,
            Err(e) => return format!(" ({e})"),
        };
        let metadata = consumer.fetch_metadata(None, Duration::from_secs(10));
        for _ in 0..10 {
            let _ = consumer.poll(Duration::from_millis(100));
        }
        match (errors.said(), metadata) {
            (said, _) if !said.is_empty() => said,
            (_, Err(e)) => format!(" ({e})"),
            (_, Ok(_)) => String::new(),
        }
    })
    .await
    .unwrap_or_default()
}

/// The last error librdkafka reported for a client (a refused login, no broker), to say why
/// an operation got no answer.
#[derive(Clone, Default)]
struct ClientErrors(Arc<Mutex<Option<String>>>);

impl ClientErrors {
    fn said(&self) -> String {
        match self.0.lock().unwrap().as_deref() {
            Some(error) => format!(
                " ({error}; check the worker's security.protocol, sasl.* and ssl.* settings)"
            ),
            None => String::new(),
        }
    }
}

impl ConsumerContext for ClientErrors {}

impl rdkafka::client::ClientContext for ClientErrors {
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        tracing::warn!("config topic client: {error}: {reason}");
        *self.0.lock().unwrap() = Some(format!("{error}: {reason}"));
    }

    /// A refused login is logged by librdkafka, not reported as an error.
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel as Level;
        if matches!(
            level,
            Level::Emerg | Level::Alert | Level::Critical | Level::Error | Level::Warning
        ) {
            tracing::warn!("config topic client: {facility}: {message}");
            *self.0.lock().unwrap() = Some(message.to_owned());
        }
    }
}

/// A change the topic brought: apply the connector's configuration, its target state, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decides {
    pub config: bool,
    pub target: bool,
}

/// What a worker applies the topic's changes to (the herder).
pub trait Follower: Send + Sync + 'static {
    fn changed(&self, name: &str, stored: &Stored, decides: Decides);
    /// A restart request (`POST …/restart` through any worker), for the worker that runs
    /// the connector.
    fn restart_requested(&self, name: &str, only_failed: bool);
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
    /// Its clients are `client`, the worker's own (`debezium::worker_client`: its
    /// `security.protocol`, `sasl.*` and `ssl.*`, as Connect's internal clients take them).
    pub async fn open(
        worker: &BTreeMap<String, String>,
        client: Option<&ClientConfig>,
    ) -> Result<Option<Self>, String> {
        let Some(topic) = worker.get("config.storage.topic").cloned() else {
            return Ok(None);
        };
        let client = client
            .cloned()
            .ok_or("config.storage.topic needs bootstrap.servers in the worker config")?;
        let replication = match worker.get("config.storage.replication.factor") {
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
        // librdkafka retries a refused login for as long as the request may wait: the
        // worker stops with what the brokers said instead of waiting in silence.
        let options = AdminOptions::new()
            .operation_timeout(Some(TIMEOUT))
            .request_timeout(Some(TIMEOUT));
        let created = tokio::time::timeout(TIMEOUT, admin.create_topics([&new], &options)).await;
        let results = match created {
            Ok(Ok(results)) => results,
            Ok(Err(e)) => {
                return Err(format!(
                    "creating {topic}: {e}{}",
                    why_no_answer(&client).await
                ))
            }
            Err(_) => {
                return Err(format!(
                    "creating {topic}: no answer from {} within {} s{}",
                    client.get("bootstrap.servers").unwrap_or_default(),
                    TIMEOUT.as_secs(),
                    why_no_answer(&client).await
                ))
            }
        };
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
            own: Echoes::default(),
        }))
    }

    /// Every connector the topic holds, replayed from the start to its end, and the offset
    /// the topic ended at.
    pub async fn read(&self) -> Result<(BTreeMap<String, Stored>, i64), String> {
        let client = self.client.clone();
        let topic = self.topic.clone();
        tokio::task::spawn_blocking(move || read_blocking(&client, &topic))
            .await
            .map_err(|e| e.to_string())?
    }

    /// Reads the topic on from `offset` on a thread of its own until `stop`, folding each
    /// record into `known` and telling `follower` what another worker changed.
    pub fn follow(
        self: &Arc<Self>,
        mut known: BTreeMap<String, Stored>,
        offset: i64,
        follower: Arc<dyn Follower>,
        stop: Arc<AtomicBool>,
    ) -> Result<std::thread::JoinHandle<()>, String> {
        let consumer = consumer(&self.client)?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&self.topic, 0, Offset::Offset(offset))
            .map_err(|e| e.to_string())?;
        consumer.assign(&assignment).map_err(|e| e.to_string())?;
        let this = self.clone();
        std::thread::Builder::new()
            .name("config-topic".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match consumer.poll(Duration::from_millis(200)) {
                        Some(Ok(message)) => {
                            let key = message
                                .key()
                                .map(|k| String::from_utf8_lossy(k).into_owned())
                                .unwrap_or_default();
                            if let Some(name) = key.strip_prefix(RESTART_PREFIX) {
                                // Connect's restart request (KIP-745), written since this
                                // worker started: applied by the worker that runs it.
                                let only_failed = message
                                    .payload()
                                    .and_then(|v| {
                                        serde_json::from_slice::<serde_json::Value>(v).ok()
                                    })
                                    .and_then(|j| j["only-failed"].as_bool())
                                    .unwrap_or(false);
                                follower.restart_requested(name, only_failed);
                                continue;
                            }
                            if let Some(namespace) = key.strip_prefix(LOGGER_PREFIX) {
                                // A cluster-wide log level (KIP-976), this worker's own too;
                                // those written before it started are not applied.
                                set_logger_level(namespace, message.payload());
                                continue;
                            }
                            let Some(name) = apply(&mut known, &key, message.payload()) else {
                                continue;
                            };
                            if !this.own.decides(&key, message.payload()) {
                                continue;
                            }
                            let decides = Decides {
                                config: key.starts_with("connector-"),
                                target: key.starts_with("target-state-"),
                            };
                            follower.changed(&name, &known[&name], decides);
                        }
                        Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) | None => {}
                        Some(Err(e)) => {
                            tracing::warn!(topic = %this.topic, "reading the config topic: {e}")
                        }
                    }
                }
            })
            .map_err(|e| e.to_string())
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

    /// `PUT /admin/loggers/{namespace}?scope=cluster`: every worker following the topic
    /// (this one too) sets the level when it reads the record.
    pub async fn put_logger_level(&self, namespace: &str, level: &str) -> Result<(), String> {
        let value = json!({ "level": level }).to_string();
        self.send(&format!("{LOGGER_PREFIX}{namespace}"), Some(value))
            .await
    }

    /// `POST …/restart` for a connector another worker runs: a restart request record
    /// (`restart-connector-<name>`, as Connect writes it), which that worker applies.
    pub async fn put_restart(&self, name: &str, only_failed: bool) -> Result<(), String> {
        let value = json!({ "include-tasks": true, "only-failed": only_failed }).to_string();
        self.send(&format!("{RESTART_PREFIX}{name}"), Some(value))
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
        // Log levels and restart requests are applied when read back, this worker's own
        // too: not echoes.
        let echoed = !key.starts_with(LOGGER_PREFIX) && !key.starts_with(RESTART_PREFIX);
        if echoed {
            self.own.wrote(key, value.as_deref().map(str::as_bytes));
        }
        let sent = self
            .producer
            .send(record, TIMEOUT)
            .await
            .map(|_| ())
            .map_err(|(e, _)| format!("writing {key} to {}: {e}", self.topic));
        if sent.is_err() && echoed {
            self.own.unwrote(key);
        }
        sent
    }
}

const LOGGER_PREFIX: &str = "logger-cluster-";
const RESTART_PREFIX: &str = "restart-connector-";

fn set_logger_level(namespace: &str, value: Option<&[u8]>) {
    let level = value
        .and_then(|v| serde_json::from_slice::<serde_json::Value>(v).ok())
        .and_then(|j| {
            j["level"]
                .as_str()
                .and_then(crate::ops::loggers::parse_level)
        });
    match level {
        Some(level) => {
            crate::ops::loggers::set(namespace, level);
        }
        None => tracing::warn!(
            namespace,
            "config topic: a cluster log level that is not one"
        ),
    }
}

fn consumer(client: &ClientConfig) -> Result<BaseConsumer, String> {
    // Assigned, never subscribed: the group id commits nothing and balances nothing.
    client
        .clone()
        .set("group.id", "outbox-relay-connect-config-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .map_err(|e| format!("Kafka consumer: {e}"))
}

fn read_blocking(
    client: &ClientConfig,
    topic: &str,
) -> Result<(BTreeMap<String, Stored>, i64), String> {
    let consumer = consumer(client)?;
    let (low, high) = consumer
        .fetch_watermarks(topic, 0, TIMEOUT)
        .map_err(|e| format!("reading {topic}: {e}"))?;
    let mut stored: BTreeMap<String, Stored> = BTreeMap::new();
    if high <= low {
        return Ok((stored, high));
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
                    return Ok((stored, high));
                }
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => return Ok((stored, high)),
            Some(Err(e)) => return Err(format!("reading {topic}: {e}")),
            None if std::time::Instant::now() > deadline => {
                return Err(format!("reading {topic}: no records within {TIMEOUT:?}"))
            }
            None => {}
        }
    }
}

/// One record of the config topic applied to what is known (other keys, such as task
/// configurations, are Connect's own bookkeeping and change nothing here): the connector
/// it is about, if any.
fn apply(stored: &mut BTreeMap<String, Stored>, key: &str, value: Option<&[u8]>) -> Option<String> {
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
        Some(name.to_owned())
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
        Some(name.to_owned())
    } else {
        None
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

    /// Reading back: this worker's own records change nothing until its latest under a key;
    /// another worker's record that one of ours follows in the topic changes nothing either.
    #[test]
    fn own_records_read_back() {
        let own = Echoes::default();
        assert!(own.decides("k", Some(b"other")), "nothing of ours pending");
        own.wrote("k", Some(b"a"));
        own.wrote("k", Some(b"b"));
        assert!(!own.decides("k", Some(b"a")), "ours, a later one pending");
        assert!(
            !own.decides("k", Some(b"x")),
            "another's, before our pending b"
        );
        assert!(
            own.decides("k", Some(b"b")),
            "our latest: applies (a no-op)"
        );
        assert!(own.decides("k", Some(b"y")), "another's, after ours");
        own.wrote("k", None);
        own.unwrote("k");
        assert!(
            own.decides("k", Some(b"z")),
            "a failed write never comes back"
        );
    }
}
