//! Records the delivery stage accepted and has not handed to the producer yet: how late
//! events are handed over in groups.
//!
//! librdkafka (2.12) sends one produce request per partition, every `linger.ms` (1 ms
//! here, for commit → consumer latency). An event that is already late gains nothing from
//! leaving 1 ms after the one before it, and each small request costs the relay (its
//! broker and delivery-report threads wake per request) and the broker. So while a
//! source is behind (a replication stream catching up, a snapshot), the stage holds its
//! records for up to [`CATCH_UP_LINGER`] and hands them over together: librdkafka then
//! builds one batch per partition from each group. A source that keeps up sets no
//! linger and every record is handed over at once, exactly as without this queue.
//!
//! Order: records leave in the order they came, and a record is never handed over while
//! an older one is still held, so a partition's records reach librdkafka in order.
//! Acknowledgement: a held record is in flight like any other (its ticket is outstanding),
//! so the tracker confirms nothing at or after it; holding changes when a position is
//! confirmed, never whether.

use super::outcome::Tag;
use outbox_router::OutboxRecord;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// How long a source that is behind may have its records held before they go.
pub const CATCH_UP_LINGER: Duration = Duration::from_millis(20);

/// Records held at most before they go, whatever the linger. With the benchmark's ~500 B
/// payloads [`MAX_HELD_BYTES`] is reached first; with small payloads this bounds what each
/// held record's own allocations (its headers, its place in the queue) add to memory, and
/// a group of 2,000 already makes per-request costs small.
pub const MAX_HELD_RECORDS: usize = 2_000;

/// Key and value bytes held at most before they go (librdkafka's `batch.size` default):
/// memory stays bounded with large payloads.
pub const MAX_HELD_BYTES: usize = 1_000_000;

/// The held records, oldest first.
#[derive(Debug)]
pub struct Held {
    records: VecDeque<(OutboxRecord, Tag)>,
    /// Key and value bytes of `records`.
    bytes: usize,
    /// When the oldest held record was accepted (meaningless while nothing is held).
    since: Instant,
    /// How long a record may be held; zero = not at all.
    linger: Duration,
    /// Since when the producer's queue has been full with nothing of the relay's in it
    /// (`None`: it was not, at the last attempt). A time, not a count of attempts: a
    /// hand-over raced against the stream is cancelled and retried, each retry an attempt.
    pub full_while_idle_since: Option<Instant>,
}

impl Default for Held {
    fn default() -> Self {
        Self {
            records: VecDeque::new(),
            bytes: 0,
            since: Instant::now(),
            linger: Duration::ZERO,
            full_while_idle_since: None,
        }
    }
}

/// What a record weighs in the in-flight bounds: its key and value bytes.
pub fn size(record: &OutboxRecord) -> usize {
    record.key.as_ref().map_or(0, |k| k.len()) + record.value.as_ref().map_or(0, |v| v.len())
}

impl Held {
    /// Sets how long records may be held from now on (zero: hand each over at once).
    /// Records already held go once the new linger says so.
    pub fn set_linger(&mut self, linger: Duration) {
        self.linger = linger;
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Key and value bytes of the held records.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `record` behind the ones already held. True when the held records must go now:
    /// always without a linger, and once they reach [`MAX_HELD_RECORDS`] or
    /// [`MAX_HELD_BYTES`]. A group whose linger is over goes at its
    /// [`deadline`](Self::deadline), which the stage waits for: the clock is read once per
    /// group, not once per record.
    pub fn push(&mut self, record: OutboxRecord, tag: Tag) -> bool {
        self.bytes += size(&record);
        if self.linger.is_zero() {
            self.records.push_back((record, tag));
            return true;
        }
        if self.records.is_empty() {
            self.since = Instant::now();
        }
        self.records.push_back((record, tag));
        self.full()
    }

    fn full(&self) -> bool {
        self.records.len() >= MAX_HELD_RECORDS || self.bytes >= MAX_HELD_BYTES
    }

    /// The oldest held record, to hand over now.
    pub fn pop(&mut self) -> Option<(OutboxRecord, Tag)> {
        let (record, tag) = self.records.pop_front()?;
        self.bytes -= size(&record);
        Some((record, tag))
    }

    /// Puts back the record just popped (the producer's queue was full): it stays the
    /// oldest, and the group it belongs to is still due.
    pub fn put_back(&mut self, record: OutboxRecord, tag: Tag) {
        self.bytes += size(&record);
        self.records.push_front((record, tag));
    }

    /// When the held records must go: `None` when nothing is held.
    pub fn deadline(&self) -> Option<Instant> {
        if self.records.is_empty() {
            return None;
        }
        if self.full() {
            return Some(self.since);
        }
        Some(self.since + self.linger)
    }
}
