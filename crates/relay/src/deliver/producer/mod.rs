//! The producer boundary: hand a record over, later get its [`Outcome`] back with its
//! [`Tag`]. [`Producer`] is what the delivery stage needs of Kafka; [`KafkaProducer`] is the
//! real one (librdkafka: idempotent, `acks=all`, murmur2 partitioning like Java clients), and
//! the stage's unit tests use a fake.
//!
//! Delivery reports come from librdkafka's delivery callback on the producer's polling
//! thread, which queues them and wakes the delivery stage once for however many arrived
//! together: no future, channel or copy of the message per record (`FutureProducer` had all
//! three), and each record's [`Tag`] waits in a slot here, named by the callback's opaque.
//!
//! Durability contract: [`Producer::send`] only *accepts* a record; it is durable when
//! [`Producer::next_report`] returns it with [`Outcome::Acknowledged`]. Only then may the
//! acknowledgement tracker count it.

mod wire_size;

pub use wire_size::{librdkafka_message_size, record_wire_size};

use super::dead_letter::RefusedRecord;
use super::exactly_once::{TailRead, TailReader};
use super::outcome::{Outcome, Tag};
use crate::config::{ClientRole, KafkaSettings};
use crate::error::RelayError;
use anyhow::anyhow;
use bytes::Bytes;
use foldhash::{HashMap, HashMapExt as _, HashSet, HashSetExt as _};
use outbox_router::OutboxRecord;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer as _, ProducerContext, ThreadedProducer,
};
use rdkafka::ClientContext;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What [`Producer::send`] did with a record. The tag comes back unless it was accepted.
#[derive(Debug)]
pub enum Sent {
    /// Accepted; its outcome comes from [`Producer::next_report`].
    Accepted,
    /// The producer's queue is full: wait for a report, then send the same record again.
    QueueFull(Tag),
    /// Refused before sending, for what the record is (e.g. larger than `message.max.bytes`).
    Refused(Tag, String, RefusedRecord),
    /// The producer cannot take records at all (a fatal producer state).
    Failed(Tag, String),
}

/// What the delivery stage needs of a Kafka producer.
pub trait Producer {
    /// Hands `record` over with its tag.
    fn send(&mut self, record: &OutboxRecord, tag: Tag) -> Sent;
    /// The next delivery report. Pending while nothing is in flight. Cancel-safe: a report
    /// is never lost when the future is dropped before it completes.
    fn next_report(&mut self) -> impl Future<Output = (Tag, Outcome)>;
    /// Records accepted and not yet reported.
    fn in_flight(&self) -> usize;
    /// Makes sure `topic` exists (many brokers do not create topics on produce).
    /// `Ok(Some(reason))`: the broker refuses this topic itself (its name, a topic policy):
    /// its records are refused records, to dead-letter.
    fn ensure_topic(
        &mut self,
        topic: &Arc<str>,
    ) -> impl Future<Output = Result<Option<String>, RelayError>>;
    /// True when the producer must be rebuilt before its next record (a topic it just met
    /// takes smaller batches than it builds). The stage then waits for everything in
    /// flight and calls [`rebuild`](Self::rebuild): records of one partition never travel
    /// through two producers at once, so their order holds.
    fn needs_rebuild(&self) -> bool {
        false
    }
    /// Rebuilds the producer with what it learned. Only called with nothing in flight.
    fn rebuild(&mut self) -> Result<(), RelayError> {
        Ok(())
    }
    /// `topic`'s partition count, known once [`ensure_topic`](Self::ensure_topic) saw it.
    fn partition_count(&self, topic: &str) -> Option<i32>;
    /// The last record of `topic`/`partition` (`--exactly-once` reads it before its first
    /// record to that partition in a session).
    fn read_tail(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
    ) -> impl Future<Output = Result<TailRead, RelayError>>;
    /// Why `record` would be refused for what it is, judged before sending (the relay's own
    /// checks, e.g. larger than its topic's `max.message.bytes`), and whether its payload is
    /// what is refused (too large).
    fn refuses(&self, _record: &OutboxRecord) -> Option<(String, bool)> {
        None
    }
}

