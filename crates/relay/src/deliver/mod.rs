//! Deliver: the one stage every source (replication stream, initial snapshot, polling) hands
//! its routed rows to. It produces each event or dead-letters it, and gives back each
//! event's [`Ticket`] once Kafka acknowledged the event or its dead letter — the only way a
//! source learns that an event is safe. It also owns the queue-full policy (wait for a
//! delivery report, never sleep-poll), the shutdown drain, and the dead-letter rules and counts.
//!
//! - `tracker.rs`: the acknowledgement rule (what position may be confirmed).
//! - `producer/`: the producer boundary ([`Producer`]: send, reports, topics) and librdkafka
//!   behind it.
//! - `dead_letter.rs`: what a dead letter carries.
//! - `linger.rs`: records held while their source is behind, handed over in groups.
//! - `outcome.rs`: what a delivery report says.
//! - `exactly_once/`: `--exactly-once`, which replayed events are already in Kafka (the
//!   stage asks its [`exactly_once::Guard`]).
//! - `refusals.rs`: what the broker refused, remembered for the replay of the next session.
//!
//! Refusals, in every mode alike: an event the broker refuses for what it is goes to the
//! dead-letter topic with its ticket; a dead letter refused as it is goes again without its
//! payload; a dead letter refused even so stops the relay (exit non-zero with the fix) —
//! never a retry loop, never a skipped event. A delivery that fails in transit ends the
//! session (`BrokerUnavailable`): nothing after it is confirmed. So does a record failed only
//! because another record of its batch was refused: the replay dead-letters the refused one
//! first ([`Refusals`]) and its neighbours go through.
//!
//! Dead letters go out in their events' order. With `--exactly-once` a dead letter also waits
//! until every earlier event's outcome is known, so the dead-letter topic is written in
//! position order, which its tail check relies on: a refusal reported late never lands behind
//! a later dead letter.

pub mod dead_letter;
pub mod exactly_once;
#[cfg(test)]
pub mod fake;
pub mod linger;
pub mod outcome;
pub mod producer;
pub mod refusals;
pub mod tracker;
pub mod written;

pub use dead_letter::DeadLetter;
pub use dead_letter::RefusedRecord;
pub use exactly_once::{EventPosition, Guard, Source};
pub use linger::CATCH_UP_LINGER;
pub use outcome::{Kind, Origin, Outcome, Tag};
pub use producer::{KafkaProducer, Producer, Sent, Topic};
pub use refusals::Refusals;
pub use tracker::{AckTracker, Seq, Ticket};
pub use written::WrittenTopics;

use crate::error::RelayError;
use crate::metrics::Metrics;
use anyhow::anyhow;
use foldhash::{HashMap, HashMapExt as _};
use outbox_router::{InvalidRow, OutboxRecord};
use prometheus_client::metrics::counter::Counter;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// How long the producer's queue may stay full with nothing of the relay's in it before the
/// record that does not fit is refused: it alone is larger than the whole queue.
const QUEUE_FULL_WHILE_IDLE: Duration = Duration::from_secs(1);

/// A routed row the stage can deliver: an event, or a row the router could not route.
#[derive(Debug)]
pub enum Routed {
    Record(OutboxRecord),
    Invalid(InvalidRow),
    /// The end-to-end canary written at `written_ms`: produced to its own topic; its
    /// acknowledgement sets the canary's age. Never dead-lettered: a refusal is logged.
    Canary {
        record: OutboxRecord,
        written_ms: i64,
    },
}

/// Events and dead letters acknowledged by this stage (for the session's closing log line).
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub events: u64,
    pub dead_letters: u64,
    /// Replayed events (or dead letters) found already in Kafka (`--exactly-once`).
    pub skipped: u64,
}

