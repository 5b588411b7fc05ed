//! The I/O of `dead-letters`: reading a topic from its beginning to its end as it was at the
//! start (the dead-letter topic, the marker topic), creating the marker topic, and producing
//! each replayed record with its marker in one Kafka transaction. Blocking: called from
//! `spawn_blocking`.

use super::letter::Consumed;
use crate::config::{ClientRole, KafkaSettings};
use crate::error::RelayError;
use anyhow::anyhow;
use bytes::Bytes;
use outbox_router::OutboxRecord;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);
/// Reading stops with an error when no record or end of partition comes for this long.
const STALL: Duration = Duration::from_secs(60);

fn unavailable(what: &str, e: impl std::fmt::Display) -> RelayError {
    RelayError::BrokerUnavailable(anyhow!("{what}: {e}"))
}

/// Kafka's id of `topic` (KIP-516: a new one each time a topic of that name is created), as
/// 32 hex digits; `None` when the broker gives none (before Kafka 2.8: the zero id) or the
/// topic does not exist. rdkafka has no DescribeTopics: this calls librdkafka's admin API
/// directly, through the bindings rdkafka re-exports.
pub fn topic_id(kafka: &KafkaSettings, topic: &str) -> Result<Option<String>, RelayError> {
    use rdkafka::bindings as rd;
    let client: BaseConsumer = kafka
        .client_config(ClientRole::Admin)
        .create()
        .map_err(|e| {
            RelayError::misconfigured(format!(
                "Kafka client settings rejected: {}",
                crate::config::client_config_error(&e)
            ))
        })?;
    let name = std::ffi::CString::new(topic)
        .map_err(|_| RelayError::misconfigured(format!("topic {topic:?} holds a NUL byte")))?;
    let rk = client.client().native_ptr();
    // SAFETY: every object made here is destroyed on every path below, after the last use of
    // what it owns (the event owns the descriptions; `name` outlives the call that copies it).
    unsafe {
        let mut names = [name.as_ptr()];
        let topics = rd::rd_kafka_TopicCollection_of_topic_names(names.as_mut_ptr(), 1);
        let options = rd::rd_kafka_AdminOptions_new(
            rk,
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
        );
        let queue = rd::rd_kafka_queue_new(rk);
        rd::rd_kafka_DescribeTopics(rk, topics, options, queue);
        let event = rd::rd_kafka_queue_poll(queue, TIMEOUT.as_millis() as i32);
        let id = if event.is_null() {
            Err(unavailable(&format!("describing {topic}"), "no answer"))
        } else if rd::rd_kafka_event_error(event)
            != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
        {
            let why = std::ffi::CStr::from_ptr(rd::rd_kafka_event_error_string(event));
            Err(unavailable(
                &format!("describing {topic}"),
                why.to_string_lossy(),
            ))
        } else {
            let result = rd::rd_kafka_event_DescribeTopics_result(event);
            let mut count = 0usize;
            let described = rd::rd_kafka_DescribeTopics_result_topics(result, &mut count);
            let first = (count > 0).then(|| *described);
            Ok(first
                .filter(|d| rd::rd_kafka_TopicDescription_error(*d).is_null())
                .map(|d| rd::rd_kafka_TopicDescription_topic_id(d))
                .filter(|id| !id.is_null())
                .map(|id| {
                    (
                        rd::rd_kafka_Uuid_most_significant_bits(id) as u64,
                        rd::rd_kafka_Uuid_least_significant_bits(id) as u64,
                    )
                })
                .filter(|(high, low)| high | low != 0)
                .map(|(high, low)| format!("{high:016x}{low:016x}")))
        };
        if !event.is_null() {
            rd::rd_kafka_event_destroy(event);
        }
        rd::rd_kafka_queue_destroy(queue);
        rd::rd_kafka_AdminOptions_destroy(options);
        rd::rd_kafka_TopicCollection_destroy(topics);
        id
    }
}

