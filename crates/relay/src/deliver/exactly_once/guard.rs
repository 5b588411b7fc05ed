//! The delivery stage's side of `--exactly-once`: before a replayed event (or its dead
//! letter) is sent, its partition is chosen and its position written, and the partition's
//! last record decides whether it is already in Kafka ([`super::rule::Tails`]). A session that took the slot over reads
//! no tail before its [`Fence`].

use super::rule::{self, Decision, Distrust, EventPosition, Fence, Source, Tails};
use super::tail::{ReadTail, TailReader};
use crate::config::{ClientRole, KafkaSettings};
use crate::error::RelayError;
use crate::metrics::Metrics;
use outbox_router::OutboxRecord;
use std::sync::Arc;

/// The producer settings of a session with `--exactly-once`: a record the broker refuses
/// stops the producer rather than leave a gap in its partition, so every partition stays a
/// gap-free prefix, which the tails rely on.
pub fn producer_settings(kafka: &KafkaSettings) -> KafkaSettings {
    let mut kafka = kafka.clone();
    kafka
        .properties
        .push(("enable.gapless.guarantee".into(), "true".into()));
    kafka
}

/// `--exactly-once` for one session: the tails of the partitions it writes to.
pub struct Guard {
    tails: Tails,
    /// `--cleanup`: the dead-letter topic's partition tails, apart from the ones the dead
    /// letters are written against (asking must not move those on), and the partitions whose
    /// tail says nothing of this source.
    letters: Tails,
    letters_unknown: std::collections::HashSet<(Arc<str>, i32)>,
    /// Where the tails are read.
    reader: Box<dyn ReadTail>,
    /// No tail is read before it (a takeover waits out the old holder's last requests).
    fence: Option<Fence>,
}

impl Guard {
    /// The guard of a session streaming `slot` from the server `system_id`/`timeline`,
    /// reading tails from the broker of `kafka`. A session that took the slot over from
    /// another instance (`took_over`) reads no tail before the old holder's last produce
    /// requests (`kafka`'s request timeout) cannot land any more.
    pub fn for_session(
        slot: &str,
        system_id: &str,
        timeline: u32,
        history: &[(u32, pgoutput::Lsn)],
        wal_end: pgoutput::Lsn,
        took_over: bool,
        kafka: &KafkaSettings,
    ) -> Self {
        Self::new(
            Source::new(slot, system_id, timeline)
                .with_history(system_id, history)
                .with_wal_end(wal_end),
            took_over.then(|| Fence::after(kafka.request_timeout())),
            Box::new(TailReader::new(kafka.client_config(ClientRole::Admin))),
        )
    }

    pub fn new(source: Source, fence: Option<Fence>, reader: Box<dyn ReadTail>) -> Self {
        Self {
            letters: Tails::new(source.clone()),
            letters_unknown: std::collections::HashSet::new(),
            tails: Tails::new(source),
            reader,
            fence,
        }
    }

    /// Chooses `record`'s partition among `partitions` (as librdkafka would for its key) and
    /// writes its position header. `None` when the record's own partition does not exist
    /// (the producer then refuses it).
    pub fn place(
        &self,
        record: &mut OutboxRecord,
        event: &EventPosition,
        partitions: i32,
    ) -> Option<i32> {
        let partition = rule::partition_for(record, partitions);
        let header = rule::Written::encode(self.tails.source(), event, partitions);
        record
            .headers
            .push((rule::POSITION_HEADER.into(), Some(header)));
        if !(0..partitions).contains(&partition) {
            return None;
        }
        record.partition = Some(partition);
        Some(partition)
    }

