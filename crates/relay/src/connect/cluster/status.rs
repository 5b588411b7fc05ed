//! Connector and task states kept as Kafka Connect's `KafkaStatusBackingStore` keeps them,
//! in the worker's `status.storage.topic` (compacted): keys `status-connector-<name>` and
//! `status-task-<name>-<task>`, values `{"state":…,"trace":…,"worker_id":…,"generation":…}`
//! as schemaless JSON, tombstones when a task goes; and each connector's active topics
//! (`status-topic-<topic>:connector-<connector>` →
//! `{"topic":{"name","connector","task","discoverTimestamp"}}`).
//! The worker running a connector writes them; every worker reads the topic, so that each
//! answers `GET …/status` and `GET …/topics` with the cluster's one truth.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// One state as Connect writes it (`KafkaStatusBackingStore.serialize`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    pub state: String,
    pub trace: Option<String>,
    pub worker_id: String,
    pub generation: i32,
}

pub fn connector_key(name: &str) -> String {
    format!("status-connector-{name}")
}

pub fn task_key(name: &str, task: u32) -> String {
    format!("status-task-{name}-{task}")
}

/// Connect's key of an active topic (`KafkaStatusBackingStore.TOPIC_STATUS_PREFIX` and
/// `TOPIC_STATUS_SEPARATOR`).
pub fn topic_key(topic: &str, connector: &str) -> String {
    format!("status-topic-{topic}:connector-{connector}")
}

/// Connect's `TopicStatus` record of a topic a connector wrote to.
pub fn topic_value(topic: &str, connector: &str, discovered_ms: i64) -> String {
    serde_json::json!({
        "topic": {
            "name": topic,
            "connector": connector,
            "task": 0,
            "discoverTimestamp": discovered_ms,
        }
    })
    .to_string()
}

/// What the topic holds: states by key, and active topics by key (topic, connector).
#[derive(Default)]
struct View {
    states: BTreeMap<String, Written>,
    topics: BTreeMap<String, (String, String)>,
}

pub struct StatusTopic {
    topic: String,
    producer: FutureProducer,
    client: ClientConfig,
    view: Arc<Mutex<View>>,
    /// Told, as the topic is read, of each connector whose active topics were reset.
    on_reset: Arc<std::sync::OnceLock<ResetHook>>,
}

/// What is told of a connector whose active topics were reset.
pub type ResetHook = Box<dyn Fn(&str) + Send + Sync>;

impl StatusTopic {
    /// The topic, created when missing (`status.storage.partitions`, default 5, and
    /// `status.storage.replication.factor`, as Connect creates it).
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
            client: client.clone(),
            view: Arc::default(),
            on_reset: Arc::default(),
        })
    }

    /// Reads the topic from its start on a thread of its own until `stop`.
    pub fn follow(&self, stop: Arc<AtomicBool>) -> Result<std::thread::JoinHandle<()>, String> {
        let consumer: BaseConsumer = self
            .client
            .clone()
            .set("group.id", "outbox-relay-connect-status-reader")
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| format!("Kafka consumer: {e}"))?;
        let metadata = consumer
            .fetch_metadata(Some(&self.topic), TIMEOUT)
            .map_err(|e| format!("reading {}: {e}", self.topic))?;
        let partitions = metadata
            .topics()
            .first()
            .map(|t| t.partitions().len())
            .unwrap_or(0);
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            assignment
                .add_partition_offset(&self.topic, p as i32, Offset::Beginning)
                .map_err(|e| e.to_string())?;
        }
        consumer.assign(&assignment).map_err(|e| e.to_string())?;
        let view = self.view.clone();
        let on_reset = self.on_reset.clone();
        let topic = self.topic.clone();
        std::thread::Builder::new()
            .name("status-topic".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match consumer.poll(Duration::from_millis(200)) {
                        Some(Ok(message)) => {
                            let Some(key) = message.key() else { continue };
                            let key = String::from_utf8_lossy(key).into_owned();
                            let reset = message
                                .payload()
                                .is_none()
                                .then(|| key.strip_prefix("status-topic-"))
                                .flatten()
                                .and_then(|k| k.rsplit_once(":connector-"))
                                .map(|(_, connector)| connector.to_owned());
                            apply(&mut view.lock().unwrap(), key, message.payload());
                            if let (Some(connector), Some(hook)) = (reset, on_reset.get()) {
                                hook(&connector);
                            }
                        }
                        Some(Err(e)) => tracing::warn!(%topic, "reading the status topic: {e}"),
                        None => {}
                    }
                }
            })
            .map_err(|e| e.to_string())
    }

    /// What to do when a connector's active topics are reset (set once).
    pub fn on_topics_reset(&self, hook: ResetHook) {
        let _ = self.on_reset.set(hook);
    }

    pub fn get(&self, key: &str) -> Option<Written> {
        self.view.lock().unwrap().states.get(key).cloned()
    }

    /// The topics `connector` wrote to, as recorded by whichever worker ran it.
    pub fn topics_of(&self, connector: &str) -> Vec<String> {
        self.view
            .lock()
            .unwrap()
            .topics
            .values()
            .filter(|(_, c)| c == connector)
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Writes a state (`None`: a tombstone).
    pub async fn put(&self, key: &str, value: Option<&Written>) -> Result<(), String> {
        let body = value.map(|v| serde_json::to_string(v).expect("plain data serializes"));
        self.put_raw(key, body).await
    }

    /// Writes a record as it is (`None`: a tombstone).
    pub async fn put_raw(&self, key: &str, body: Option<String>) -> Result<(), String> {
        let mut record = FutureRecord::<str, str>::to(&self.topic).key(key);
        if let Some(b) = &body {
            record = record.payload(b);
        }
        self.producer
            .send(record, TIMEOUT)
            .await
            .map(|_| ())
            .map_err(|(e, _)| format!("writing {key} to {}: {e}", self.topic))
    }
}