/// What `keep` makes of each committed record of `topic` it keeps, in (partition, offset)
/// order, and how many records were read: from each partition's beginning to its end as it
/// was when reading started (read_committed: a replay's open or aborted transaction is not
/// read). Only what `keep` keeps is held in memory. `None` when the topic does not exist.
pub fn read_topic<T>(
    kafka: &KafkaSettings,
    topic: &str,
    mut keep: impl FnMut(Consumed) -> Option<T>,
) -> Result<Option<(Vec<T>, usize)>, RelayError> {
    let consumer: BaseConsumer = kafka
        .client_config(ClientRole::Admin)
        .set("group.id", "outbox-relay-dead-letters")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100")
        .create()
        .map_err(|e| {
            RelayError::misconfigured(format!(
                "Kafka consumer settings rejected: {}",
                crate::config::client_config_error(&e)
            ))
        })?;
    let metadata = consumer
        .fetch_metadata(Some(topic), TIMEOUT)
        .map_err(|e| unavailable(&format!("reading the metadata of {topic}"), e))?;
    let Some(described) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Ok(None);
    };
    match described.error() {
        None => {}
        Some(e) if RDKafkaErrorCode::from(e) == RDKafkaErrorCode::UnknownTopicOrPartition => {
            return Ok(None)
        }
        Some(e) => {
            return Err(unavailable(
                &format!("reading the metadata of {topic}"),
                RDKafkaErrorCode::from(e),
            ))
        }
    }
    let mut assignment = TopicPartitionList::new();
    // partition -> the end as it was at the start.
    let mut ends: HashMap<i32, i64> = HashMap::new();
    for partition in described.partitions().iter().map(|p| p.id()) {
        let (low, high) = consumer
            .fetch_watermarks(topic, partition, TIMEOUT)
            .map_err(|e| unavailable(&format!("reading the offsets of {topic}"), e))?;
        if high > low {
            assignment
                .add_partition_offset(topic, partition, Offset::Offset(low))
                .map_err(|e| unavailable("assigning partitions", e))?;
            ends.insert(partition, high);
        }
    }
    let (mut kept, mut read) = (Vec::new(), 0);
    if ends.is_empty() {
        return Ok(Some((Vec::new(), 0)));
    }
    consumer
        .assign(&assignment)
        .map_err(|e| unavailable(&format!("reading {topic}"), e))?;
    let mut progress = Instant::now();
    while !ends.is_empty() {
        if progress.elapsed() > STALL {
            return Err(unavailable(
                &format!("reading {topic}"),
                format!("no record for {} s", STALL.as_secs()),
            ));
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            // The end of what can be read (a transaction's markers take offsets too).
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                ends.remove(&partition);
                progress = Instant::now();
            }
            Some(Err(e)) => return Err(unavailable(&format!("reading {topic}"), e)),
            Some(Ok(m)) => {
                progress = Instant::now();
                let Some(&end) = ends.get(&m.partition()) else {
                    continue;
                };
                if m.offset() >= end {
                    ends.remove(&m.partition());
                    continue;
                }
                if m.offset() + 1 >= end {
                    ends.remove(&m.partition());
                }
                read += 1;
                let consumed = Consumed {
                    partition: m.partition(),
                    offset: m.offset(),
                    timestamp_ms: m.timestamp().to_millis(),
                    key: m.key().map(Bytes::copy_from_slice),
                    value: m.payload().map(Bytes::copy_from_slice),
                    headers: m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| (h.key.to_owned(), h.value.map(Bytes::copy_from_slice)))
                                .collect()
                        })
                        .unwrap_or_default(),
                };
                if let Some(item) = keep(consumed) {
                    kept.push(((m.partition(), m.offset()), item));
                }
            }
        }
    }
    kept.sort_by_key(|(at, _)| *at);
    Ok(Some((
        kept.into_iter().map(|(_, item)| item).collect(),
        read,
    )))
}

