//! The rule of `run --exactly-once`: it decides,
//! after a restart or a takeover, which replayed events are already in Kafka. Pure: no I/O;
//! the delivery stage reads partition tails through the producer and asks [`Tails`].
//!
//! # Why it works
//! Every record the relay writes in this mode carries its **source position** in the
//! [`POSITION_HEADER`] header: the slot and the PostgreSQL server (system identifier and
//! timeline), the commit LSN of its transaction and its index in it (a snapshot row: the
//! snapshot and its row number, never compared), and the partition count the partition was
//! chosen with. The relay chooses every partition itself (Kafka's murmur2 of
//! the key, as librdkafka and Java clients do), so a replayed event goes to the partition it
//! went to before. The idempotent producer (`acks=all`, `enable.idempotence`) keeps each
//! partition an in-order, gap-free prefix of what one producer sent to it, and the stream
//! replays events in position order. So the **last record of a partition** says how far that
//! partition got: a replayed event at or before it is already there, and is skipped (and
//! counted as delivered for the acknowledgement rule); the first event after it, and every
//! later one, is produced. Nothing is skipped that is not provably in Kafka.
//!
//! # What it assumes, and what is enforced
//! - The relay is the only writer of its partitions. A tail record without a position
//!   header of this slot (another producer, another relay, or this relay before
//!   `--exactly-once`) is detected: the relay warns, counts it
//!   (`outbox_relay_exactly_once_foreign_tails_total`) and produces every replayed event of
//!   that partition (at-least-once there, never a loss).
//! - A topic's partition count does not change under the relay: a tail written with another
//!   count is detected the same way (keys moved partitions; the tail proves nothing).
//! - Positions belong to one server: a tail from another system or timeline (a restore, a
//!   failover) is detected the same way.
//! - Each partition is gap-free: the producer is idempotent with `acks=all` and
//!   `enable.gapless.guarantee` (the relay sets all three and refuses overrides), so a record
//!   the broker refuses stops the producer before any later record of its partition lands
//!   (records parked behind a partition's first are failed with it); the session ends, and
//!   the delivery stage's `Refusals` make the next session of the process dead-letter that
//!   event at once. librdkafka's implicit acknowledgement could leave a gap where Kafka held
//!   no sequence of the producer yet (a partition's first records); a partition's first
//!   record therefore travels alone (`producer/first_writes.rs`), and a delivery reported
//!   without an offset is not taken as one.
//!   A record the relay's own checks refuse (too large for the producer or the topic) is
//!   dead-lettered, in position order, before the tail is consulted.
//! - A refused event is in the dead-letter topic before any later event is handed to the
//!   producer (the delivery stage's barrier). So a tail past a refused event proves it is in
//!   its topic or in the dead-letter topic, also to a process started after a crash, which
//!   no longer knows what was refused. With `--cleanup`, a skipped event the dead-letter
//!   topic may hold keeps its row ([`crate::deliver::exactly_once::Guard::dead_letter_may_be_in`]).
//!
//! # A standby that takes over
//! A new holder of the slot reads the tails too. The old holder stops producing the moment its
//! replication connection is gone (the session ends, its producer is purged: nothing queued
//! is sent, nothing is retried); a request already on the wire may still land within the
//! producer's `request.timeout.ms`. So an instance that took the slot over from another
//! waits that long before reading any tail ([`Fence`]). An old holder that is cut off from
//! PostgreSQL notices within 20 s (the liveness probe runs even while its window is full),
//! and PostgreSQL frees the slot only after `wal_sender_timeout` (60 s by default).
//!
//! # Kafka transactions
//! A transactional producer (`transactional.id` from the slot, the position advanced only
//! after `commit_transaction`) would close the takeover window above; docs/exactly-once.md says why it is
//! not built: the window yields a duplicate, never a loss, and the price (a commit per batch,
//! read_committed consumers, the transaction coordinator in the path) would be paid by every
//! event. [`Tails`] would stay as the recovery of a transaction committed just before a crash.