/// How long a topic's `max.message.bytes` is trusted before it is read again.
const LIMIT_TTL: Duration = Duration::from_secs(60);

/// librdkafka's default `batch.size`.
const DEFAULT_BATCH_SIZE: usize = 1_000_000;

/// Errors about the record itself, not the path to the broker: retrying cannot help. Among
/// them a timestamp the topic refuses (Kafka 4 refuses one more than an hour ahead by default,
/// `message.timestamp.after.max.ms`; a `table.field.event.timestamp` column can hold one), which
/// librdkafka would otherwise have the relay retry forever.
fn is_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidTimestamp
            | RDKafkaErrorCode::PolicyViolation
            | RDKafkaErrorCode::UnsupportedForMessageFormat
            | RDKafkaErrorCode::UnknownPartition
    )
}

/// The broker refuses the relay's principal, not the record: retrying cannot help.
fn is_forbidden(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::SaslAuthenticationFailed
            | RDKafkaErrorCode::Authentication
    )
}

/// What a dead letter keeps of `record`.
pub fn refused_record(record: &OutboxRecord) -> RefusedRecord {
    RefusedRecord {
        topic: record.topic.to_string(),
        key: record.key.clone(),
        event_id: record
            .headers
            .iter()
            .find(|(k, _)| &**k == "id")
            .and_then(|(_, v)| v.clone()),
        value: record.value.clone(),
        value_len: record.value.as_ref().map_or(0, |v| v.len()),
    }
}

/// What a dead letter keeps of a record librdkafka reports as not delivered (refused by the
/// broker: its payload is copied, unless its size is what was refused).
fn undelivered_record(
    message: &BorrowedMessage<'_>,
    code: Option<RDKafkaErrorCode>,
) -> RefusedRecord {
    let record = RefusedRecord {
        topic: message.topic().to_owned(),
        key: message.key().map(Bytes::copy_from_slice),
        event_id: message.headers().and_then(|h| {
            h.iter()
                .find(|h| h.key == "id")
                .and_then(|h| h.value.map(Bytes::copy_from_slice))
        }),
        value: message.payload().map(Bytes::copy_from_slice),
        value_len: message.payload().map_or(0, |p| p.len()),
    };
    if code.is_some_and(is_size_refusal) {
        record.oversized()
    } else {
        record
    }
}

/// A refusal of the record's size.
fn is_size_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize
    )
}

fn delivery_outcome(
    error: KafkaError,
    record: RefusedRecord,
    fatal: Option<(RDKafkaErrorCode, String)>,
) -> Outcome {
    let code = error.rdkafka_error_code();
    // A report of an unknown partition is librdkafka's view of the metadata, not the
    // record: it fails the records it holds for a topic that a broker briefly reports with
    // fewer partitions or none (a broker restarting, a topic just created; rdkafka_topic.c
    // says so). Sent again by the next session; a partition that truly does not exist is
    // refused on `send`, before any report.
    let refused = code.is_some_and(|c| is_refusal(c) && c != RDKafkaErrorCode::UnknownPartition);
    if refused {
        return Outcome::Refused {
            error: error.to_string(),
            record,
        };
    }
    let error = match &fatal {
        Some((code, text)) => format!("{error} (producer fatal error: {code}: {text})"),
        None => error.to_string(),
    };
    if code.is_some_and(is_forbidden) || fatal.as_ref().is_some_and(|(c, _)| is_forbidden(*c)) {
        Outcome::Forbidden { error }
    } else {
        Outcome::Failed { error }
    }
}

/// Topic configs for topics the relay creates. With `acks=all`, a record is acknowledged once
/// every in-sync replica has it; with `min.insync.replicas=1` that can be the leader alone,
/// which may then fail and lose a record whose position is already confirmed. So a
/// replicated topic needs at least two in-sync replicas to accept a write — the relay
/// prefers waiting (PostgreSQL keeps the WAL) to losing. With the broker's default
/// replication factor (-1) the broker's own `min.insync.replicas` applies.
pub fn topic_configs(replication_factor: i32) -> Vec<(&'static str, String)> {
    if replication_factor >= 2 {
        vec![("min.insync.replicas", 2.to_string())]
    } else {
        Vec::new()
    }
}