/// Creates the compacted marker topic unless it exists.
pub async fn create_marker_topic(kafka: &KafkaSettings, topic: &str) -> Result<(), RelayError> {
    let admin: AdminClient<DefaultClientContext> = kafka
        .client_config(ClientRole::Admin)
        .create()
        .map_err(|e| {
            RelayError::misconfigured(format!(
                "Kafka admin client settings rejected: {}",
                crate::config::client_config_error(&e)
            ))
        })?;
    let replication = kafka.topic_replication_factor;
    let configs = crate::deliver::producer::topic_configs(replication);
    let mut new_topic = NewTopic::new(topic, 1, TopicReplication::Fixed(replication))
        .set("cleanup.policy", "compact");
    for (key, value) in &configs {
        new_topic = new_topic.set(key, value);
    }
    let results = admin
        .create_topics(
            &[new_topic],
            &AdminOptions::new().operation_timeout(Some(TIMEOUT)),
        )
        .await
        .map_err(|e| unavailable(&format!("creating the marker topic {topic}"), e))?;
    for result in results {
        match result {
            Ok(_) => tracing::info!(topic, "created the marker topic (compacted)"),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(RelayError::misconfigured(format!(
                    "the broker refused to create the marker topic {topic} ({code}); create it (cleanup.policy=compact) \
                     beforehand or pass another --marker-topic"
                )))
            }
        }
    }
    Ok(())
}

/// A transactional producer: each replayed record is committed with its marker.
pub struct Replayer {
    producer: ThreadedProducer<DefaultProducerContext>,
    marker_topic: String,
    /// Records in the open transaction.
    open: usize,
    /// A transaction is open (begun, maybe with every record of it refused).
    begun: bool,
    /// The open transaction's records and marker keys: sent again one by one when the
    /// broker refuses the transaction for one of them.
    sent: Vec<(OutboxRecord, String)>,
}

impl Replayer {
    /// The producer of `run` (its settings and the user's properties) with
    /// `transactional.id` `outbox-relay-replay-<dead-letter topic>`: a second replay of the
    /// same topic fences the first.
    pub fn new(
        kafka: &KafkaSettings,
        dead_letter_topic: &str,
        marker_topic: &str,
    ) -> Result<Self, RelayError> {
        let mut config = kafka.client_config(ClientRole::Producer);
        let transaction_timeout = config
            .get("transaction.timeout.ms")
            .map(str::to_owned)
            .unwrap_or_else(|| "60000".into());
        config
            .set(
                "transactional.id",
                format!("outbox-relay-replay-{dead_letter_topic}"),
            )
            .set("transaction.timeout.ms", &transaction_timeout)
            // In a transaction a record may not wait longer than the transaction may stay open.
            .set("message.timeout.ms", &transaction_timeout);
        let producer: ThreadedProducer<DefaultProducerContext> = config.create().map_err(|e| {
            RelayError::misconfigured(format!(
                "Kafka producer settings rejected: {}",
                crate::config::client_config_error(&e)
            ))
        })?;
        producer.init_transactions(TIMEOUT).map_err(|e| {
            unavailable("starting the replay's transactions (init_transactions)", e)
        })?;
        Ok(Self {
            producer,
            marker_topic: marker_topic.to_owned(),
            open: 0,
            begun: false,
            sent: Vec::new(),
        })
    }