use bytes::Bytes;
use outbox_router::OutboxRecord;
use pgoutput::Lsn;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The header that carries a record's source position in `--exactly-once` mode.
pub const POSITION_HEADER: &str = "__outbox_relay.position";

/// Where an event is in its source, in the order the source replays events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EventPosition {
    /// A streamed change: its transaction's commit LSN and its index among the
    /// transaction's changes (inserts, updates, deletes, truncates: independent of routing),
    /// and the transaction's commit time (PostgreSQL micros; `None` in a header written
    /// before the relay recorded it): the same in every replay of the same transaction.
    Stream {
        commit: Lsn,
        index: u32,
        committed_us: Option<i64>,
    },
    /// A row of an initial snapshot: the snapshot and the row's number in it (written for
    /// the record, never compared: see `at_or_before`).
    Snapshot { snapshot: Arc<str>, row: u64 },
}

/// How much later than the partition's last record a replayed event at or before it may
/// have committed and still be that record's history: commit times are taken before the
/// commit record is written, so concurrent transactions' times can invert by a little.
const COMMIT_TIME_JITTER_US: i64 = 1_000_000;

impl EventPosition {
    /// A replayed event at or before `tail` whose transaction committed well after the
    /// tail's did cannot be what Kafka holds: the server went back in time (a restore) and
    /// reuses positions. Unknown times prove nothing either way.
    fn committed_after(&self, tail: &EventPosition) -> bool {
        match (self, tail) {
            (
                Self::Stream {
                    committed_us: Some(mine),
                    ..
                },
                Self::Stream {
                    committed_us: Some(theirs),
                    ..
                },
            ) => *mine > theirs.saturating_add(COMMIT_TIME_JITTER_US),
            _ => false,
        }
    }

    /// True when an event at `self` is at or before `other` in the same replay order.
    /// `None`: not comparable (a snapshot row and a streamed change, two snapshots).
    fn at_or_before(&self, other: &EventPosition) -> Option<bool> {
        match (self, other) {
            (
                Self::Stream {
                    commit: a,
                    index: i,
                    ..
                },
                Self::Stream {
                    commit: b,
                    index: j,
                    ..
                },
            ) => Some((a, i) <= (b, j)),
            // Snapshot rows are never compared: a snapshot interrupted by a crash is retaken
            // in a new snapshot (other rows, other numbers), and PostgreSQL's snapshot names
            // can repeat after a server restart. Its rows come again (at-least-once).
            _ => None,
        }
    }
}

/// A position as written in [`POSITION_HEADER`]:
/// `slot=S server=7301234567890123456/1 commit=0/16B3748 index=3 partitions=3` (or
/// `... snapshot=NAME row=17 ...`). `server` is PostgreSQL's system identifier and timeline:
/// positions of another server or timeline (a restore, a failover) prove nothing. Text, so
/// that an operator reads it with any consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub slot: String,
    pub server: String,
    pub position: EventPosition,
    pub partitions: i32,
}

impl Written {
    pub fn encode(source: &Source, position: &EventPosition, partitions: i32) -> Bytes {
        let Source { slot, server, .. } = source;
        Bytes::from(match position {
            EventPosition::Stream {
                commit,
                index,
                committed_us,
            } => match committed_us {
                Some(us) => format!(
                    "slot={slot} server={server} commit={commit} index={index} committed={us} partitions={partitions}"
                ),
                None => format!(
                    "slot={slot} server={server} commit={commit} index={index} partitions={partitions}"
                ),
            },
            EventPosition::Snapshot { snapshot, row } => {
                format!("slot={slot} server={server} snapshot={snapshot} row={row} partitions={partitions}")
            }
        })
    }

