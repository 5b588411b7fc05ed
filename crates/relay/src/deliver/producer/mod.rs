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

mod admin;
pub use admin::create_topic_if_missing;
mod first_writes;
mod native;
mod outcomes;
mod reports;
mod topic_rules;
mod topics;
mod wire_size;

pub use outcomes::refused_record;
pub use topics::topic_configs;
pub use wire_size::{librdkafka_message_size, record_wire_size};

use first_writes::FirstWrites;
use outcomes::{delivery_outcome, is_refusal};
use reports::is_size_refusal;
pub use reports::Unacknowledged;
use reports::{Place, Report, ReportContext, Reports, Slots};
use topic_rules::{Due, TopicRules};
use topics::{topic_refusal, TopicRefusal};

type RdProducer = ThreadedProducer<ReportContext>;

use super::dead_letter::RefusedRecord;
use super::outcome::{Outcome, Tag};
use crate::config::{ClientRole, KafkaSettings};
use crate::error::RelayError;
use anyhow::anyhow;
use foldhash::{HashMap, HashMapExt as _, HashSet, HashSetExt as _};
use outbox_router::OutboxRecord;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{Producer as _, ThreadedProducer};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
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

/// What the producer knows of a topic once it made sure the topic exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topic {
    /// Records may go to it. `partitions`: its partition count, when the broker told it.
    /// `rebuild`: the producer must be rebuilt before its next record (this topic takes
    /// smaller batches than it builds); the stage then waits for everything in flight and
    /// calls [`Producer::rebuild`], so that the records of a partition never travel through
    /// two producers at once and their order holds.
    Ready {
        partitions: Option<i32>,
        rebuild: bool,
    },
    /// The broker refuses this topic itself (its name, a topic policy): its records are
    /// refused records, to dead-letter.
    Refused(String),
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
    /// Key and value bytes of the records accepted and not yet reported, as far as known
    /// (the in-flight bound in bytes; a fake may not count them).
    fn in_flight_bytes(&self) -> usize {
        0
    }
    /// Makes sure `topic` exists (many brokers do not create topics on produce), and says
    /// what is known of it.
    fn ensure_topic(&mut self, topic: &Arc<str>)
        -> impl Future<Output = Result<Topic, RelayError>>;
    /// Makes sure `topic` exists without holding the delivery stage (the canary's topic:
    /// its creation never holds the events): `None` while that is under way, then whether it
    /// does; [`Self::ensure_topic`] then finds it without waiting.
    fn ensure_topic_in_background(&mut self, _topic: &Arc<str>) -> Option<Result<(), String>> {
        Some(Ok(()))
    }
    /// Why `record` would be refused for what it is, judged before sending (the relay's own
    /// checks, e.g. larger than its topic's `max.message.bytes`), and whether its payload is
    /// what is refused (too large).
    fn refuses(&self, _record: &OutboxRecord) -> Option<(String, bool)> {
        None
    }
    /// Rebuilds the producer with what it learned ([`Topic::Ready`]'s `rebuild`). Only
    /// called with nothing in flight.
    fn rebuild(&mut self) -> Result<(), RelayError> {
        Ok(())
    }
    /// The partitions whose oldest record in flight has waited longer than `age` for
    /// Kafka's answer, the longest first.
    fn waiting_longer_than(&self, _age: Duration) -> Vec<Unacknowledged> {
        Vec::new()
    }
}

/// Why `record` cannot go to `partition`: the topic has fewer (`detail`: what says so).
fn unknown_partition(record: &OutboxRecord, partition: Option<i32>, detail: &str) -> String {
    format!(
        "partition {:?} does not exist in topic {} ({detail}); the topic has fewer partitions than the record's \
         partition placement asks for",
        partition, record.topic
    )
}

/// How long records without key or partition keep going to the same partition of their
/// topic (librdkafka's `sticky.partitioning.linger.ms` default).
const KEYLESS_STICKY: Duration = Duration::from_millis(10);

/// Why a record larger than librdkafka's whole queue is refused (it could never be taken).
pub const LARGER_THAN_QUEUE: &str =
    "the record is larger than the producer's queue (queue.buffering.max.kbytes); raise it \
     with --producer-property to relay such events";

/// librdkafka's default `batch.size`.
const DEFAULT_BATCH_SIZE: usize = 1_000_000;