enum TopicRefusal {
    /// The broker refuses this topic (its name, a naming policy): its records are dead-lettered.
    ThisTopic(String),
    /// Every topic would be refused, or the broker is away: stop (or resume) with the cause.
    Fatal(RelayError),
}

/// What a CreateTopics error code means for the relay. Only codes, never message text.
fn topic_refusal(
    topic: &str,
    code: RDKafkaErrorCode,
    partitions: i32,
    replication: i32,
) -> TopicRefusal {
    use RDKafkaErrorCode as C;
    match code {
        C::InvalidTopic | C::PolicyViolation => TopicRefusal::ThisTopic(format!(
            "the broker refused to create topic {topic} ({code}); create it beforehand, or route such rows elsewhere"
        )),
        C::InvalidReplicationFactor | C::InvalidPartitions | C::InvalidReplicaAssignment | C::InvalidConfig => {
            TopicRefusal::Fatal(RelayError::misconfigured(format!(
                "the broker refused to create topic {topic} with {partitions} partition(s) and replication factor \
                 {replication} ({code}); pass --topic-partitions / --topic-replication-factor values the cluster accepts \
                 (-1 = the broker's default), or create the topics beforehand"
            )))
        }
        C::UnsupportedVersion | C::InvalidRequest => TopicRefusal::Fatal(RelayError::misconfigured(format!(
            "the broker cannot create topic {topic} ({code}); create it (and the dead-letter topic) beforehand"
        ))),
        C::TopicAuthorizationFailed | C::ClusterAuthorizationFailed => {
            TopicRefusal::Fatal(RelayError::MissingPrivilege {
                error: anyhow!("not allowed to create topic {topic} ({code})"),
                fix: "create it beforehand or grant CREATE on the cluster".into(),
            })
        }
        _ => TopicRefusal::Fatal(RelayError::BrokerUnavailable(anyhow!("creating topic {topic}: {code}"))),
    }
}

/// One delivery report: the slot of the record's tag, and what went wrong, if anything.
struct Report {
    slot: usize,
    error: Option<(KafkaError, RefusedRecord)>,
}

/// Where the polling thread leaves delivery reports for the delivery stage.
#[derive(Default)]
struct Reports {
    queue: Mutex<Vec<Report>>,
    /// Told when the queue stops being empty: one wake-up per batch of reports.
    arrived: tokio::sync::Notify,
}

/// The producer's context: its delivery callback queues each report (on librdkafka's
/// polling thread, in the order librdkafka reports them).
pub struct ReportContext {
    reports: Arc<Reports>,
}

impl ClientContext for ReportContext {}

impl ProducerContext for ReportContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: usize) {
        let error = match result {
            Ok(_) => None,
            Err((e, message)) => Some((
                e.clone(),
                undelivered_record(message, e.rdkafka_error_code()),
            )),
        };
        let mut queue = self.reports.queue.lock().unwrap();
        let was_empty = queue.is_empty();
        queue.push(Report { slot, error });
        drop(queue);
        if was_empty {
            self.reports.arrived.notify_one();
        }
    }
}

type RdProducer = ThreadedProducer<ReportContext>;

/// The tags of records in flight, each in the slot its delivery report names.
#[derive(Default)]
struct Slots {
    tags: Vec<Option<Tag>>,
    free: Vec<usize>,
    used: usize,
}

impl Slots {
    fn put(&mut self, tag: Tag) -> usize {
        self.used += 1;
        match self.free.pop() {
            Some(slot) => {
                self.tags[slot] = Some(tag);
                slot
            }
            None => {
                self.tags.push(Some(tag));
                self.tags.len() - 1
            }
        }
    }

    fn take(&mut self, slot: usize) -> Tag {
        let tag = self.tags[slot]
            .take()
            .expect("a report for a record in flight");
        self.free.push(slot);
        self.used -= 1;
        tag
    }
}

