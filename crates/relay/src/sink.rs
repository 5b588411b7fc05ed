//! The Kafka side: an idempotent `acks=all` producer and the topics it writes to.
//!
//! Durability contract: [`KafkaSink::send`] only *accepts* a record; it is durable when
//! its [`Delivery`] future resolves `Ok`. Only then may the acknowledgement tracker count
//! it (see `ack.rs`).

use crate::error::RelayError;
use anyhow::anyhow;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use outbox_router::OutboxRecord;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::ClientConfig;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Resolves when Kafka acknowledged (Ok) or definitively failed (Err) one record.
pub type Delivery = BoxFuture<'static, Result<(), DeliveryFailure>>;

pub enum SendOutcome {
    Accepted(Delivery),
    /// The producer's queue is full: wait for a delivery, then send the same record again.
    QueueFull,
    /// The record itself can never be produced (larger than `message.max.bytes`): a data
    /// error, for the dead-letter topic. The reason says why.
    Rejected(String),
}

#[derive(Debug)]
pub struct DeliveryFailure {
    pub error: String,
    /// Set when the broker refused the record for what it is (too large, invalid):
    /// retrying cannot help, so it is dead-lettered. `None`: a transient failure.
    pub rejected: Option<RejectedRecord>,
}

/// What is kept of a record the broker refused, for its dead letter.
#[derive(Debug)]
pub struct RejectedRecord {
    pub topic: String,
    pub key: Option<Bytes>,
    pub event_id: Option<Bytes>,
    pub value_len: usize,
}

/// The producer properties that say how to reach and authenticate to the cluster
/// (security.*, sasl.*, ssl.*): what every other Kafka client of the relay needs too.
pub fn security_properties(properties: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    properties
        .iter()
        .filter(|(k, _)| {
            k.starts_with("security.") || k.starts_with("sasl.") || k.starts_with("ssl.")
        })
        .map(|(k, v)| (k.as_str(), v.as_str()))
}

/// Errors about the record itself, not the path to the broker.
fn is_data_error(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidMessage
    )
}

fn delivery_failure(error: KafkaError, message: OwnedMessage) -> DeliveryFailure {
    let rejected = error
        .rdkafka_error_code()
        .filter(|c| is_data_error(*c))
        .map(|_| RejectedRecord {
            topic: message.topic().to_owned(),
            key: message.key().map(Bytes::copy_from_slice),
            event_id: message.headers().and_then(|h| {
                h.iter()
                    .find(|h| h.key == "id")
                    .and_then(|h| h.value.map(Bytes::copy_from_slice))
            }),
            value_len: message.payload().map_or(0, |p| p.len()),
        });
    DeliveryFailure {
        error: error.to_string(),
        rejected,
    }
}

pub struct KafkaSink {
    producer: FutureProducer,
    admin: AdminClient<DefaultClientContext>,
    known_topics: HashSet<Arc<str>>,
    partitions: i32,
    replication_factor: i32,
}

pub struct SinkSettings<'a> {
    pub bootstrap_servers: &'a str,
    pub max_in_flight: usize,
    pub topic_partitions: i32,
    pub topic_replication_factor: i32,
    pub producer_properties: &'a [(String, String)],
}

impl KafkaSink {
    pub fn new(s: &SinkSettings<'_>) -> Result<Self, RelayError> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", s.bootstrap_servers)
            .set("client.id", "outbox-relay")
            // Idempotence implies acks=all, in-order retries and no duplicates from retries.
            .set("enable.idempotence", "true")
            .set("acks", "all")
            // Same partitions as Java clients (Kafka Connect / Debezium) for the same key.
            .set("partitioner", "murmur2_random")
            // The relay creates topics itself, with the configured partitions.
            .set("allow.auto.create.topics", "false")
            .set("linger.ms", "5")
            .set(
                "queue.buffering.max.messages",
                s.max_in_flight.clamp(1, 10_000_000).to_string(),
            )
            .set("queue.buffering.max.kbytes", "1048576")
            .set("log_level", "4");
        for (k, v) in s.producer_properties {
            config.set(k, v);
        }
        let producer: FutureProducer = config
            .create()
            .map_err(|e| RelayError::Fatal(anyhow!("Kafka producer settings rejected: {e}")))?;
        let mut admin_config = ClientConfig::new();
        admin_config.set("bootstrap.servers", s.bootstrap_servers);
        for (k, v) in security_properties(s.producer_properties) {
            admin_config.set(k, v);
        }
        let admin = admin_config
            .create()
            .map_err(|e| RelayError::Fatal(anyhow!("Kafka admin client settings rejected: {e}")))?;
        Ok(Self {
            producer,
            admin,
            known_topics: HashSet::new(),
            partitions: s.topic_partitions,
            replication_factor: s.topic_replication_factor,
        })
    }