    pub fn parse(value: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(value).ok()?;
        let mut fields = HashMap::new();
        for pair in text.split(' ') {
            let (k, v) = pair.split_once('=')?;
            fields.insert(k, v);
        }
        let position = match (fields.get("commit"), fields.get("snapshot")) {
            (Some(commit), None) => EventPosition::Stream {
                commit: Lsn::parse(commit)?,
                index: fields.get("index")?.parse().ok()?,
                committed_us: match fields.get("committed") {
                    Some(us) => Some(us.parse().ok()?),
                    None => None,
                },
            },
            (None, Some(snapshot)) => EventPosition::Snapshot {
                snapshot: Arc::from(*snapshot),
                row: fields.get("row")?.parse().ok()?,
            },
            _ => return None,
        };
        Some(Self {
            slot: fields.get("slot")?.to_string(),
            server: fields.get("server")?.to_string(),
            position,
            partitions: fields.get("partitions")?.parse().ok()?,
        })
    }
}

/// The partition Kafka's default partitioner gives `key` among `partitions`: murmur2 of the
/// key bytes, made positive, modulo the count — what librdkafka's `murmur2_random` and the
/// Java client compute, so the relay's choice is the one they would make.
pub fn key_partition(key: &[u8], partitions: i32) -> i32 {
    let hash = murmur2::murmur2(key, murmur2::KAFKA_SEED) & 0x7fff_ffff;
    (hash % partitions.max(1) as u32) as i32
}

/// The partition the relay writes `record` to in this mode: its explicit partition, else
/// by key; a record without a key (which librdkafka would place at random) by its event id,
/// so that a replay finds it where it went.
pub fn partition_for(record: &OutboxRecord, partitions: i32) -> i32 {
    if let Some(p) = record.partition {
        return p;
    }
    let id = || {
        record
            .headers
            .iter()
            .find(|(k, _)| &**k == "id")
            .and_then(|(_, v)| v.as_deref())
    };
    match record.key.as_deref().or_else(id) {
        Some(bytes) => key_partition(bytes, partitions),
        None => 0,
    }
}

/// Whose records these are: the slot, and the PostgreSQL server (system identifier and
/// timeline) its positions belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub slot: String,
    pub server: String,
    /// The timelines this one descends from (a promoted standby's history): each as
    /// `system/timeline` and the position where this history left it. Positions of an
    /// ancestor before that point are this server's too.
    pub ancestors: Vec<(String, Lsn)>,
    /// Where the server's WAL ended when the session began (IDENTIFY_SYSTEM): a record of this
    /// server at a later position was written from WAL it no longer has (it went back in time:
    /// restored from a file-system copy or a VM snapshot).
    pub wal_end: Option<Lsn>,
}

impl Source {
    pub fn new(slot: &str, system_id: &str, timeline: u32) -> Self {
        Self {
            slot: slot.to_owned(),
            server: format!("{system_id}/{timeline}"),
            ancestors: Vec::new(),
            wal_end: None,
        }
    }

    /// With where the server's WAL ends now (IDENTIFY_SYSTEM's `xlogpos`).
    pub fn with_wal_end(mut self, wal_end: Lsn) -> Self {
        self.wal_end = Some(wal_end);
        self
    }

    /// Whether `position`, written from this very server, lies past the end of its WAL: the
    /// server went back in time, and commits it makes now reuse positions at or below it.
    fn beyond_wal_end(&self, server: &str, position: &EventPosition) -> bool {
        match (position, self.wal_end) {
            (EventPosition::Stream { commit, .. }, Some(end)) => {
                server == self.server && *commit > end
            }
            _ => false,
        }
    }

    /// With the server's timeline history (`TIMELINE_HISTORY`: each parent timeline and the
    /// position where the next one branched off).
    pub fn with_history(mut self, system_id: &str, history: &[(u32, Lsn)]) -> Self {
        self.ancestors = history
            .iter()
            .map(|(timeline, switched)| (format!("{system_id}/{timeline}"), *switched))
            .collect();
        self
    }