/// The librdkafka producer and the admin client that creates its topics.
pub struct KafkaProducer {
    producer: RdProducer,
    reports: Arc<Reports>,
    /// Reports taken from the queue and not yet handed to the delivery stage.
    taken: VecDeque<Report>,
    admin: AdminClient<DefaultClientContext>,
    known_topics: HashSet<Arc<str>>,
    /// Topics the broker refused to create, with why.
    refused_topics: HashMap<Arc<str>, String>,
    partitions: i32,
    replication_factor: i32,
    in_flight: Slots,
    /// Each known topic's `max.message.bytes`, where the broker says it.
    topic_limits: HashMap<Arc<str>, usize>,
    /// Topics with `cleanup.policy=compact` (they refuse records without a key).
    compacted_topics: std::collections::HashSet<Arc<str>>,
    /// Per topic, how far before and after now a record's timestamp may be
    /// (`message.timestamp.before.max.ms`, `.after.max.ms`).
    timestamp_windows: HashMap<Arc<str>, (i64, i64)>,
    /// When each topic's limit was last read: it is read again after [`LIMIT_TTL`], so an
    /// operator who raises (or lowers) it does not have to restart the relay.
    limits_read: HashMap<Arc<str>, std::time::Instant>,
    /// False once the broker did not answer DescribeConfigs.
    describe_configs_works: bool,
    /// The settings the producer was built from, with `batch.size` as it is now.
    settings: KafkaSettings,
    /// The `batch.size` the producer builds batches up to.
    batch_size: usize,
    /// The smaller `batch.size` a topic asks for, until the producer is rebuilt with it.
    wanted_batch_size: Option<usize>,
    /// Whether records are compressed (then the broker, not the relay, judges a record's size).
    compressed: bool,
    /// Each known topic's partition count (metadata).
    partition_counts: HashMap<Arc<str>, i32>,
    /// Reads partition tails (`--exactly-once`); created on first use. One read at a time:
    /// a read abandoned by a cancelled future may still run on its blocking thread.
    tail_reader: Option<TailReader>,
    /// The producer's `message.max.bytes`.
    message_max_bytes: usize,
}