    /// Sends `record` and its marker (`marker_key`, valued with where it went) in the open
    /// transaction, opening one if none is. `Ok(Err(why))`: librdkafka refused this record
    /// itself (too large, no such partition): neither it nor its marker is sent.
    pub fn send(
        &mut self,
        record: &OutboxRecord,
        marker_key: &str,
    ) -> Result<Result<(), String>, RelayError> {
        // A transaction is begun once, whether or not its first record was refused (a
        // second begin_transaction() in one is an error of librdkafka's state machine).
        if !self.begun {
            self.producer
                .begin_transaction()
                .map_err(|e| unavailable("beginning a transaction", e))?;
            self.begun = true;
        }
        if let Err(why) = self.enqueue(Self::base(record)) {
            return Ok(Err(why));
        }
        let marker = BaseRecord::<str, str>::to(&self.marker_topic)
            .key(marker_key)
            .payload(&*record.topic);
        if let Err(why) = self.enqueue(marker) {
            // The record is in the transaction without its marker: none of it may count.
            let _ = self.producer.abort_transaction(TIMEOUT);
            self.open = 0;
            self.begun = false;
            self.sent.clear();
            return Err(unavailable("producing a marker (transaction aborted)", why));
        }
        self.open += 1;
        self.sent.push((record.clone(), marker_key.to_owned()));
        Ok(Ok(()))
    }

    /// `record` as librdkafka takes it.
    fn base(record: &OutboxRecord) -> BaseRecord<'_, [u8], [u8]> {
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: value.as_deref(),
            });
        }
        let mut base = BaseRecord::<[u8], [u8]>::to(&record.topic).headers(headers);
        if let Some(key) = &record.key {
            base = base.key(&key[..]);
        }
        if let Some(value) = &record.value {
            base = base.payload(&value[..]);
        }
        if let Some(partition) = record.partition {
            base = base.partition(partition);
        }
        if let Some(timestamp) = record.timestamp_ms {
            base = base.timestamp(timestamp);
        }
        base
    }

    /// Hands a record to librdkafka, waiting while its queue is full.
    fn enqueue<K: rdkafka::message::ToBytes + ?Sized, V: rdkafka::message::ToBytes + ?Sized>(
        &self,
        mut record: BaseRecord<'_, K, V>,
    ) -> Result<(), String> {
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err((e, back)) => return Err(format!("producing to {}: {e}", back.topic)),
            }
        }
    }

    /// Records in the open transaction.
    pub fn open(&self) -> usize {
        self.open
    }

    /// Commits the open transaction: its records and their markers are in Kafka together,
    /// or (on an error) neither is.
    /// Returns the records the broker refused (their marker keys and why): when it refuses
    /// the transaction for a record it will never take (a policy, a compacted topic and no
    /// key), the transaction is aborted and its records are sent again one per transaction,
    /// so that one record does not fail every replay of the others.
    pub fn commit(&mut self) -> Result<Vec<(String, String)>, RelayError> {
        if !self.begun {
            return Ok(Vec::new());
        }
        // Committed even when empty (every record of it refused): the next one begins anew.
        let result = self.producer.commit_transaction(TIMEOUT);
        self.open = 0;
        self.begun = false;
        let sent = std::mem::take(&mut self.sent);
        let Err(e) = result else {
            return Ok(Vec::new());
        };
        let _ = self.producer.abort_transaction(TIMEOUT);
        let refused_for_a_record =
            matches!(&e, KafkaError::Transaction(t) if !t.is_retriable() && !t.is_fatal());
        if !refused_for_a_record || sent.is_empty() {
            return Err(unavailable(
                "committing a replay transaction (aborted: none of its records and markers count; run the replay again)",
                e,
            ));
        }
        let mut refused = Vec::new();
        for (record, marker_key) in sent {
            self.producer
                .begin_transaction()
                .map_err(|e| unavailable("beginning a transaction", e))?;
            self.begun = true;
            let one = |replayer: &mut Self| -> Result<(), String> {
                replayer.enqueue(Self::base(&record))?;
                replayer.enqueue(
                    BaseRecord::<str, str>::to(&replayer.marker_topic)
                        .key(&marker_key)
                        .payload(&*record.topic),
                )?;
                replayer
                    .producer
                    .commit_transaction(TIMEOUT)
                    .map_err(|e| e.to_string())
            };
            let result = one(self);
            self.begun = false;
            if let Err(why) = result {
                let _ = self.producer.abort_transaction(TIMEOUT);
                refused.push((marker_key, format!("the broker refused it: {why}")));
            }
        }
        Ok(refused)
    }
}