/// What DescribeConfigs said of one topic's configs.
#[derive(Clone, Copy, Debug)]
enum Configs {
    /// An answer (its `max.message.bytes`, if it says it), or none will ever come (the
    /// broker cannot answer DescribeConfigs at all).
    Read(Option<usize>),
    /// No answer this time (the request timed out, the broker did not know the topic yet or
    /// the relay may not describe it).
    Unanswered,
    /// Not asked: requests fail, and the next try is not due yet.
    Postponed,
}

/// The librdkafka producer and the admin client that creates its topics.
pub struct KafkaProducer {
    /// Dropped before `producer`, whose topics they are.
    topic_handles: native::TopicHandles,
    producer: RdProducer,
    reports: Arc<Reports>,
    /// Reports taken from the queue and not yet handed to the delivery stage.
    taken: VecDeque<Report>,
    /// When the last reports were taken from the queue.
    taken_at: std::time::Instant,
    admin: Arc<AdminClient<DefaultClientContext>>,
    /// Topics being made sure of in a task of their own (the canary's), with its answer.
    creating: HashMap<Arc<str>, tokio::sync::oneshot::Receiver<Result<(), TopicRefusal>>>,
    known_topics: HashSet<Arc<str>>,
    /// Topics the broker refused to create, with why.
    refused_topics: HashMap<Arc<str>, String>,
    partitions: i32,
    replication_factor: i32,
    in_flight: Slots,
    /// What each topic takes (size, keys, timestamps), as its configs say.
    rules: TopicRules,
    /// False once the broker refused DescribeConfigs as such (a broker too old for it).
    describe_configs_works: bool,
    /// DescribeConfigs requests failed this many times in a row, the last one then (a warning
    /// said so; an answer clears it): no request is sent until the next try is due.
    describe_configs_failing: Option<(std::time::Instant, u32)>,
    /// Whether a topic the relay just created is asked for again until answered (false once
    /// one stayed unanswered, until some topic is answered).
    wait_for_created: bool,
    /// The settings the producer was built from, with `batch.size` as it is now.
    settings: KafkaSettings,
    /// The `batch.size` the producer builds batches up to.
    batch_size: usize,
    /// The smaller `batch.size` a topic asks for, until the producer is rebuilt with it.
    wanted_batch_size: Option<usize>,
    /// Each known topic's partition count (metadata), as the session started with it (keys
    /// keep their partitions while it runs).
    partition_counts: HashMap<Arc<str>, i32>,
    /// Each known topic's partition count as last read (a topic that grew takes records on
    /// its new partitions).
    latest_counts: HashMap<Arc<str>, i32>,
    /// Every topic of the cluster and its partition count, from one metadata request, and
    /// when it was read: a burst of new aggregate types costs no metadata round trip per
    /// topic that exists already.
    cluster_topics: Option<(std::time::Instant, HashMap<String, i32>)>,
    /// The producer's `message.max.bytes`.
    message_max_bytes: usize,
    /// Which partitions acknowledged a record of this producer, and the records parked
    /// behind a partition's first one (`first_writes.rs`), each with its slot.
    first_writes: FirstWrites<OutboxRecord>,
    /// Outcomes decided here, not by librdkafka (a parked record it refused when released, or
    /// not sent because its partition's first record failed); in flight until handed out.
    decided: VecDeque<(Tag, Outcome)>,
    /// librdkafka's queue was full when parked records were released: the next report retries
    /// every partition, not only its own.
    release_stalled: bool,
    /// librdkafka's queue in bytes (`queue.buffering.max.kbytes`): a record larger than it is
    /// refused before it is parked (the stage's queue-full-while-idle rule never sees a
    /// parked record).
    queue_max_bytes: usize,
    /// Each topic's partition for records without key or partition, and since when (see
    /// `partition_of`).
    keyless: HashMap<Arc<str>, (i32, Option<std::time::Instant>)>,
    /// `enable.gapless.guarantee` (`--exactly-once`): a refused record is never followed in its
    /// partition by a later one of the session (exactly_once/rule.rs).
    gapless: bool,
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
                RelayError::misconfigured(format!(
                    "Kafka admin client settings rejected: {}",
                    crate::config::client_config_error(&e)
                ))
            })?;
        let gapless = config.get("enable.gapless.guarantee") == Some("true");
        Ok(Self {
            gapless,
            topic_handles: native::TopicHandles::default(),
            producer,
            reports,
            taken: VecDeque::new(),
            taken_at: std::time::Instant::now(),
            admin: Arc::new(admin),
            creating: HashMap::new(),
            known_topics: HashSet::new(),
            refused_topics: HashMap::new(),
            partitions: kafka.topic_partitions,
            replication_factor: kafka.topic_replication_factor,
            in_flight: Slots::default(),
            rules: TopicRules::new(compressed),
            describe_configs_works: true,
            describe_configs_failing: None,
            wait_for_created: true,
            settings: kafka.clone(),
            batch_size,
            wanted_batch_size: None,
            partition_counts: HashMap::new(),
            latest_counts: HashMap::new(),
            cluster_topics: None,
            message_max_bytes: config
                .get("message.max.bytes")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1_000_000),
            first_writes: FirstWrites::default(),
            decided: VecDeque::new(),
            release_stalled: false,
            queue_max_bytes: config
                .get("queue.buffering.max.kbytes")
                .and_then(|v| v.parse::<usize>().ok())
                .map_or(usize::MAX, |kb| kb.saturating_mul(1024)),
            keyless: HashMap::new(),
        })
    }

    fn create_producer(
        kafka: &KafkaSettings,
        reports: &Arc<Reports>,
    ) -> Result<RdProducer, RelayError> {
        let mut config = kafka.client_config(ClientRole::Producer);
        if crate::metrics::debezium::network_rates_wanted() {
            config.set(
                "statistics.interval.ms",
                crate::metrics::debezium::STATISTICS_INTERVAL_MS.to_string(),
            );
        }
        config
            .create_with_context(ReportContext {
                reports: reports.clone(),
            })
            .map_err(|e| {
                RelayError::misconfigured(format!(
                    "Kafka producer settings rejected: {}",
                    crate::config::client_config_error(&e)
                ))
            })
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

    /// The partition `record` goes to: its own, else its key's (Kafka's murmur2 over the
    /// topic's partitions as last read, as librdkafka's `murmur2_random` and Java clients
    /// place it), else, without a key, the topic's current one for keyless records, which
    /// moves to the next partition every 10 ms (librdkafka's sticky partitioning, its
    /// `sticky.partitioning.linger.ms`). `None` where the topic's partition count is unknown
    /// (librdkafka places it). The relay names every record's partition, so that a
    /// partition's first record can travel alone.
    fn partition_of(&mut self, record: &OutboxRecord, count: Option<i32>) -> Option<i32> {
        if let Some(p) = record.partition {
            return Some(p);
        }
        let count = count?;
        if let Some(key) = &record.key {
            return Some(crate::deliver::exactly_once::rule::key_partition(
                key, count,
            ));
        }
        let now = std::time::Instant::now();
        let (partition, since) = self
            .keyless
            .entry(record.topic.clone())
            .or_insert((count - 1, None));
        if since.is_none_or(|since| now.saturating_duration_since(since) >= KEYLESS_STICKY)
            || *partition >= count
        {
            *partition = (*partition + 1) % count.max(1);
            *since = Some(now);
        }
        Some(*partition)
    }

    /// Hands `record` to librdkafka with the opaque `slot`.
    fn hand_over(
        &mut self,
        record: &OutboxRecord,
        partition: Option<i32>,
        slot: usize,
    ) -> Result<(), KafkaError> {
        let client = self.producer.client().native_ptr();
        native::produce(client, &mut self.topic_handles, record, partition, slot)
    }

    /// What librdkafka's refusal to take `record` (for `partition`) means.
    fn not_taken(
        &self,
        record: &OutboxRecord,
        partition: Option<i32>,
        tag: Tag,
        error: KafkaError,
    ) -> Sent {
        match error {
            KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull) => Sent::QueueFull(tag),
            KafkaError::MessageProduction(code) if is_refusal(code) => {
                let reason = if code == RDKafkaErrorCode::UnknownPartition {
                    unknown_partition(record, partition, &code.to_string())
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

    /// Hands librdkafka the parked records of `topic`/`partition` that may go now
    /// (first_writes.rs), in order; `None`: of every partition. Stops at a full queue (the
    /// next report retries every partition). One librdkafka refuses on the spot gets its
    /// outcome here.
    fn release_parked(&mut self, only: Option<(&Arc<str>, i32)>) {
        if self.first_writes.parked() == 0 {
            return;
        }
        let now = std::time::Instant::now();
        loop {
            let next = match only {
                Some((topic, p)) => self
                    .first_writes
                    .next_release_of(topic, p, now)
                    .map(|(slot, record)| (topic.clone(), p, slot, record)),
                None => self.first_writes.next_release(now),
            };
            let Some((topic, p, slot, record)) = next else {
                return;
            };
            let Err(error) = self.hand_over(&record, Some(p), slot) else {
                continue;
            };
            if matches!(
                error,
                KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
            ) {
                self.first_writes.unrelease(&topic, p, slot, record);
                self.release_stalled = true;
                return;
            }
            let (tag, _) = self.in_flight.take(slot);
            self.first_writes.not_sent(&topic, p, slot);
            let decided = match self.not_taken(&record, Some(p), tag, error) {
                Sent::Refused(tag, error, record) => (tag, Outcome::Refused { error, record }),
                Sent::Failed(tag, error) => (tag, Outcome::Failed { error }),
                Sent::Accepted | Sent::QueueFull(_) => unreachable!("not a refusal"),
            };
            let refused = matches!(decided.1, Outcome::Refused { .. });
            self.decided.push_back(decided);
            if refused && self.gapless {
                // No later record of the partition may land before the refused one's dead
                // letter (exactly_once/rule.rs): they are not sent; the session ends, and the
                // next one dead-letters the refused record before them.
                self.fail_parked(&topic, p, "an earlier record of it was refused");
            }
        }
    }

    /// Fails the records parked behind `topic`/`partition`'s first (they are sent again by
    /// the next session).
    fn fail_parked(&mut self, topic: &Arc<str>, p: i32, why: &str) {
        for (slot, _) in self.first_writes.take_parked(topic, p) {
            let (tag, _) = self.in_flight.take(slot);
            let error = format!("not sent: {why} ({topic} partition {p})");
            self.decided.push_back((tag, Outcome::Failed { error }));
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
        if let Some(reason) = self.rules.too_large(record) {
            return Sent::Refused(tag, reason, refused_record(record).oversized());
        }
        if let Some(reason) = self
            .rules
            .keyless_for_compacted(record)
            .or_else(|| self.rules.timestamp_out_of_range(record))
        {
            return Sent::Refused(tag, reason, refused_record(record));
        }
        // A partition the topic does not have, judged on the count the relay knows (librdkafka
        // may not have the metadata of a topic just created yet, and would fail it later).
        // The topic's partition count as last read, looked up once per record.
        let count = self.latest_counts.get(&record.topic).copied();
        if let (Some(p), Some(count)) = (record.partition, count) {
            if !(0..count).contains(&p) {
                let reason =
                    unknown_partition(record, record.partition, &format!("{count} partitions"));
                return Sent::Refused(tag, reason, refused_record(record));
            }
        }
        let partition = self.partition_of(record, count);
        let now = std::time::Instant::now();
        // A partition's first record travels alone (first_writes.rs); the rule applies where
        // the topic's partitions are known (every partition the relay names is one of them).
        let place = Place {
            topic: record.topic.clone(),
            partition,
            gated: partition.is_some() && count.is_some(),
            sent: now,
            bytes: crate::deliver::linger::size(record),
        };
        let gated = place.gated;
        let slot = self.in_flight.put(tag, place);
        if let (Some(p), true) = (partition, gated) {
            if !self.first_writes.admit(&record.topic, p, slot, now) {
                if librdkafka_message_size(record) > self.queue_max_bytes {
                    let (tag, _) = self.in_flight.take(slot);
                    let reason = LARGER_THAN_QUEUE.into();
                    return Sent::Refused(tag, reason, refused_record(record).oversized());
                }
                self.first_writes
                    .park(&record.topic, p, slot, record.detached());
                return Sent::Accepted;
            }
        }
        let Err(error) = self.hand_over(record, partition, slot) else {
            return Sent::Accepted;
        };
        let (tag, _) = self.in_flight.take(slot);
        if let (Some(p), true) = (partition, gated) {
            self.first_writes.not_sent(&record.topic, p, slot);
        }
        self.not_taken(record, partition, tag, error)
    }

    async fn next_report(&mut self) -> (Tag, Outcome) {
        loop {
            if let Some(decided) = self.decided.pop_front() {
                return decided;
            }
            if let Some(report) = self.taken.pop_front() {
                let (tag, place) = self.in_flight.take(report.slot);
                let outcome = match report.error {
                    // An offset is Kafka's acknowledgement. librdkafka reports a record
                    // delivered without one where it inferred the delivery from a later
                    // request's (first_writes.rs says when that is wrong) or from a duplicate
                    // sequence: not proof enough to confirm past it. The session ends and the
                    // next one sends it again.
                    None if report.offset < 0 => Outcome::Failed {
                        error: format!(
                            "librdkafka reported a record of {} delivered without an offset (inferred from another \
                             request, not acknowledged by Kafka); it is sent again",
                            place.topic
                        ),
                    },
                    None => Outcome::Acknowledged,
                    Some(refusal) => {
                        let fatal = self.producer.client().fatal_error();
                        delivery_outcome(refusal, fatal)
                    }
                };
                let stalled = std::mem::take(&mut self.release_stalled);
                if let (Some(p), true) = (place.partition, place.gated) {
                    let acknowledged = matches!(outcome, Outcome::Acknowledged);
                    // The clock is read once per batch of reports, not per report (the
                    // record's send time would not do: a record waits in flight for as long
                    // as Kafka takes, hours through an outage).
                    let first_failed = self.first_writes.reported(
                        &place.topic,
                        p,
                        report.slot,
                        acknowledged,
                        self.taken_at,
                    );
                    if first_failed && (self.gapless || !matches!(outcome, Outcome::Refused { .. }))
                    {
                        // The session ends on this outcome (a neighbour's of a snapshot row or
                        // dead letter aside, which costs that session), or, gapless, a refused
                        // first must have its dead letter before any later record lands: its
                        // parked records are not sent (one could land ahead of it), and the
                        // next session sends them again.
                        let topic = place.topic.clone();
                        self.fail_parked(
                            &topic,
                            p,
                            "the first record of the partition failed before it",
                        );
                    }
                    // What the report lets go: the partition's parked records.
                    self.release_parked(Some((&place.topic, p)));
                }
                if stalled {
                    self.release_parked(None);
                }
                return (tag, outcome);
            }
            if self.in_flight.used == 0 {
                return std::future::pending().await;
            }
            // Everything that arrived, in one go; the queue keeps its capacity. When it was
            // taken stands for when each of these records was acknowledged (a moment later).
            self.taken
                .extend(self.reports.queue.lock().unwrap().drain(..));
            if !self.taken.is_empty() {
                self.taken_at = std::time::Instant::now();
            }
            if self.taken.is_empty() && self.in_flight.used == self.first_writes.parked() {
                // Only parked records, none in librdkafka (its queue was full with nothing of
                // the relay's in it): no report will come; try again shortly. Cancel-safe.
                tokio::time::sleep(Duration::from_millis(5)).await;
                self.release_parked(None);
                continue;
            }
            if self.taken.is_empty() {
                // Cancel-safe: nothing was taken; a report arriving meanwhile leaves a permit.
                self.reports.arrived.notified().await;
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight.used + self.decided.len()
    }

    fn in_flight_bytes(&self) -> usize {
        self.in_flight.bytes
    }

    fn waiting_longer_than(&self, age: Duration) -> Vec<Unacknowledged> {
        self.in_flight
            .waiting_longer_than(age, std::time::Instant::now())
    }

    /// Creates `topic` unless this producer already saw it (see `admin.rs`).
    async fn ensure_topic(&mut self, topic: &Arc<str>) -> Result<Topic, RelayError> {
        self.ensure_topic_now(topic).await
    }

    fn ensure_topic_in_background(&mut self, topic: &Arc<str>) -> Option<Result<(), String>> {
        self.ensure_topic_in_background_now(topic)
    }

    fn refuses(&self, record: &OutboxRecord) -> Option<(String, bool)> {
        self.too_large_for_producer(record)
            .or_else(|| self.rules.too_large(record))
            .map(|reason| (reason, true))
            .or_else(|| {
                self.rules
                    .keyless_for_compacted(record)
                    .or_else(|| self.rules.timestamp_out_of_range(record))
                    .map(|r| (r, false))
            })
    }

    fn rebuild(&mut self) -> Result<(), RelayError> {
        debug_assert_eq!(self.in_flight.used, 0, "rebuilt with records in flight");
        debug_assert!(self.decided.is_empty() && self.first_writes.parked() == 0);
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
        // The old client's topic handles go before it.
        let handles = std::mem::take(&mut self.topic_handles);
        // Dropping a librdkafka client flushes and joins its threads: not on a runtime thread.
        tokio::task::spawn_blocking(move || {
            drop(handles);
            drop(old)
        });
        // A new producer id: Kafka holds no sequence of it anywhere.
        self.first_writes = FirstWrites::default();
        self.batch_size = batch_size;
        Ok(())
    }
}