/// One record folded into the view: the latest under each key, as Connect reads the topic.
/// (Generations restart with a new group: a writer that no longer runs a connector does not
/// write its state, rather than readers ignoring it.)
fn apply(view: &mut View, key: String, value: Option<&[u8]>) {
    if key.starts_with("status-topic-") {
        let topic = value
            .and_then(|v| serde_json::from_slice::<serde_json::Value>(v).ok())
            .and_then(|j| {
                let t = &j["topic"];
                Some((
                    t["name"].as_str()?.to_owned(),
                    t["connector"].as_str()?.to_owned(),
                ))
            });
        match topic {
            Some(t) => {
                view.topics.insert(key, t);
            }
            None => {
                view.topics.remove(&key);
            }
        }
        return;
    }
    let view = &mut view.states;
    let Some(value) = value else {
        view.remove(&key);
        return;
    };
    let Ok(written) = serde_json::from_slice::<Written>(value) else {
        return;
    };
    view.insert(key, written);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(state: &str, worker: &str, generation: i32) -> Vec<u8> {
        serde_json::to_vec(&Written {
            state: state.into(),
            trace: None,
            worker_id: worker.into(),
            generation,
        })
        .unwrap()
    }

    #[test]
    fn the_latest_record_under_a_key_wins() {
        let mut all = View::default();
        let view = &mut all;
        let key = connector_key("c");
        apply(view, key.clone(), Some(&w("RUNNING", "a", 30)));
        // A new group's first generation.
        apply(view, key.clone(), Some(&w("RUNNING", "b", 1)));
        assert_eq!(view.states[&key].worker_id, "b");
        apply(view, key.clone(), Some(&w("PAUSED", "b", 5)));
        assert_eq!(view.states[&key].state, "PAUSED");
        apply(view, key.clone(), None);
        assert!(!view.states.contains_key(&key));
    }

    #[test]
    fn active_topics_as_connect_records_them() {
        let mut view = View::default();
        let key = topic_key("Order.events", "c");
        apply(
            &mut view,
            key.clone(),
            Some(topic_value("Order.events", "c", 1).as_bytes()),
        );
        assert_eq!(
            view.topics[&key],
            ("Order.events".to_owned(), "c".to_owned())
        );
        apply(&mut view, key.clone(), None);
        assert!(view.topics.is_empty());
    }

    #[test]
    fn connects_record_is_read() {
        let mut view = View::default();
        apply(
            &mut view,
            task_key("c", 0),
            Some(
                br#"{"state":"FAILED","trace":"boom","worker_id":"10.0.0.1:8083","generation":7}"#,
            ),
        );
        assert_eq!(
            view.states["status-task-c-0"].trace.as_deref(),
            Some("boom")
        );
    }
}