    /// `--cleanup`: whether the dead letter of the replayed event at `event`, whose record is
    /// `record`, may be in `dead_letter_topic` (of `partitions` partitions). The event stage
    /// skipped it as already in Kafka; a refused event is there as its dead letter (no later
    /// event is sent before that is acknowledged), and its row must stay in the outbox. True
    /// when the partition its dead letter would be in ends at or after it, or ends with a
    /// record that says nothing of this source: a row is kept rather than lost.
    pub async fn dead_letter_may_be_in(
        &mut self,
        dead_letter_topic: &Arc<str>,
        partitions: i32,
        record: &OutboxRecord,
        event: &EventPosition,
    ) -> Result<bool, RelayError> {
        // Where its dead letter goes: by its key, else its event id, as `place` puts it (a
        // letter names no partition of its own).
        let letter = OutboxRecord {
            topic: dead_letter_topic.clone(),
            key: record.key.clone(),
            value: None,
            headers: record
                .headers
                .iter()
                .filter(|(k, _)| &**k == "id")
                .cloned()
                .collect(),
            partition: None,
            timestamp_ms: None,
        };
        let partition = rule::partition_for(&letter, partitions);
        let at = (dead_letter_topic.clone(), partition);
        loop {
            match self.letters.decide(dead_letter_topic, partition, event) {
                (Decision::Skip, _) => return Ok(true),
                (Decision::Produce, _) => return Ok(self.letters_unknown.contains(&at)),
                (Decision::ReadTail, _) => {
                    let read = self.reader.read(dead_letter_topic, partition).await?;
                    if self
                        .letters
                        .learned(dead_letter_topic, partition, partitions, read)
                        .is_some()
                    {
                        self.letters_unknown.insert(at.clone());
                    }
                }
            }
        }
    }

    /// Whether the replayed event at `event` is already in `topic`/`partition` of a topic
    /// with `partitions` (at or before the partition's last record), reading that record
    /// first when this session has not yet.
    pub async fn already_in_kafka(
        &mut self,
        metrics: &Metrics,
        topic: &Arc<str>,
        partition: i32,
        partitions: i32,
        event: &EventPosition,
    ) -> Result<bool, RelayError> {
        loop {
            match self.tails.decide(topic, partition, event) {
                (Decision::Skip, _) => return Ok(true),
                (Decision::Produce, skipped) => {
                    if let Some(skipped) = skipped.filter(|n| *n > 0) {
                        tracing::info!(topic = &**topic, partition, skipped, "replayed events already in Kafka were not produced again (--exactly-once); producing from here");
                    }
                    return Ok(false);
                }
                (Decision::ReadTail, _) => {
                    if let Some(fence) = self.fence {
                        let wait = fence
                            .not_before
                            .saturating_duration_since(std::time::Instant::now());
                        if !wait.is_zero() {
                            tracing::info!(wait_ms = wait.as_millis() as u64, "this instance took the slot over: waiting until the previous holder's last produce requests cannot land any more before reading partition tails (--exactly-once)");
                            tokio::time::sleep(wait).await;
                        }
                        // Cleared only once waited out: a cancelled wait resumes where it was.
                        self.fence = None;
                    }
                    let read = self.reader.read(topic, partition).await?;
                    match self.tails.learned(topic, partition, partitions, read) {
                        None => {}
                        Some(Distrust::Foreign { offset, found }) => {
                            metrics.exactly_once_foreign_tails.inc();
                            tracing::warn!(topic = &**topic, partition, offset, found, "the partition's last record was not written by this relay with --exactly-once (another producer, another slot, or this relay before the flag): events replayed to this partition are produced again and may be duplicated once. Exactly-once needs the relay to be the only writer of its partitions");
                        }
                        Some(Distrust::OtherServer { offset, then }) => {
                            metrics.exactly_once_foreign_tails.inc();
                            tracing::warn!(topic = &**topic, partition, offset, then, now = %self.tails.source().server, "the partition's last record was written from another PostgreSQL server or timeline (a restore or a failover): its position says nothing about this server's, so events replayed to this partition are produced again and may be duplicated once");
                        }
                        Some(Distrust::BeyondWalEnd {
                            offset,
                            commit,
                            wal_end,
                        }) => {
                            metrics.exactly_once_foreign_tails.inc();
                            tracing::warn!(topic = &**topic, partition, offset, %commit, %wal_end, "the partition's last record was written from this PostgreSQL server at a position past the end of its WAL: the server went back in time (restored from a file-system copy or a VM snapshot), so the commits it makes now reuse positions Kafka already holds; events replayed to this partition are produced again (nothing is skipped) and may be duplicated once");
                        }
                        Some(Distrust::PartitionsChanged { offset, then, now }) => {
                            metrics.exactly_once_foreign_tails.inc();
                            tracing::warn!(topic = &**topic, partition, offset, then, now, "the partition's last record was written when the topic had another partition count: keys moved partitions, so events replayed to this partition are produced again and may be duplicated once");
                        }
                    }
                }
            }
        }
    }
}