pub struct Deliver<P: Producer> {
    producer: P,
    dead_letter_topic: Arc<str>,
    metrics: Arc<Metrics>,
    /// Tickets acknowledged and not yet taken by the source.
    acknowledged: VecDeque<Ticket>,
    /// Dead letters waiting to be produced, in their events' order.
    dead_letters: VecDeque<(Tag, DeadLetter)>,
    /// `--exactly-once`: the events handed over whose outcome is not known yet (a dead
    /// letter waits for every earlier one).
    unresolved: BTreeSet<Seq>,
    /// What the broker refused, remembered for the next sessions.
    refusals: Refusals,
    /// What it refused in this process's earlier sessions (`None`: nothing, nothing to ask).
    earlier: Option<refusals::Earlier>,
    /// A record failed only because another of its batch was refused: the session ends, and
    /// the refusal, maybe reported later, must be remembered ([`Self::settle`]).
    neighbour_failed: bool,
    /// Events accepted and not yet handed to the producer (a source that is behind).
    held: linger::Held,
    /// `outbox_relay_events_total` per topic, looked up once per topic.
    counters: HashMap<Arc<str>, Counter>,
    /// The topics written to (Connect's active topics).
    written: Arc<WrittenTopics>,
    /// `written`'s resets when `counters` was last emptied: a reset of the active topics
    /// empties it again, so the topics written next are noted again.
    topics_reset: u64,
    counts: Counts,
    exactly_once: Option<Guard>,
    /// The partitions reported stuck (`--stuck-partition-after`), to log each once.
    stuck: Vec<(Arc<str>, Option<i32>)>,
    /// How long a partition may leave a record unanswered before it is reported.
    stuck_after: Duration,
    /// `--cleanup`: the events that went to the dead-letter topic (their rows stay in the
    /// outbox); `None` when nobody asks.
    dead_lettered: Option<Vec<Seq>>,
    /// Polling mode: the events whose dead letter cannot give them back whole, whose rows the
    /// source keeps (see [`Self::keeping_rows`]); `None` when nobody asks.
    kept: Option<KeptRows>,
    /// `--exactly-once`: the streamed events whose dead letter Kafka has not acknowledged yet.
    /// No later event is handed to the producer before: a partition's tail then proves that
    /// every earlier event of the session is in its topic or in the dead-letter topic, in
    /// every later process too, which no longer knows what was refused (exactly_once/rule.rs).
    barrier: BTreeSet<Seq>,
}

/// Where a source keeps the rows of events whose dead letter cannot give them back whole, and
/// those events since they were last taken.
#[derive(Debug, Default)]
struct KeptRows {
    /// `schema.table`.
    table: Arc<str>,
    events: Vec<KeptEvent>,
}

/// An event whose dead letter cannot give it back whole (refused for its size, or refused at
/// all: a refused event's letter keeps its key, id and at most its payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptEvent {
    pub seq: Seq,
    /// Its row's id in the table that keeps it (the letter's [`dead_letter::ROW_KEPT`]).
    pub id: uuid::Uuid,
    pub reason: String,
    pub original_topic: Option<String>,
    pub original_size: Option<usize>,
}

impl<P: Producer> Deliver<P> {
    pub fn new(
        producer: P,
        dead_letter_topic: &str,
        metrics: Arc<Metrics>,
        written: Arc<WrittenTopics>,
    ) -> Self {
        Self {
            producer,
            dead_letter_topic: dead_letter_topic.into(),
            metrics,
            acknowledged: VecDeque::new(),
            dead_letters: VecDeque::new(),
            unresolved: BTreeSet::new(),
            refusals: Refusals::default(),
            earlier: None,
            neighbour_failed: false,
            held: linger::Held::default(),
            counters: HashMap::new(),
            written,
            topics_reset: 0,
            counts: Counts::default(),
            exactly_once: None,
            stuck: Vec::new(),
            stuck_after: Duration::from_secs(crate::config::defaults::STUCK_PARTITION_AFTER_S),
            dead_lettered: None,
            kept: None,
            barrier: BTreeSet::new(),
        }
    }

    /// Polling mode, which retires each row it relays: remember the events whose dead letter
    /// cannot give them back whole ([`Self::take_kept`]), and name in each such letter where
    /// its row is kept, `table` (`schema.table`).
    pub fn keeping_rows(mut self, table: &str) -> Self {
        self.kept = Some(KeptRows {
            table: table.into(),
            events: Vec::new(),
        });
        self
    }

    /// The events dead-lettered without a way back since the last call, once each.
    pub fn take_kept(&mut self) -> Vec<KeptEvent> {
        let Some(kept) = &mut self.kept else {
            return Vec::new();
        };
        let mut events = std::mem::take(&mut kept.events);
        // A letter cut down after it was noted is noted again: its latest word counts.
        events.reverse();
        let mut seen = std::collections::HashSet::new();
        events.retain(|e| seen.insert(e.seq));
        events.reverse();
        events
    }

    /// Notes `letter`'s event when the letter cannot give it back whole, and names in it where
    /// the source keeps the row.
    fn keep_row(&mut self, seq: Seq, mut letter: DeadLetter) -> DeadLetter {
        let Some(kept) = &mut self.kept else {
            return letter;
        };
        if letter.gives_back_whole() {
            return letter;
        }
        // A letter cut down keeps the id it was given.
        let id = letter
            .row_kept
            .as_deref()
            .and_then(|k| k.rsplit('/').next())
            .and_then(|id| uuid::Uuid::parse_str(id).ok())
            .unwrap_or_else(uuid::Uuid::now_v7);
        letter.row_kept = Some(format!("{}/{id}", kept.table));
        kept.events.push(KeptEvent {
            seq,
            id,
            reason: letter.reason.clone(),
            original_topic: letter.original_topic.clone(),
            original_size: letter.original_size,
        });
        letter
    }