    /// Whether `position`, written from `server`, is a position of this server's history:
    /// this server, or an ancestor timeline before it branched off (a failover to a standby
    /// that had that WAL keeps those positions).
    fn owns(&self, server: &str, position: &EventPosition) -> bool {
        if server == self.server {
            return true;
        }
        let EventPosition::Stream { commit, .. } = position else {
            return false;
        };
        self.ancestors
            .iter()
            .any(|(ancestor, switched)| ancestor == server && commit < switched)
    }
}

/// What a partition's last record is, as read from the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailRead {
    /// The partition holds no record.
    Empty,
    /// Its last record: offset and its [`POSITION_HEADER`] value, if any.
    Record {
        offset: i64,
        position: Option<Bytes>,
    },
}

/// What to do with a replayed event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The partition's tail is not known yet: read it, then ask again.
    ReadTail,
    /// Already in Kafka: acknowledge without producing.
    Skip,
    Produce,
}

/// Why a tail proves nothing (logged once per partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distrust {
    /// Written by another producer (or this relay without `--exactly-once`, or another slot).
    Foreign { offset: i64, found: String },
    /// Written when the topic had another partition count.
    PartitionsChanged { offset: i64, then: i32, now: i32 },
    /// Written from another PostgreSQL server or timeline (a restore, a failover): its
    /// positions are not this server's.
    OtherServer { offset: i64, then: String },
    /// Written from this server at a position past the end of its WAL: the server went back
    /// in time (a restore that kept its system identifier and timeline).
    BeyondWalEnd {
        offset: i64,
        commit: Lsn,
        wal_end: Lsn,
    },
}

#[derive(Debug)]
enum TailState {
    /// The tail: replayed events at or before it are skipped (and counted).
    Pending { tail: EventPosition, skipped: u64 },
    /// Past the tail (or nothing to compare with): everything is produced.
    Passed,
}

/// The tails of the partitions this session writes to, and the skip rule.
#[derive(Debug)]
pub struct Tails {
    source: Source,
    partitions: HashMap<(Arc<str>, i32), TailState>,
}