    /// Creates `topic` unless this sink already saw it: many brokers do not auto-create
    /// topics (Kafka Connect's `topic.creation.*` does the same job).
    pub async fn ensure_topic(&mut self, topic: &Arc<str>) -> Result<(), RelayError> {
        if self.known_topics.contains(topic) {
            return Ok(());
        }
        // Topics that exist need no CreateTopics permission (and some brokers, like
        // librdkafka's mock cluster, do not implement that API at all).
        if self.topic_exists(topic).await {
            self.known_topics.insert(topic.clone());
            return Ok(());
        }
        let replication = TopicReplication::Fixed(self.replication_factor);
        let new_topic = NewTopic::new(topic, self.partitions, replication);
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = self
            .admin
            .create_topics(&[new_topic], &options)
            .await
            .map_err(|e| RelayError::Transient(anyhow!("creating topic {topic}: {e}")))?;
        for result in results {
            match result {
                Ok(_) => tracing::info!(topic = &**topic, partitions = self.partitions, "created topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code @ (RDKafkaErrorCode::TopicAuthorizationFailed | RDKafkaErrorCode::ClusterAuthorizationFailed))) => {
                    return Err(RelayError::Fatal(anyhow!(
                        "not allowed to create topic {topic} ({code}); create it beforehand or grant CREATE on the cluster"
                    )))
                }
                Err((_, code)) => return Err(RelayError::Transient(anyhow!("creating topic {topic}: {code}"))),
            }
        }
        self.known_topics.insert(topic.clone());
        Ok(())
    }

    async fn topic_exists(&self, topic: &str) -> bool {
        let producer = self.producer.clone();
        let name = topic.to_owned();
        tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_metadata(Some(&name), Duration::from_secs(10))
                .map(|md| {
                    md.topics().iter().any(|t| {
                        t.name() == name && t.error().is_none() && !t.partitions().is_empty()
                    })
                })
                .unwrap_or(false)
        })
        .await
        .unwrap_or(false)
    }

    pub fn send(&self, record: &OutboxRecord) -> Result<SendOutcome, RelayError> {
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for (name, value) in &record.headers {
            headers = headers.insert(Header {
                key: name,
                value: Some(&value[..]),
            });
        }
        let mut future_record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(&record.topic).headers(headers);
        if let Some(p) = record.partition {
            future_record = future_record.partition(p);
        }
        if let Some(t) = record.timestamp_ms {
            future_record = future_record.timestamp(t);
        }
        self.send_record(future_record, record.key.as_ref(), record.value.as_ref())
    }

    pub fn send_raw(
        &self,
        topic: &str,
        key: Option<&Bytes>,
        value: Option<&Bytes>,
        headers: OwnedHeaders,
    ) -> Result<SendOutcome, RelayError> {
        self.send_record(FutureRecord::to(topic).headers(headers), key, value)
    }

    fn send_record<'a>(
        &self,
        mut future_record: FutureRecord<'a, [u8], [u8]>,
        key: Option<&'a Bytes>,
        value: Option<&'a Bytes>,
    ) -> Result<SendOutcome, RelayError> {
        let topic = future_record.topic.to_owned();
        if let Some(k) = key {
            future_record = future_record.key(&k[..]);
        }
        if let Some(v) = value {
            future_record = future_record.payload(&v[..]);
        }
        match self.producer.send_result(future_record) {
            Ok(delivery) => Ok(SendOutcome::Accepted(
                delivery
                    .map(|r| match r {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err((e, message))) => Err(delivery_failure(e, message)),
                        Err(_) => Err(DeliveryFailure {
                            error: "the producer was dropped before delivery".to_owned(),
                            rejected: None,
                        }),
                    })
                    .boxed(),
            )),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                Ok(SendOutcome::QueueFull)
            }
            Err((KafkaError::MessageProduction(code), _)) if is_data_error(code) => Ok(SendOutcome::Rejected(format!(
                "the record is larger than the producer's message.max.bytes ({code}); raise it with --producer-property \
                 message.max.bytes=N (and the topic's max.message.bytes) to relay such events"
            ))),
            Err((e, _)) => Err(RelayError::Transient(anyhow!("producing to {topic}: {e}"))),
        }
    }

    /// A handle on the producer for health probes (cheap clone of a shared client).
    pub fn producer_handle(&self) -> FutureProducer {
        self.producer.clone()
    }

    /// A fatal idempotent-producer error (e.g. fenced or out-of-sequence): rebuild needed.
    pub fn fatal_error(&self) -> Option<String> {
        self.producer
            .client()
            .fatal_error()
            .map(|(code, text)| format!("{code}: {text}"))
    }

    /// Waits for queued records to be delivered, up to `timeout`.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.producer.flush(timeout).is_ok()
    }
}