    /// Starts making sure `topic` exists, off the delivery path (the canary's topic, as the
    /// session starts, so that the first canary finds it).
    pub fn prepare_topic(&mut self, topic: &str) {
        let _ = self.producer.ensure_topic_in_background(&topic.into());
    }

    /// What the broker refused, shared with the next sessions: an event it refused is
    /// dead-lettered before it is sent again.
    pub fn with_refusals(mut self, refusals: Refusals) -> Self {
        self.earlier = refusals.earlier();
        self.refusals = refusals;
        self
    }

    /// `--stuck-partition-after`.
    /// `--cleanup`: remember which events go to the dead-letter topic
    /// ([`Self::take_dead_lettered`]).
    pub fn noting_dead_letters(mut self) -> Self {
        self.dead_lettered = Some(Vec::new());
        self
    }

    /// The events dead-lettered since the last call (in the order they were queued).
    pub fn take_dead_lettered(&mut self) -> Vec<Seq> {
        self.dead_lettered
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub fn with_stuck_after(mut self, after: Duration) -> Self {
        self.stuck_after = after;
        self
    }

    /// How often stuck partitions are looked for: a tenth of the limit, between 1 and 10 s.
    pub fn stuck_check_every(&self) -> Duration {
        (self.stuck_after / 10).clamp(Duration::from_secs(1), Duration::from_secs(10))
    }

    /// Reports the partitions whose oldest record has waited for Kafka longer than the limit
    /// (a partition whose leader does not answer, a broker refusing to take it): /ready
    /// turns red, the metric counts them, and each is logged once, naming topic and
    /// partition, and again when it moves. Nothing at or after such a record is confirmed
    /// meanwhile; the rest keeps flowing within the in-flight window.
    pub fn check_stuck(&mut self) {
        let stuck = self.producer.waiting_longer_than(self.stuck_after);
        for s in &stuck {
            if !self
                .stuck
                .iter()
                .any(|(t, p)| *t == s.topic && *p == s.partition)
            {
                tracing::error!(
                    topic = %s.topic,
                    partition = s.partition.map_or(-1, |p| p),
                    waited_seconds = s.waited.as_secs(),
                    "no acknowledgement from Kafka for {s}: nothing at or after its oldest record is confirmed until \
                     it is answered (is the partition's leader up? see the broker's logs)"
                );
            }
        }
        for (topic, partition) in &self.stuck {
            if !stuck
                .iter()
                .any(|s| s.topic == *topic && s.partition == *partition)
            {
                tracing::info!(%topic, partition = partition.map_or(-1, |p| p), "Kafka answers again for this partition");
            }
        }
        self.metrics.set_stuck(&stuck);
        self.stuck = stuck.into_iter().map(|s| (s.topic, s.partition)).collect();
    }

    /// `--exactly-once`: every record carries its position; replayed events already in their
    /// partition are acknowledged without being produced again (see [`Guard`]).
    pub fn with_exactly_once(mut self, guard: Guard) -> Self {
        self.exactly_once = Some(guard);
        self
    }

    /// After a session failed on the broker: takes the delivery reports still coming (for at
    /// most `within`) so that a record the broker refused is remembered for the next session,
    /// whatever order the reports came in (a batch's innocent records may be reported before
    /// the one that failed it). Confirms nothing.
    pub async fn settle(&mut self, within: Duration) {
        // Only a refusal ends a session this way: with --exactly-once (any refusal stops the
        // producer) or a batch failed for one record. A broker that is away is not waited for.
        if self.exactly_once.is_none() && !self.neighbour_failed {
            return;
        }
        let deadline = tokio::time::Instant::now() + within;
        while self.producer.in_flight() > 0 {
            match tokio::time::timeout_at(deadline, self.producer.next_report()).await {
                Ok((tag, outcome)) => {
                    let _ = self.on_report(tag, outcome);
                }
                Err(_) => return,
            }
        }
    }

    /// Records handed over and not yet acknowledged (the in-flight bound uses it).
    pub fn in_flight(&self) -> usize {
        self.producer.in_flight() + self.dead_letters.len() + self.held.len()
    }

    /// Key and value bytes handed over and not yet acknowledged, held ones included (parked
    /// records too: librdkafka's own queue bound does not see those).
    pub fn in_flight_bytes(&self) -> usize {
        self.producer.in_flight_bytes() + self.held.bytes()
    }

    /// How long events may be held before they go to the producer: [`CATCH_UP_LINGER`]
    /// while their source is behind, zero (the default) while it keeps up. See `linger.rs`.
    pub fn linger(&mut self, linger: Duration) {
        self.held.set_linger(linger);
    }

    /// Anything still to come back: in flight, a dead letter to send, or a ticket to take.
    pub fn has_pending(&self) -> bool {
        self.in_flight() > 0 || !self.acknowledged.is_empty()
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    #[cfg(test)]
    pub fn producer(&self) -> &P {
        &self.producer
    }

    /// Produces `routed` (or its dead letter) with `ticket`. Waits while the producer's
    /// queue is full (backpressure); acknowledgements seen meanwhile are kept for
    /// [`next_acknowledged`](Self::next_acknowledged).
    pub async fn submit(
        &mut self,
        routed: Routed,
        ticket: Ticket,
        origin: Origin,
    ) -> Result<(), RelayError> {
        match routed {
            Routed::Record(mut record) => {
                let partitions = match self.topic(&record.topic).await? {
                    Ok(partitions) => partitions,
                    Err(reason) => {
                        return self
                            .dead_letter_refused(&reason, &record, false, ticket, origin)
                            .await;
                    }
                };
                // Refused by the broker in an earlier session: not sent to be refused again.
                let remembered = origin
                    .event
                    .as_ref()
                    .zip(self.earlier.as_ref())
                    .and_then(|(event, earlier)| earlier.event(event))
                    .map(|reason| {
                        (
                            format!("{reason} (refused by the broker in an earlier session)"),
                            false,
                        )
                    });
                if let Some(event) = origin.event.clone().filter(|_| self.exactly_once.is_some()) {
                    // Refusals first, in position order: an event refused here never reaches
                    // its partition, so its partition's tail proves nothing about it.
                    let placed = self.place(&mut record, &event, partitions);
                    if let Some((reason, oversized)) =
                        remembered.or_else(|| self.producer.refuses(&record))
                    {
                        return self
                            .dead_letter_refused(&reason, &record, oversized, ticket, origin)
                            .await;
                    }
                    if let Some((partition, partitions)) = placed {
                        if self
                            .already_in_kafka(&record.topic, partition, partitions, &event)
                            .await?
                        {
                            // `--cleanup`: what Kafka holds may be its dead letter (it was
                            // refused before this process): its row stays in the outbox.
                            if self.dead_lettered.is_some()
                                && self.dead_letter_may_hold(&record, &event).await?
                            {
                                if let Some(noted) = &mut self.dead_lettered {
                                    noted.push(ticket.seq());
                                }
                            }
                            self.skipped(ticket);
                            return self.send_dead_letters().await;
                        }
                    }
                } else if let Some((reason, oversized)) = remembered {
                    return self
                        .dead_letter_refused(&reason, &record, oversized, ticket, origin)
                        .await;
                }
                if self.exactly_once.is_some() {
                    self.unresolved.insert(ticket.seq());
                }
                let counter = self.topic_counter(&record.topic);
                let tag = Tag {
                    ticket,
                    origin,
                    kind: Kind::Event(counter),
                };
                if self.held.push(record, tag) {
                    self.release_held(false).await?;
                }
            }
            Routed::Invalid(row) => {
                let letter = DeadLetter::from_invalid_row(row, origin.position);
                self.queue_dead_letter(ticket, origin, letter);
            }
            Routed::Canary { record, written_ms } => {
                // The canary never stops the relay: a topic it cannot have (refused, not
                // allowed) is logged, and its age says the rest. Its topic is made sure of
                // off the delivery path: a CreateTopics request may take a minute while the
                // cluster elects a controller, and the events must not wait for it.
                let refused = match self.producer.ensure_topic_in_background(&record.topic) {
                    None => {
                        tracing::debug!(
                            topic = &*record.topic,
                            "the canary's topic is being created: this canary is not sent"
                        );
                        self.acknowledged.push_back(ticket);
                        return self.send_dead_letters().await;
                    }
                    Some(Err(reason)) => Some(reason),
                    Some(Ok(())) => match self.topic(&record.topic).await {
                        Ok(Ok(_)) => None,
                        Ok(Err(reason)) => Some(reason),
                        Err(e) => Some(e.to_string()),
                    },
                };
                if let Some(reason) = refused {
                    tracing::warn!(
                        topic = &*record.topic,
                        "the canary cannot go to its topic: {reason}"
                    );
                    self.acknowledged.push_back(ticket);
                    return self.send_dead_letters().await;
                }
                let tag = Tag {
                    ticket,
                    origin,
                    kind: Kind::Canary(written_ms),
                };
                if self.held.push(record, tag) {
                    self.release_held(false).await?;
                }
            }
        }
        self.send_dead_letters().await
    }

    /// Dead-letters `record`, refused before sending for `reason` (for its size: `oversized`).
    async fn dead_letter_refused(
        &mut self,
        reason: &str,
        record: &OutboxRecord,
        oversized: bool,
        ticket: Ticket,
        origin: Origin,
    ) -> Result<(), RelayError> {
        let refused = producer::refused_record(record);
        let letter = DeadLetter::refused(
            reason,
            if oversized {
                refused.oversized()
            } else {
                refused
            },
            origin.table.clone(),
            origin.position,
        );
        self.queue_dead_letter(ticket, origin, letter);
        self.send_dead_letters().await
    }

    /// The next acknowledged event's ticket. Pending while nothing is in flight; held events
    /// go to the producer when their linger is over. Cancel-safe (it is raced against the
    /// replication stream): every state change happens after its only awaits (the producer's
    /// cancel-safe report, topic creation, a timer), and a dead letter or a held event leaves
    /// its queue only once the producer accepted it.
    pub async fn next_acknowledged(&mut self) -> Result<Ticket, RelayError> {
        loop {
            if let Some(ticket) = self.acknowledged.pop_front() {
                return Ok(ticket);
            }
            if !self.dead_letters.is_empty() {
                self.send_dead_letters().await?;
                if !self.acknowledged.is_empty() {
                    continue;
                }
            }
            let Some(deadline) = self.held.deadline() else {
                let (tag, outcome) = self.producer.next_report().await;
                self.on_report(tag, outcome)?;
                continue;
            };
            if deadline <= tokio::time::Instant::now() {
                self.release_held(true).await?;
                continue;
            }
            // Events held and not due yet: a report, or their time to go, whichever is first.
            tokio::select! {
                biased;
                (tag, outcome) = self.producer.next_report() => self.on_report(tag, outcome)?,
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Waits for everything in flight, handing each acknowledged ticket to `on_ack`. Held
    /// events go at once.
    pub async fn drain(&mut self, mut on_ack: impl FnMut(Ticket)) -> Result<(), RelayError> {
        self.held.set_linger(Duration::ZERO);
        let every = self.stuck_check_every();
        let mut check = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        while self.has_pending() {
            // next_acknowledged is cancel-safe: a partition that does not answer is reported
            // while waiting for it.
            tokio::select! {
                acknowledged = self.next_acknowledged() => on_ack(acknowledged?),
                _ = check.tick() => self.check_stuck(),
            }
        }
        Ok(())
    }

    /// Makes sure `topic` exists, rebuilding the producer first when it asks for it: the
    /// topic's partition count when known, or why the broker refuses the topic.
    async fn topic(&mut self, topic: &Arc<str>) -> Result<Result<Option<i32>, String>, RelayError> {
        match self.producer.ensure_topic(topic).await? {
            Topic::Refused(reason) => Ok(Err(reason)),
            Topic::Ready {
                partitions,
                rebuild,
            } => {
                if rebuild {
                    self.rebuild().await?;
                }
                Ok(Ok(partitions))
            }
        }
    }

    /// Rebuilds the producer (it asked for it), once everything it holds came back: the
    /// records of a partition never travel through two producers at once.
    async fn rebuild(&mut self) -> Result<(), RelayError> {
        while self.producer.in_flight() > 0 {
            let (tag, outcome) = self.producer.next_report().await;
            self.on_report(tag, outcome)?;
        }
        self.producer.rebuild()
    }

    fn topic_counter(&mut self, topic: &Arc<str>) -> Counter {
        let reset = self.written.resets();
        if reset != self.topics_reset {
            self.topics_reset = reset;
            self.counters.clear();
        }
        if let Some(c) = self.counters.get(topic) {
            return c.clone();
        }
        let c = self.metrics.topic_events(topic);
        self.counters.insert(topic.clone(), c.clone());
        self.written.note(topic);
        c
    }

    /// Hands the held events to the producer, oldest first, waiting for a delivery report
    /// whenever its queue is full: the queue-full policy of every mode. Cancel-safe (it is
    /// raced against the replication stream): an event is back in its place before any await.
    /// With `until_acknowledged`, returns as soon as a report made a ticket ready, so that
    /// `next_acknowledged` hands it out before waiting for the next report.
    async fn release_held(&mut self, until_acknowledged: bool) -> Result<(), RelayError> {
        while let Some((record, tag)) = self.held.pop() {
            let seq = tag.ticket.seq();
            if self.barrier.first().is_some_and(|b| *b < seq) {
                // An earlier event's dead letter first (see `barrier`): it goes once the events
                // before it are resolved, and its report (or one of theirs) is waited for.
                self.held.put_back(record, tag);
                self.send_dead_letters().await?;
                if self.barrier.first().is_none_or(|b| *b >= seq) {
                    // Its dead letter was in Kafka already (a replay): nothing to wait for.
                    continue;
                }
                self.wait_for_report().await?;
                if until_acknowledged && !self.acknowledged.is_empty() {
                    return Ok(());
                }
                continue;
            }
            let sent = self.producer.send(&record, tag);
            let idle = self.producer.in_flight() == 0;
            let full_while_idle = match (&sent, self.held.full_while_idle_since) {
                (Sent::QueueFull(_), Some(since)) if idle => Some(since),
                (Sent::QueueFull(_), None) if idle => Some(tokio::time::Instant::now()),
                _ => None,
            };
            self.held.full_while_idle_since = full_while_idle;
            match sent {
                Sent::Accepted => {}
                // A queue full with nothing of ours in it for a second: the record alone is
                // larger than the producer's queue (queue.buffering.max.kbytes).
                Sent::QueueFull(back)
                    if full_while_idle
                        .is_some_and(|since| since.elapsed() >= QUEUE_FULL_WHILE_IDLE) =>
                {
                    self.held.full_while_idle_since = None;
                    self.on_report(
                        back,
                        Outcome::Refused {
                            error: producer::LARGER_THAN_QUEUE.into(),
                            record: producer::refused_record(&record).oversized(),
                        },
                    )?;
                }
                Sent::QueueFull(back) => {
                    self.held.put_back(record, back);
                    self.wait_for_report().await?;
                    if until_acknowledged && !self.acknowledged.is_empty() {
                        return Ok(());
                    }
                }
                Sent::Refused(back, error, refused) => self.on_report(
                    back,
                    Outcome::Refused {
                        error,
                        record: refused,
                    },
                )?,
                Sent::Failed(_, error) => {
                    return Err(RelayError::BrokerUnavailable(anyhow!(
                        "{error}; nothing after the last acknowledged event is confirmed"
                    )))
                }
            }
        }
        Ok(())
    }

    async fn wait_for_report(&mut self) -> Result<(), RelayError> {
        if self.producer.in_flight() == 0 {
            // Full with nothing of ours in flight: librdkafka frees room on its own.
            tokio::time::sleep(Duration::from_millis(5)).await;
            return Ok(());
        }
        let (tag, outcome) = self.producer.next_report().await;
        self.on_report(tag, outcome)
    }

    /// `--exactly-once`: chooses `record`'s partition among the topic's `partitions` and
    /// writes its position header (see [`Guard::place`]): the partition and the count.
    /// `None` when the topic's partition count is unknown or the record's own partition does
    /// not exist (the producer then refuses it).
    fn place(
        &mut self,
        record: &mut OutboxRecord,
        event: &EventPosition,
        partitions: Option<i32>,
    ) -> Option<(i32, i32)> {
        let eo = self.exactly_once.as_ref()?;
        let count = partitions?;
        Some((eo.place(record, event, count)?, count))
    }

    /// `--exactly-once`: whether the replayed event at `event` is already in
    /// `topic`/`partition` (see [`Guard::already_in_kafka`]).
    async fn already_in_kafka(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        partitions: i32,
        event: &EventPosition,
    ) -> Result<bool, RelayError> {
        let eo = self.exactly_once.as_mut().expect("exactly-once mode");
        eo.already_in_kafka(&self.metrics, topic, partition, partitions, event)
            .await
    }

    /// `--exactly-once --cleanup`: whether the replayed event `record` (at `event`), skipped as
    /// already in Kafka, may be there as its dead letter (see [`Guard::dead_letter_may_be_in`]);
    /// true when the dead-letter topic cannot say.
    async fn dead_letter_may_hold(
        &mut self,
        record: &OutboxRecord,
        event: &EventPosition,
    ) -> Result<bool, RelayError> {
        let topic = self.dead_letter_topic.clone();
        let Ok(Some(partitions)) = self.topic(&topic).await? else {
            return Ok(true);
        };
        let eo = self.exactly_once.as_mut().expect("exactly-once mode");
        eo.dead_letter_may_be_in(&topic, partitions, record, event)
            .await
    }

    /// A replayed event (or dead letter) already in Kafka: acknowledged without producing.
    fn skipped(&mut self, ticket: Ticket) {
        self.metrics.exactly_once_skipped.inc();
        self.counts.skipped += 1;
        self.acknowledged.push_back(ticket);
    }

    /// Queues a dead letter in its event's place: dead letters go out in their events' order,
    /// whatever order the refusals were reported in.
    fn queue_dead_letter(&mut self, ticket: Ticket, origin: Origin, letter: DeadLetter) {
        // Refused as it was in an earlier session: without its payload at once.
        let remembered = origin
            .event
            .as_ref()
            .zip(self.earlier.as_ref())
            .and_then(|(event, earlier)| earlier.dead_letter(event))
            .map(str::to_owned);
        let letter = match remembered {
            Some(why) => letter
                .without_payload(&format!(
                    "the dead-letter topic refused it in an earlier session: {why}"
                ))
                .unwrap_or(letter),
            None => letter,
        };
        let letter = self.keep_row(ticket.seq(), letter);
        if self.exactly_once.is_some() && origin.event.is_some() {
            self.barrier.insert(ticket.seq());
        }
        let tagged = self.tagged_letter(ticket, origin, letter);
        let seq = tagged.0.ticket.seq();
        if let Some(noted) = &mut self.dead_lettered {
            noted.push(seq);
        }
        let at = self
            .dead_letters
            .iter()
            .rposition(|(tag, _)| tag.ticket.seq() < seq)
            .map_or(0, |i| i + 1);
        self.dead_letters.insert(at, tagged);
    }

    /// `--exactly-once`: whether the dead letter of the event `seq` must wait for an earlier
    /// event's outcome (a refusal of it would be dead-lettered first).
    fn waits_for_earlier_events(&self, seq: Seq) -> bool {
        self.unresolved.first().is_some_and(|first| *first < seq)
    }

    fn tagged_letter(
        &mut self,
        ticket: Ticket,
        origin: Origin,
        letter: DeadLetter,
    ) -> (Tag, DeadLetter) {
        tracing::warn!(table = %letter.table, lsn = letter.lsn.map(|l| l.to_string()), reason = %letter.reason,
            dead_letter_topic = &*self.dead_letter_topic, "sending an outbox event to the dead-letter topic");
        let tag = Tag {
            ticket,
            origin,
            kind: Kind::DeadLetter(Box::new(letter.clone())),
        };
        (tag, letter)
    }

    /// Produces the queued dead letters in order.
    async fn send_dead_letters(&mut self) -> Result<(), RelayError> {
        if self.dead_letters.is_empty() {
            return Ok(());
        }
        while let Some((tag, letter)) = self.dead_letters.front() {
            if self.waits_for_earlier_events(tag.ticket.seq()) {
                // Sent once the earlier events are acknowledged or refused (next_acknowledged
                // comes back here after each report).
                return Ok(());
            }
            let topic = letter.topic(&self.dead_letter_topic);
            let mut record = letter.to_record(&topic);
            let event = tag
                .origin
                .event
                .clone()
                .filter(|_| self.exactly_once.is_some());
            // Awaits before the letter leaves its queue: cancel-safe.
            let partitions = self.topic(&topic).await?.map_err(|reason| {
                RelayError::misconfigured(format!(
                    "{reason}; the dead-letter topic must exist: choose another --dead-letter-topic (or \
                     errors.deadletterqueue.topic.name) or create it"
                ))
            })?;
            if let Some(event) = event {
                if let Some((partition, partitions)) = self.place(&mut record, &event, partitions) {
                    if self
                        .already_in_kafka(&topic, partition, partitions, &event)
                        .await?
                    {
                        let (tag, _) = self.dead_letters.pop_front().expect("the front letter");
                        self.barrier.remove(&tag.ticket.seq());
                        self.skipped(tag.ticket);
                        continue;
                    }
                }
            }
            let (tag, letter) = self.dead_letters.pop_front().expect("the front letter");
            match self.producer.send(&record, tag) {
                Sent::Accepted => {}
                Sent::QueueFull(back) => {
                    self.dead_letters.push_front((back, letter));
                    self.wait_for_report().await?;
                }
                Sent::Refused(back, error, refused) => self.on_report(
                    back,
                    Outcome::Refused {
                        error,
                        record: refused,
                    },
                )?,
                Sent::Failed(back, error) => {
                    self.dead_letters.push_front((back, letter));
                    return Err(RelayError::BrokerUnavailable(anyhow!(
                        "dead-letter write failed: {error}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Acts on one delivery report. Synchronous: no await between taking a report and
    /// recording what it means.
    fn on_report(&mut self, tag: Tag, outcome: Outcome) -> Result<(), RelayError> {
        if matches!(tag.kind, Kind::Event(_)) && !self.unresolved.is_empty() {
            self.unresolved.remove(&tag.ticket.seq());
        }
        match (outcome, tag.kind) {
            (Outcome::Acknowledged, kind) => {
                match kind {
                    Kind::Event(counter) => {
                        counter.inc();
                        self.counts.events += 1;
                    }
                    Kind::DeadLetter(letter) => {
                        self.metrics.dead_letter(letter.cause.label());
                        self.counts.dead_letters += 1;
                        self.barrier.remove(&tag.ticket.seq());
                    }
                    Kind::Canary(written_ms) => self.metrics.canary_acknowledged(written_ms),
                }
                self.acknowledged.push_back(tag.ticket);
                Ok(())
            }
            (
                Outcome::Refused { error, .. } | Outcome::Neighbour { error, .. },
                Kind::Canary(_),
            ) => {
                // Not an event: nothing to dead-letter; its age grows and says so.
                tracing::warn!("Kafka refused the canary: {error}");
                self.acknowledged.push_back(tag.ticket);
                Ok(())
            }
            (Outcome::Refused { error, record }, Kind::Event(_)) => {
                if let Some(event) = &tag.origin.event {
                    self.refusals.event_refused(event, &error);
                }
                let letter = DeadLetter::refused(&error, record, tag.origin.table.clone(), tag.origin.position);
                self.queue_dead_letter(tag.ticket, tag.origin, letter);
                Ok(())
            }
            (Outcome::Refused { error, .. }, Kind::DeadLetter(letter)) => {
                if let Some(event) = &tag.origin.event {
                    self.refusals.dead_letter_refused(event, &error);
                }
                match letter.without_payload(&format!("the dead-letter topic refused it: {error}")) {
                    Some(cut) => {
                        // In its place: dead letters keep their events' order.
                        self.queue_dead_letter(tag.ticket, tag.origin, cut);
                        Ok(())
                    }
                    None => Err(RelayError::misconfigured(format!(
                        "the dead-letter topic {} refused the dead letter of the event at {} from {} ({error}) even without \
                         its payload; nothing after it is confirmed. Fix the topic (its max.message.bytes, or the producer's \
                         message.max.bytes) or choose another --dead-letter-topic, then restart",
                        self.dead_letter_topic,
                        letter.lsn.map_or_else(|| "an unknown position".to_owned(), |l| l.to_string()),
                        letter.table
                    ))),
                }
            }
            (Outcome::Neighbour { error, record }, Kind::Event(_))
                if !tag.origin.event.as_ref().is_some_and(Refusals::replayed) =>
            {
                // No replay repeats this record in order: dead-lettered, payload kept.
                let letter = DeadLetter::refused(
                    &format!("{error} (another record of its batch was refused)"),
                    record,
                    tag.origin.table.clone(),
                    tag.origin.position,
                );
                self.queue_dead_letter(tag.ticket, tag.origin, letter);
                Ok(())
            }
            (Outcome::Neighbour { .. }, Kind::DeadLetter(letter))
                if !tag.origin.event.as_ref().is_some_and(Refusals::replayed) =>
            {
                // Sent again as it is; the refused letter of its batch goes without payload.
                self.queue_dead_letter(tag.ticket, tag.origin, *letter);
                Ok(())
            }
            (Outcome::Neighbour { error, .. }, _) => {
                self.neighbour_failed = true;
                Err(RelayError::BrokerUnavailable(anyhow!(
                "Kafka failed an event because another record of its batch was refused ({error}); the session \
                 starts again from the last confirmed position and dead-letters the refused event first"
                )))
            }
            (Outcome::Forbidden { error }, _) => Err(RelayError::MissingPrivilege {
                error: anyhow!("Kafka refused the relay: {error}; nothing after the last acknowledged event is confirmed"),
                fix: "grant the relay's principal WRITE on its topics and IDEMPOTENT_WRITE on the cluster, or check its \
                      SASL/TLS credentials (--producer-property / --producer-properties-file)"
                    .into(),
            }),
            (Outcome::Misconfigured { error }, _) => Err(RelayError::misconfigured(format!(
                "Kafka refused the producer's settings: {error}; nothing after the last acknowledged event is confirmed. \
                 Check the --producer-property settings (and the broker's version)"
            ))),
            (Outcome::Failed { error }, _) => Err(RelayError::BrokerUnavailable(anyhow!(
                "Kafka did not acknowledge an event: {error}; nothing after the last acknowledged event is confirmed"
            ))),
        }
    }
}

#[cfg(test)]
mod tests;