impl KafkaProducer {
    pub fn new(kafka: &KafkaSettings) -> Result<Self, RelayError> {
        let reports = Arc::new(Reports::default());
        let producer = Self::create_producer(kafka, &reports)?;
        let config = kafka.client_config(ClientRole::Producer);
        let batch_size = config
            .get("batch.size")
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_BATCH_SIZE);
        let compressed = ["compression.type", "compression.codec"]
            .iter()
            .any(|k| config.get(k).is_some_and(|v| v != "none"));
        let admin = kafka
            .client_config(ClientRole::Admin)
            .create()
            .map_err(|e| {
                RelayError::misconfigured(format!("Kafka admin client settings rejected: {e}"))
            })?;
        Ok(Self {
            producer,
            reports,
            taken: VecDeque::new(),
            admin,
            known_topics: HashSet::new(),
            refused_topics: HashMap::new(),
            partitions: kafka.topic_partitions,
            replication_factor: kafka.topic_replication_factor,
            in_flight: Slots::default(),
            topic_limits: HashMap::new(),
            compacted_topics: Default::default(),
            timestamp_windows: HashMap::new(),
            limits_read: HashMap::new(),
            describe_configs_works: true,
            settings: kafka.clone(),
            batch_size,
            wanted_batch_size: None,
            compressed,
            partition_counts: HashMap::new(),
            tail_reader: None,
            message_max_bytes: config
                .get("message.max.bytes")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1_000_000),
        })
    }

    fn create_producer(
        kafka: &KafkaSettings,
        reports: &Arc<Reports>,
    ) -> Result<RdProducer, RelayError> {
        kafka
            .client_config(ClientRole::Producer)
            .create_with_context(ReportContext {
                reports: reports.clone(),
            })
            .map_err(|e| {
                RelayError::misconfigured(format!("Kafka producer settings rejected: {e}"))
            })
    }

    /// The topic's `max.message.bytes`, when the broker tells it (DescribeConfigs); learns
    /// on the way whether the topic is compacted.
    /// A broker that does not answer DescribeConfigs (or refuses the relay) is asked once
    /// per producer: no stall per topic, no stall per re-read.
    async fn topic_limit(&mut self, topic: &str) -> Option<usize> {
        if !self.describe_configs_works {
            return None;
        }
        let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(5)));
        let results = match self
            .admin
            .describe_configs(&[ResourceSpecifier::Topic(topic)], &options)
            .await
        {
            Ok(results) => results,
            Err(e) => {
                self.describe_configs_works = false;
                tracing::warn!(topic, error = %e, "cannot read topics' max.message.bytes (DescribeConfigs); records \
                    are not checked against it and batches keep librdkafka's batch.size: grant DESCRIBE_CONFIGS on the \
                    topics, or keep their max.message.bytes at or above batch.size");
                return None;
            }
        };
        let resource = results.into_iter().find_map(Result::ok)?;
        let compacted = resource
            .get("cleanup.policy")
            .and_then(|e| e.value.as_deref())
            .is_some_and(|policy| policy.split(',').any(|p| p.trim() == "compact"));
        if compacted {
            self.compacted_topics.insert(topic.into());
        } else {
            self.compacted_topics.remove(topic);
        }
        // The record timestamps the topic takes (CreateTime only; the broker stamps
        // LogAppendTime itself).
        let setting =
            |name: &str| -> Option<i64> { resource.get(name)?.value.as_deref()?.parse().ok() };
        let create_time = resource
            .get("message.timestamp.type")
            .and_then(|e| e.value.as_deref())
            .is_none_or(|t| t == "CreateTime");
        match (
            setting("message.timestamp.before.max.ms"),
            setting("message.timestamp.after.max.ms"),
        ) {
            (Some(before), Some(after)) if create_time => {
                self.timestamp_windows.insert(topic.into(), (before, after));
            }
            _ => {
                self.timestamp_windows.remove(topic);
            }
        }
        resource
            .get("max.message.bytes")?
            .value
            .as_deref()?
            .parse()
            .ok()
    }

    /// Learns `topic`'s record size limit; asks for smaller batches when it is below the
    /// batch size (a batch larger than the limit is refused whole, every record in it).
    async fn learn_limit(&mut self, topic: &Arc<str>) {
        self.limits_read
            .insert(topic.clone(), std::time::Instant::now());
        let Some(limit) = self.topic_limit(topic).await else {
            self.topic_limits.remove(topic);
            return;
        };
        // batch.size 0 is refused by librdkafka; a limit that small refuses every record anyway.
        let limit = limit.max(1);
        self.topic_limits.insert(topic.clone(), limit);
        let current = self.wanted_batch_size.unwrap_or(self.batch_size);
        debug_assert!(current > 0);
        if limit < current {
            tracing::info!(
                topic = &**topic,
                max_message_bytes = limit,
                batch_size = self.batch_size,
                "the topic takes smaller record batches than the producer builds: building batches of at most max.message.bytes"
            );
            self.wanted_batch_size = Some(limit);
        }
    }

    /// Why librdkafka would refuse `record` on `send` (larger than `message.max.bytes`).
    fn too_large_for_producer(&self, record: &OutboxRecord) -> Option<String> {
        let size = librdkafka_message_size(record);
        (size > self.message_max_bytes).then(|| {
            format!(
                "the record ({size} bytes) is larger than the producer's message.max.bytes ({}); raise it with \
                 --producer-property message.max.bytes=N (and the topic's max.message.bytes) to relay such events",
                self.message_max_bytes
            )
        })
    }

    /// A record without a key for a compacted topic: the broker refuses it, and with it
    /// every record of its batch (INVALID_RECORD), so it is refused here, alone.
    fn keyless_for_compacted(&self, record: &OutboxRecord) -> Option<String> {
        (record.key.is_none() && self.compacted_topics.contains(&record.topic)).then(|| {
            format!(
                "the record has no key and topic {} is compacted (cleanup.policy=compact), which refuses records \
                 without a key; give the event a key (its key column is NULL)",
                record.topic
            )
        })
    }

    /// A record timestamp outside what the topic takes: the broker refuses it
    /// (INVALID_TIMESTAMP), and with it every record of its batch, so it is refused here,
    /// alone (Kafka 4 takes at most an hour ahead by default).
    fn timestamp_out_of_range(&self, record: &OutboxRecord) -> Option<String> {
        let stamp = record.timestamp_ms?;
        let (before, after) = *self.timestamp_windows.get(&record.topic)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let outside = stamp > now.saturating_add(after) || stamp < now.saturating_sub(before);
        outside.then(|| {
            format!(
                "the record's timestamp ({stamp} ms) is outside what topic {} takes (message.timestamp.before.max.ms \
                 {before}, message.timestamp.after.max.ms {after}); fix the event's timestamp column or the topic's \
                 settings",
                record.topic
            )
        })
    }

    /// Why `record` cannot go to its topic as it is, judged before sending.
    fn too_large_for_topic(&self, record: &OutboxRecord) -> Option<String> {
        let limit = *self.topic_limits.get(&record.topic)?;
        let size = record_wire_size(record);
        (!self.compressed && size > limit).then(|| {
            format!(
                "the record ({size} bytes on the wire) is larger than topic {}'s max.message.bytes ({limit}); raise the \
                 topic's max.message.bytes to relay such events",
                record.topic
            )
        })
    }

    /// The topic's partition count, or `None` when it does not exist (or the broker does
    /// not answer).
    async fn topic_partitions(&self, topic: &str) -> Option<i32> {
        let producer = self.producer.clone();
        let name = topic.to_owned();
        tokio::task::spawn_blocking(move || {
            let metadata = producer
                .client()
                .fetch_metadata(Some(&name), Duration::from_secs(10))
                .ok()?;
            metadata
                .topics()
                .iter()
                .find(|t| t.name() == name && t.error().is_none() && !t.partitions().is_empty())
                .map(|t| t.partitions().len() as i32)
        })
        .await
        .ok()
        .flatten()
    }

    /// Records `topic`'s partition count; a change under a running relay is logged (its keys
    /// move partitions).
    fn learned_partitions(&mut self, topic: &Arc<str>, count: i32) {
        if let Some(before) = self.partition_counts.insert(topic.clone(), count) {
            if before != count {
                tracing::warn!(topic = &**topic, before, now = count, "the topic's partition count changed: keys now map to other partitions (Kafka keeps no per-key order across such a change); with --exactly-once the relay keeps choosing partitions with the count it started with until the next session");
                self.partition_counts.insert(topic.clone(), before);
            }
        }
    }

    fn fatal_error(&self) -> Option<String> {
        self.producer
            .client()
            .fatal_error()
            .map(|(code, text)| format!("{code}: {text}"))
    }
}