impl Tails {
    pub fn new(source: Source) -> Self {
        Self {
            source,
            partitions: HashMap::new(),
        }
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// What to do with the event at `position` bound for `topic`/`partition`. Events of a
    /// partition are asked about in replay order. Returns, with `Produce`, how many events
    /// were skipped in this partition before it (once, when the partition passes its tail).
    pub fn decide(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        position: &EventPosition,
    ) -> (Decision, Option<u64>) {
        let Some(state) = self.partitions.get_mut(&(topic.clone(), partition)) else {
            return (Decision::ReadTail, None);
        };
        match state {
            TailState::Passed => (Decision::Produce, None),
            TailState::Pending { tail, skipped } => {
                if position.at_or_before(tail) == Some(true) && !position.committed_after(tail) {
                    *skipped += 1;
                    return (Decision::Skip, None);
                }
                // Past the tail, or at a position the tail's history does not explain (a
                // server that went back in time reuses positions): produced, and so is
                // every later event of the partition.
                let skipped = *skipped;
                *state = TailState::Passed;
                (Decision::Produce, Some(skipped))
            }
        }
    }

    /// Records what the partition's tail is; `partitions` is the topic's partition count now.
    /// Returns why the tail is not trusted, if it is not.
    pub fn learned(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        partitions: i32,
        read: TailRead,
    ) -> Option<Distrust> {
        let (state, distrust) = match read {
            TailRead::Empty => (TailState::Passed, None),
            TailRead::Record { offset, position } => {
                let written = position.as_deref().and_then(Written::parse);
                match written {
                    Some(w)
                        if w.slot == self.source.slot
                            && self.source.beyond_wal_end(&w.server, &w.position) =>
                    {
                        let commit = match w.position {
                            EventPosition::Stream { commit, .. } => commit,
                            EventPosition::Snapshot { .. } => Lsn::ZERO,
                        };
                        (
                            TailState::Passed,
                            Some(Distrust::BeyondWalEnd {
                                offset,
                                commit,
                                wal_end: self.source.wal_end.unwrap_or(Lsn::ZERO),
                            }),
                        )
                    }
                    Some(w)
                        if w.slot == self.source.slot
                            && !self.source.owns(&w.server, &w.position) =>
                    {
                        (
                            TailState::Passed,
                            Some(Distrust::OtherServer {
                                offset,
                                then: w.server,
                            }),
                        )
                    }
                    Some(w) if w.slot == self.source.slot && w.partitions == partitions => (
                        TailState::Pending {
                            tail: w.position,
                            skipped: 0,
                        },
                        None,
                    ),
                    Some(w) if w.slot == self.source.slot => (
                        TailState::Passed,
                        Some(Distrust::PartitionsChanged {
                            offset,
                            then: w.partitions,
                            now: partitions,
                        }),
                    ),
                    _ => (
                        TailState::Passed,
                        Some(Distrust::Foreign {
                            offset,
                            found: match &position {
                                None => "no position header".to_owned(),
                                Some(v) => {
                                    format!("position header {:?}", String::from_utf8_lossy(v))
                                }
                            },
                        }),
                    ),
                }
            }
        };
        self.partitions.insert((topic.clone(), partition), state);
        distrust
    }
}

/// When a session may read its first tail: an instance that took the slot over from another
/// waits until a request the old holder already sent cannot land any more.
#[derive(Debug, Clone, Copy)]
pub struct Fence {
    pub not_before: Instant,
}

impl Fence {
    pub fn after(wait: Duration) -> Self {
        Self {
            not_before: Instant::now() + wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(commit: u64, index: u32) -> EventPosition {
        EventPosition::Stream {
            commit: Lsn::from_u64(commit),
            index,
            committed_us: None,
        }
    }

    fn stream_at(commit: u64, index: u32, committed_us: i64) -> EventPosition {
        EventPosition::Stream {
            commit: Lsn::from_u64(commit),
            index,
            committed_us: Some(committed_us),
        }
    }

    /// A server restored from a copy reuses positions: an event replayed at or before the
    /// partition's last record but committed well after it is not that record's history,
    /// and is produced (so is every later one); a replay of the same transactions (same
    /// commit times, or a little jitter between concurrent ones) is skipped as before.
    #[test]
    fn an_event_committed_well_after_the_tail_is_not_skipped_though_its_position_is_before() {
        let topic: Arc<str> = "t".into();
        let source = Source::new("s", "7301234567890123456", 1);
        let tail = Written::encode(&source, &stream_at(0x900, 0, 1_000_000_000), 3);
        let read = || TailRead::Record {
            offset: 5,
            position: Some(tail.clone()),
        };
        let mut tails = Tails::new(source.clone());
        assert_eq!(tails.learned(&topic, 0, 3, read()), None);
        // The same history: skipped, jitter included.
        assert_eq!(
            tails
                .decide(&topic, 0, &stream_at(0x800, 0, 1_000_000_000))
                .0,
            Decision::Skip
        );
        assert_eq!(
            tails
                .decide(&topic, 0, &stream_at(0x880, 0, 1_000_400_000))
                .0,
            Decision::Skip
        );
        // A transaction the restored server committed a minute later at a reused position.
        assert_eq!(
            tails
                .decide(&topic, 0, &stream_at(0x8A0, 0, 1_060_000_000))
                .0,
            Decision::Produce
        );
        assert_eq!(
            tails
                .decide(&topic, 0, &stream_at(0x8B0, 0, 1_000_000_000))
                .0,
            Decision::Produce,
            "everything after it too"
        );
        // Headers without a commit time (written before it was recorded) compare as before.
        let old = Written::encode(&source, &stream(0x900, 0), 3);
        let mut tails = Tails::new(source);
        let read = TailRead::Record {
            offset: 5,
            position: Some(old),
        };
        assert_eq!(tails.learned(&topic, 0, 3, read), None);
        assert_eq!(
            tails
                .decide(&topic, 0, &stream_at(0x800, 0, 2_000_000_000))
                .0,
            Decision::Skip
        );
    }

    fn source(slot: &str) -> Source {
        Source::new(slot, "7301234567890123456", 1)
    }

    fn tail_at(tails: &mut Tails, position: &EventPosition, partitions: i32) -> Option<Distrust> {
        let header = Written::encode(&tails.source().clone(), position, partitions);
        tails.learned(
            &"t".into(),
            0,
            3,
            TailRead::Record {
                offset: 41,
                position: Some(header),
            },
        )
    }

    #[test]
    fn replayed_events_up_to_the_tail_are_skipped_and_the_rest_produced() {
        let mut tails = Tails::new(source("slot_a"));
        let topic: Arc<str> = "t".into();
        assert_eq!(
            tails.decide(&topic, 0, &stream(100, 0)).0,
            Decision::ReadTail
        );
        assert_eq!(tail_at(&mut tails, &stream(200, 1), 3), None);
        assert_eq!(
            tails.decide(&topic, 0, &stream(100, 0)),
            (Decision::Skip, None)
        );
        assert_eq!(
            tails.decide(&topic, 0, &stream(100, 7)),
            (Decision::Skip, None)
        );
        assert_eq!(
            tails.decide(&topic, 0, &stream(200, 0)),
            (Decision::Skip, None)
        );
        assert_eq!(
            tails.decide(&topic, 0, &stream(200, 1)),
            (Decision::Skip, None),
            "the tail itself"
        );
        assert_eq!(
            tails.decide(&topic, 0, &stream(200, 2)),
            (Decision::Produce, Some(4))
        );
        assert_eq!(
            tails.decide(&topic, 0, &stream(150, 0)),
            (Decision::Produce, None),
            "past the tail, everything is produced"
        );
        assert_eq!(
            tails.decide(&topic, 1, &stream(100, 0)).0,
            Decision::ReadTail,
            "each partition has its own tail"
        );
    }

    #[test]
    fn an_empty_partition_skips_nothing() {
        let mut tails = Tails::new(source("s"));
        let topic: Arc<str> = "t".into();
        assert_eq!(tails.learned(&topic, 2, 3, TailRead::Empty), None);
        assert_eq!(
            tails.decide(&topic, 2, &stream(1, 0)),
            (Decision::Produce, None)
        );
    }

    #[test]
    fn a_foreign_tail_is_detected_and_proves_nothing() {
        let topic: Arc<str> = "t".into();
        for header in [
            None,
            Some(Bytes::from_static(b"garbage")),
            Some(Written::encode(&source("other_slot"), &stream(900, 0), 3)),
        ] {
            let mut tails = Tails::new(source("s"));
            let distrust = tails.learned(
                &topic,
                0,
                3,
                TailRead::Record {
                    offset: 7,
                    position: header,
                },
            );
            assert!(
                matches!(distrust, Some(Distrust::Foreign { offset: 7, .. })),
                "{distrust:?}"
            );
            assert_eq!(tails.decide(&topic, 0, &stream(1, 0)).0, Decision::Produce);
        }
    }

    #[test]
    fn a_tail_written_with_another_partition_count_proves_nothing() {
        let mut tails = Tails::new(source("s"));
        let distrust = tail_at(&mut tails, &stream(900, 0), 2);
        assert_eq!(
            distrust,
            Some(Distrust::PartitionsChanged {
                offset: 41,
                then: 2,
                now: 3
            })
        );
        assert_eq!(
            tails.decide(&"t".into(), 0, &stream(1, 0)).0,
            Decision::Produce
        );
    }

    #[test]
    fn snapshot_rows_are_never_skipped() {
        // PostgreSQL's snapshot names can repeat after a restart, and a retaken snapshot
        // reads other rows: a snapshot row proves nothing about another.
        let snap = |name: &str, row| EventPosition::Snapshot {
            snapshot: name.into(),
            row,
        };
        let topic: Arc<str> = "t".into();
        let mut tails = Tails::new(source("s"));
        tail_at(&mut tails, &snap("00000003-1", 10), 3);
        assert_eq!(
            tails.decide(&topic, 0, &snap("00000003-1", 1)).0,
            Decision::Produce
        );
        let mut tails = Tails::new(source("s"));
        tail_at(&mut tails, &snap("00000003-1", 10), 3);
        assert_eq!(
            tails.decide(&topic, 0, &stream(5, 0)).0,
            Decision::Produce,
            "the stream follows its snapshot"
        );
        let mut tails = Tails::new(source("s"));
        tail_at(&mut tails, &stream(900, 0), 3);
        assert_eq!(tails.decide(&topic, 0, &snap("x", 0)).0, Decision::Produce);
    }

    #[test]
    fn a_tail_from_another_server_or_timeline_proves_nothing() {
        // A restore or a failover to a server behind the tail: its new commits have
        // positions at or below what Kafka holds, and must not be skipped.
        let topic: Arc<str> = "t".into();
        let mut tails = Tails::new(Source::new("s", "7301234567890123456", 2));
        let header = Written::encode(
            &Source::new("s", "7301234567890123456", 1),
            &stream(900, 0),
            3,
        );
        let distrust = tails.learned(
            &topic,
            0,
            3,
            TailRead::Record {
                offset: 5,
                position: Some(header),
            },
        );
        assert_eq!(
            distrust,
            Some(Distrust::OtherServer {
                offset: 5,
                then: "7301234567890123456/1".into()
            })
        );
        assert_eq!(
            tails.decide(&topic, 0, &stream(100, 0)).0,
            Decision::Produce
        );
    }

    /// The same server went back in time (restored with its system identifier and timeline):
    /// a tail written past the end of its WAL proves nothing, and the commits it makes now, at
    /// positions at or below that tail, are produced, not skipped. A tail within its WAL still
    /// counts.
    #[test]
    fn a_tail_past_the_end_of_the_servers_wal_proves_nothing() {
        let topic: Arc<str> = "t".into();
        let system = "7301234567890123456";
        let rewound =
            || Tails::new(Source::new("s", system, 1).with_wal_end(Lsn::from_u64(0x1000)));
        let past = Written::encode(&Source::new("s", system, 1), &stream(0x2000, 0), 3);
        let mut tails = rewound();
        let read = TailRead::Record {
            offset: 9,
            position: Some(past),
        };
        assert_eq!(
            tails.learned(&topic, 0, 3, read),
            Some(Distrust::BeyondWalEnd {
                offset: 9,
                commit: Lsn::from_u64(0x2000),
                wal_end: Lsn::from_u64(0x1000)
            })
        );
        assert_eq!(
            tails.decide(&topic, 0, &stream(0x1800, 0)).0,
            Decision::Produce
        );
        let within = Written::encode(&Source::new("s", system, 1), &stream(0x900, 0), 3);
        let mut tails = rewound();
        let read = TailRead::Record {
            offset: 9,
            position: Some(within),
        };
        assert_eq!(tails.learned(&topic, 0, 3, read), None);
        assert_eq!(tails.decide(&topic, 0, &stream(0x800, 0)).0, Decision::Skip);
    }

    /// A promoted standby (timeline 2, branched off timeline 1 at 0/1000): a tail written
    /// from timeline 1 before that point is a position of its history too, and replayed
    /// events at or before it are skipped; a tail past the branch point (WAL the standby
    /// never had) proves nothing.
    #[test]
    fn a_tail_from_the_timeline_a_promoted_standby_branched_off_still_counts() {
        let topic: Arc<str> = "t".into();
        let system = "7301234567890123456";
        let promoted = || {
            Tails::new(
                Source::new("s", system, 2).with_history(system, &[(1, Lsn::from_u64(0x1000))]),
            )
        };
        let before = Written::encode(&Source::new("s", system, 1), &stream(0x900, 0), 3);
        let mut tails = promoted();
        let read = TailRead::Record {
            offset: 5,
            position: Some(before),
        };
        assert_eq!(tails.learned(&topic, 0, 3, read), None);
        assert_eq!(tails.decide(&topic, 0, &stream(0x800, 0)).0, Decision::Skip);
        assert_eq!(
            tails.decide(&topic, 0, &stream(0x1100, 0)).0,
            Decision::Produce
        );
        let past = Written::encode(&Source::new("s", system, 1), &stream(0x1000, 0), 3);
        let mut tails = promoted();
        let read = TailRead::Record {
            offset: 6,
            position: Some(past),
        };
        assert!(matches!(
            tails.learned(&topic, 0, 3, read),
            Some(Distrust::OtherServer { .. })
        ));
        // Another system's timeline 1 is not an ancestor.
        let other = Written::encode(&Source::new("s", "1", 1), &stream(0x900, 0), 3);
        let mut tails = promoted();
        let read = TailRead::Record {
            offset: 7,
            position: Some(other),
        };
        assert!(tails.learned(&topic, 0, 3, read).is_some());
    }

    #[test]
    fn the_position_header_reads_back_what_was_written() {
        for position in [
            stream(0x16B3748, 3),
            EventPosition::Snapshot {
                snapshot: "00000003-0000001B-1".into(),
                row: 17,
            },
        ] {
            let bytes = Written::encode(&source("outbox_relay"), &position, 6);
            let read = Written::parse(&bytes).expect("parses");
            assert_eq!(
                read,
                Written {
                    slot: "outbox_relay".into(),
                    server: "7301234567890123456/1".into(),
                    position,
                    partitions: 6
                }
            );
        }
        assert_eq!(
            &Written::encode(&source("s"), &stream(0x16B3748, 3), 3)[..],
            b"slot=s server=7301234567890123456/1 commit=0/16B3748 index=3 partitions=3"
        );
        assert_eq!(
            Written::parse(b"slot=s commit=zz index=1 partitions=3"),
            None
        );
    }

    /// librdkafka's own murmur2 partitioner (what the producer uses for keyed records) is
    /// the oracle: the relay must choose the partition it would.
    #[test]
    fn keys_go_where_librdkafka_would_put_them() {
        use rdkafka::bindings::rd_kafka_msg_partitioner_murmur2;
        let keys: Vec<Vec<u8>> = (0..2000)
            .map(|i| format!("order-{i}").into_bytes())
            .chain([
                Vec::new(),
                b"a".to_vec(),
                "ünïcødé".as_bytes().to_vec(),
                vec![0xff; 33],
            ])
            .collect();
        for partitions in [1, 2, 3, 7, 64] {
            for key in &keys {
                // SAFETY: the murmur2 partitioner reads only the key and the count (it
                // ignores the topic and opaques).
                let expected = unsafe {
                    rd_kafka_msg_partitioner_murmur2(
                        std::ptr::null(),
                        key.as_ptr().cast(),
                        key.len(),
                        partitions,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(
                    key_partition(key, partitions),
                    expected,
                    "key {key:?} over {partitions}"
                );
            }
        }
    }

    #[test]
    fn a_keyless_record_goes_by_its_event_id() {
        let record = |key: Option<&'static [u8]>, id: Option<&'static [u8]>| OutboxRecord {
            topic: "t".into(),
            key: key.map(Bytes::from_static),
            value: None,
            headers: id
                .map(|id| ("id".into(), Some(Bytes::from_static(id))))
                .into_iter()
                .collect(),
            partition: None,
            timestamp_ms: None,
        };
        assert_eq!(
            partition_for(&record(Some(b"k"), Some(b"x")), 7),
            key_partition(b"k", 7)
        );
        assert_eq!(
            partition_for(&record(None, Some(b"x")), 7),
            key_partition(b"x", 7)
        );
        assert_eq!(partition_for(&record(None, None), 7), 0);
        let placed = OutboxRecord {
            partition: Some(5),
            ..record(Some(b"k"), None)
        };
        assert_eq!(partition_for(&placed, 7), 5);
    }
}