impl Producer for KafkaProducer {
    fn send(&mut self, record: &OutboxRecord, tag: Tag) -> Sent {
        if let Some(reason) = self.too_large_for_topic(record) {
            return Sent::Refused(tag, reason, refused_record(record).oversized());
        }
        if let Some(reason) = self
            .keyless_for_compacted(record)
            .or_else(|| self.timestamp_out_of_range(record))
        {
            return Sent::Refused(tag, reason, refused_record(record));
        }
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for (name, value) in &record.headers {
            headers = headers.insert(Header {
                key: name,
                value: value.as_deref(),
            });
        }
        let slot = self.in_flight.put(tag);
        let mut base: BaseRecord<'_, [u8], [u8], usize> =
            BaseRecord::with_opaque_to(&record.topic, slot).headers(headers);
        if let Some(p) = record.partition {
            base = base.partition(p);
        }
        if let Some(t) = record.timestamp_ms {
            base = base.timestamp(t);
        }
        if let Some(k) = &record.key {
            base = base.key(&k[..]);
        }
        if let Some(v) = &record.value {
            base = base.payload(&v[..]);
        }
        let error = match self.producer.send(base) {
            Ok(()) => return Sent::Accepted,
            Err((error, _)) => error,
        };
        let tag = self.in_flight.take(slot);
        match error {
            KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull) => Sent::QueueFull(tag),
            KafkaError::MessageProduction(code) if is_refusal(code) => {
                let reason = if code == RDKafkaErrorCode::UnknownPartition {
                    format!("partition {:?} does not exist in topic {} ({code}); the topic has fewer partitions than the record's partition placement asks for", record.partition, record.topic)
                } else {
                    format!(
                        "the record is larger than the producer's message.max.bytes ({code}); raise it with --producer-property \
                         message.max.bytes=N (and the topic's max.message.bytes) to relay such events"
                    )
                };
                let refused = refused_record(record);
                let refused = if is_size_refusal(code) {
                    refused.oversized()
                } else {
                    refused
                };
                Sent::Refused(tag, reason, refused)
            }
            e => {
                let fatal = self
                    .fatal_error()
                    .map(|f| format!(" (producer fatal error: {f})"))
                    .unwrap_or_default();
                Sent::Failed(tag, format!("producing to {}: {e}{fatal}", record.topic))
            }
        }
    }

    async fn next_report(&mut self) -> (Tag, Outcome) {
        loop {
            if let Some(report) = self.taken.pop_front() {
                let tag = self.in_flight.take(report.slot);
                let outcome = match report.error {
                    None => Outcome::Acknowledged,
                    Some((error, record)) => {
                        let fatal = self.producer.client().fatal_error();
                        delivery_outcome(error, record, fatal)
                    }
                };
                return (tag, outcome);
            }
            if self.in_flight.used == 0 {
                return std::future::pending().await;
            }
            // Everything that arrived, in one go; the queue keeps its capacity.
            self.taken
                .extend(self.reports.queue.lock().unwrap().drain(..));
            if self.taken.is_empty() {
                // Cancel-safe: nothing was taken; a report arriving meanwhile leaves a permit.
                self.reports.arrived.notified().await;
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight.used
    }

    /// Creates `topic` unless this producer already saw it. Topics that exist need no
    /// CreateTopics permission (and some brokers do not implement that API at all).
    async fn ensure_topic(&mut self, topic: &Arc<str>) -> Result<Option<String>, RelayError> {
        if self.known_topics.contains(topic) {
            let stale = self.topic_limits.contains_key(topic)
                && self
                    .limits_read
                    .get(topic)
                    .is_some_and(|read| read.elapsed() > LIMIT_TTL);
            if stale {
                self.learn_limit(topic).await;
                if let Some(count) = self.topic_partitions(topic).await {
                    self.learned_partitions(topic, count);
                }
            }
            return Ok(None);
        }
        if let Some(reason) = self.refused_topics.get(topic) {
            return Ok(Some(reason.clone()));
        }
        if let Some(count) = self.topic_partitions(topic).await {
            self.learned_partitions(topic, count);
            self.learn_limit(topic).await;
            self.known_topics.insert(topic.clone());
            return Ok(None);
        }
        // topic.creation.* applies to the routed topics, not to the dead-letter topic (a
        // compacted dead-letter topic would lose the rows it keeps).
        let none = Vec::new();
        let (partitions, replication_factor, theirs) = if **topic
            == *self.settings.dead_letter_topic
        {
            (self.partitions, self.replication_factor, &none[..])
        } else {
            self.settings
                .topic_creation
                .for_topic(topic, self.partitions, self.replication_factor)
        };
        let replication = TopicReplication::Fixed(replication_factor);
        let ours = topic_configs(replication_factor);
        let mut new_topic = NewTopic::new(topic, partitions, replication);
        for (key, value) in ours
            .iter()
            .filter(|(k, _)| !theirs.iter().any(|(t, _)| t == k))
        {
            new_topic = new_topic.set(key, value);
        }
        for (key, value) in theirs {
            new_topic = new_topic.set(key, value);
        }
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = self
            .admin
            .create_topics(&[new_topic], &options)
            .await
            .map_err(|e| RelayError::BrokerUnavailable(anyhow!("creating topic {topic}: {e}")))?;
        for result in results {
            match result {
                Ok(_) => tracing::info!(
                    topic = &**topic,
                    partitions,
                    configs = ?theirs,
                    "created topic"
                ),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code)) => {
                    match topic_refusal(topic, code, partitions, replication_factor) {
                        TopicRefusal::ThisTopic(reason) => {
                            self.refused_topics.insert(topic.clone(), reason.clone());
                            return Ok(Some(reason));
                        }
                        TopicRefusal::Fatal(e) => return Err(e),
                    }
                }
            }
        }
        // The broker chooses the count when asked for its default (-1): read it back.
        for _ in 0..50 {
            if let Some(count) = self.topic_partitions(topic).await {
                self.learned_partitions(topic, count);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.learn_limit(topic).await;
        self.known_topics.insert(topic.clone());
        Ok(None)
    }

    fn partition_count(&self, topic: &str) -> Option<i32> {
        self.partition_counts.get(topic).copied()
    }

    async fn read_tail(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
    ) -> Result<TailRead, RelayError> {
        if self.tail_reader.is_none() {
            let config = self.settings.client_config(ClientRole::Admin);
            self.tail_reader = Some(TailReader::new(config)?);
        }
        let reader = self.tail_reader.as_ref().expect("created above");
        reader.read(topic, partition).await
    }

    fn refuses(&self, record: &OutboxRecord) -> Option<(String, bool)> {
        self.too_large_for_producer(record)
            .or_else(|| self.too_large_for_topic(record))
            .map(|reason| (reason, true))
            .or_else(|| {
                self.keyless_for_compacted(record)
                    .or_else(|| self.timestamp_out_of_range(record))
                    .map(|r| (r, false))
            })
    }

    fn needs_rebuild(&self) -> bool {
        self.wanted_batch_size.is_some()
    }

    fn rebuild(&mut self) -> Result<(), RelayError> {
        debug_assert_eq!(self.in_flight.used, 0, "rebuilt with records in flight");
        let Some(batch_size) = self.wanted_batch_size.take() else {
            return Ok(());
        };
        self.settings.properties.retain(|(k, _)| k != "batch.size");
        self.settings
            .properties
            .push(("batch.size".into(), batch_size.to_string()));
        let old = std::mem::replace(
            &mut self.producer,
            Self::create_producer(&self.settings, &self.reports)?,
        );
        // Dropping a librdkafka client flushes and joins its threads: not on a runtime thread.
        tokio::task::spawn_blocking(move || drop(old));
        self.batch_size = batch_size;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_topic_is_dead_lettered_and_a_refused_setting_stops_the_relay() {
        use crate::error::Consequence;
        let per_record = |c| matches!(topic_refusal("t", c, 1, 1), TopicRefusal::ThisTopic(_));
        assert!(per_record(RDKafkaErrorCode::InvalidTopic));
        assert!(per_record(RDKafkaErrorCode::PolicyViolation));
        let fatal = |c| match topic_refusal("t", c, 1, 3) {
            TopicRefusal::Fatal(e) => e.consequence(),
            TopicRefusal::ThisTopic(_) => panic!("{c:?} is not about one topic"),
        };
        assert_eq!(
            fatal(RDKafkaErrorCode::InvalidReplicationFactor),
            Consequence::Exit
        );
        assert_eq!(
            fatal(RDKafkaErrorCode::TopicAuthorizationFailed),
            Consequence::Exit
        );
        assert_eq!(
            fatal(RDKafkaErrorCode::RequestTimedOut),
            Consequence::Resume
        );
    }

    #[test]
    fn an_unknown_partition_in_a_report_is_sent_again_not_dead_lettered() {
        let record = || RefusedRecord {
            topic: "t".into(),
            key: None,
            event_id: None,
            value: None,
            value_len: 0,
        };
        let report = |code| delivery_outcome(KafkaError::MessageProduction(code), record(), None);
        assert!(matches!(
            report(RDKafkaErrorCode::UnknownPartition),
            Outcome::Failed { .. }
        ));
        assert!(matches!(
            report(RDKafkaErrorCode::InvalidTimestamp),
            Outcome::Refused { .. }
        ));
        assert!(matches!(
            report(RDKafkaErrorCode::MessageTimedOut),
            Outcome::Failed { .. }
        ));
    }

    #[test]
    fn replicated_topics_need_two_in_sync_replicas_to_acknowledge() {
        assert!(topic_configs(-1).is_empty(), "the broker's default applies");
        assert!(topic_configs(1).is_empty());
        assert_eq!(topic_configs(2), [("min.insync.replicas", "2".to_string())]);
        assert_eq!(topic_configs(3), [("min.insync.replicas", "2".to_string())]);
    }
}
