//! A partition's first record from a producer travels alone: the partition's next records
//! wait here, parked, and go to librdkafka once Kafka acknowledged that first one. Pure: the
//! producer asks before each send, parks what may not go yet, tells each report, and takes
//! back what may go. A parked record counts as in flight; other partitions never wait for it.
//!
//! # Why
//! librdkafka's idempotent producer (2.12) keeps up to five produce requests in flight per
//! connection, and takes a later request's success as proof that every earlier one landed
//! (its "implicit acknowledgement", `rd_kafka_dr_implicit_ack`). That holds where Kafka checks
//! sequence numbers. But Kafka accepts any sequence number from a producer it holds no state
//! for on a partition (`ProducerAppendInfo`: "accept writes with any sequence number"): a
//! partition this producer never wrote to, or whose state expired. So when the first request
//! fails with an error that says it was not written (`NOT_LEADER_OR_FOLLOWER`: a topic just
//! created whose leader has not loaded the partition yet, or a leader moving) and the second
//! one lands, librdkafka reports the first one's records delivered, and they are not in Kafka.
//!
//! Seen with Apache Kafka 4.3: the first record of a topic the relay had just created went
//! missing, its delivery reported (once in about 10,000 new topics; the relay's log showed
//! "MessageSet … encountered error: Broker: Not leader for partition", then the next batch
//! "delivered" and the first "implicitly acked by subsequent batch success").
//! `cargo run -p outbox-relay-testkit --example implicit_ack` shows it with librdkafka alone.
//!
//! Once a partition acknowledged one record of this producer, Kafka holds the producer's
//! sequence there and refuses a gap (`OUT_OF_ORDER_SEQUENCE_NUMBER`), which librdkafka recovers
//! from in order. So only a partition's first record needs to travel alone: once per partition
//! per producer, and again after [`IDLE_BEFORE_FIRST_AGAIN`] without an acknowledged record
//! there (Kafka forgets a producer after `producer.id.expiration.ms`, a day by default).

use foldhash::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a partition may go without an acknowledged record of this producer before its
/// next record travels alone again: well within Kafka's `producer.id.expiration.ms` (a day
/// by default), after which the broker no longer checks this producer's sequence there.
pub(super) const IDLE_BEFORE_FIRST_AGAIN: Duration = Duration::from_secs(3600);

/// A record in flight, as the producer names it (its report slot).
pub(super) type Slot = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No record of this producer acknowledged here (or not for long).
    New,
    /// This first record is in flight: the next ones are parked until its report.
    FirstInFlight(Slot),
    /// Kafka acknowledged a record of this producer here, last at this time.
    Acknowledged(Instant),
}

#[derive(Debug)]
struct Partition<R> {
    state: State,
    /// Records waiting for the first one's acknowledgement, in the order they came.
    parked: VecDeque<(Slot, R)>,
}

impl<R> Default for Partition<R> {
    fn default() -> Self {
        Self {
            state: State::New,
            parked: VecDeque::new(),
        }
    }
}

/// Each partition's state and parked records, by topic (looked up by the record's topic
/// name, no copy of it, once per call). Only partitions the topic has reach here (the
/// producer applies the rule where it knows the count, and checks a record's partition
/// against it), so a topic's partitions are a vector.
#[derive(Debug)]
pub(super) struct FirstWrites<R> {
    /// Each topic's index in `partitions`.
    topics: HashMap<Arc<str>, usize>,
    /// Each topic's partitions.
    partitions: Vec<Vec<Partition<R>>>,
    /// The partitions with parked records, in the order they were first parked.
    waiting: VecDeque<(Arc<str>, i32)>,
    /// Parked records, all partitions together.
    parked: usize,
}

impl<R> Default for FirstWrites<R> {
    fn default() -> Self {
        Self {
            topics: HashMap::default(),
            partitions: Vec::new(),
            waiting: VecDeque::new(),
            parked: 0,
        }
    }
}

impl<R> FirstWrites<R> {
    fn partition(&mut self, topic: &Arc<str>, partition: i32) -> &mut Partition<R> {
        debug_assert!(partition >= 0, "a partition the topic has");
        let index = partition.max(0) as usize;
        let at = match self.topics.get(&**topic) {
            Some(&at) => at,
            None => {
                self.partitions.push(Vec::new());
                self.topics.insert(topic.clone(), self.partitions.len() - 1);
                self.partitions.len() - 1
            }
        };
        let partitions = &mut self.partitions[at];
        if partitions.len() <= index {
            partitions.resize_with(index + 1, Partition::default);
        }
        &mut partitions[index]
    }

    /// Records parked, all partitions together.
    pub(super) fn parked(&self) -> usize {
        self.parked
    }

    /// Whether the record in `slot` for `topic`/`partition` may be handed over at `now`: a
    /// partition's first record may, and the partition's next ones must be
    /// [parked](Self::park) until its report (as must any record behind parked ones).
    pub(super) fn admit(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        slot: Slot,
        now: Instant,
    ) -> bool {
        let part = self.partition(topic, partition);
        part.parked.is_empty() && Self::admit_state(&mut part.state, slot, now)
    }

    fn admit_state(state: &mut State, slot: Slot, now: Instant) -> bool {
        match *state {
            State::FirstInFlight(_) => false,
            State::Acknowledged(at)
                if now.saturating_duration_since(at) < IDLE_BEFORE_FIRST_AGAIN =>
            {
                true
            }
            State::New | State::Acknowledged(_) => {
                *state = State::FirstInFlight(slot);
                true
            }
        }
    }

    /// Keeps the record in `slot` for `topic`/`partition` until it may go.
    pub(super) fn park(&mut self, topic: &Arc<str>, partition: i32, slot: Slot, record: R) {
        let part = self.partition(topic, partition);
        part.parked.push_back((slot, record));
        if part.parked.len() == 1 {
            self.waiting.push_back((topic.clone(), partition));
        }
        self.parked += 1;
    }

    /// The next parked record of `topic`/`partition` that may go at `now`: after an
    /// acknowledgement every parked record in turn, after a failed first the next one alone.
    pub(super) fn next_release_of(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        now: Instant,
    ) -> Option<(Slot, R)> {
        let part = self.partition(topic, partition);
        let &(slot, _) = part.parked.front()?;
        if !Self::admit_state(&mut part.state, slot, now) {
            return None;
        }
        let released = part.parked.pop_front().expect("a front record");
        if part.parked.is_empty() {
            self.waiting
                .retain(|(t, p)| !(*p == partition && **t == **topic));
        }
        self.parked -= 1;
        Some(released)
    }

    /// The next parked record of any partition that may go at `now`.
    pub(super) fn next_release(&mut self, now: Instant) -> Option<(Arc<str>, i32, Slot, R)> {
        for i in 0..self.waiting.len() {
            let (topic, partition) = self.waiting[i].clone();
            if let Some((slot, record)) = self.next_release_of(&topic, partition, now) {
                return Some((topic, partition, slot, record));
            }
        }
        None
    }

    /// A released record librdkafka could not take yet (its queue is full): first in its
    /// partition's line again, and not in flight.
    pub(super) fn unrelease(&mut self, topic: &Arc<str>, partition: i32, slot: Slot, record: R) {
        self.not_sent(topic, partition, slot);
        let part = self.partition(topic, partition);
        part.parked.push_front((slot, record));
        if part.parked.len() == 1 {
            self.waiting.push_front((topic.clone(), partition));
        }
        self.parked += 1;
    }

    /// The record in `slot` never reached librdkafka (it refused it on the spot): if it was
    /// the partition's first, the next record is the first again.
    pub(super) fn not_sent(&mut self, topic: &Arc<str>, partition: i32, slot: Slot) {
        let part = self.partition(topic, partition);
        if part.state == State::FirstInFlight(slot) {
            part.state = State::New;
        }
    }

    /// The record in `slot` of `topic`/`partition` came back: Kafka acknowledged it (at
    /// `now`; any acknowledgement shows Kafka holds the producer's sequence there) or not.
    /// True when it was the partition's first record and not acknowledged: the next one is
    /// the first again (or the caller [takes the parked ones back](Self::take_parked)).
    pub(super) fn reported(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        slot: Slot,
        acknowledged: bool,
        now: Instant,
    ) -> bool {
        let part = self.partition(topic, partition);
        if acknowledged {
            part.state = State::Acknowledged(now);
            return false;
        }
        if part.state == State::FirstInFlight(slot) {
            part.state = State::New;
            return true;
        }
        false
    }

    /// Every parked record of `topic`/`partition`, oldest first, no longer parked.
    pub(super) fn take_parked(&mut self, topic: &Arc<str>, partition: i32) -> Vec<(Slot, R)> {
        let part = self.partition(topic, partition);
        let taken: Vec<(Slot, R)> = part.parked.drain(..).collect();
        if !taken.is_empty() {
            self.waiting
                .retain(|(t, p)| !(*p == partition && **t == **topic));
            self.parked -= taken.len();
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str) -> Arc<str> {
        name.into()
    }

    /// The first record of each partition travels alone; after its acknowledgement the
    /// partition takes records freely; other partitions and topics are not held by it.
    #[test]
    fn a_partitions_first_record_travels_alone_until_kafka_acknowledged_it() {
        let mut writes = FirstWrites::<()>::default();
        let (orders, customers) = (topic("Order.events"), topic("Customer.events"));
        let now = Instant::now();
        assert!(
            writes.admit(&orders, 2, 1, now),
            "a partition's first record goes"
        );
        assert!(
            !writes.admit(&orders, 2, 2, now),
            "the second waits for its report"
        );
        assert!(
            writes.admit(&orders, 0, 3, now),
            "another partition has a first of its own"
        );
        assert!(
            writes.admit(&customers, 2, 4, now),
            "so has another topic's partition"
        );
        assert!(!writes.reported(&orders, 2, 1, true, now));
        for slot in 5..8 {
            assert!(
                writes.admit(&orders, 2, slot, now),
                "acknowledged: records go freely"
            );
        }
        assert!(
            !writes.admit(&orders, 0, 8, now),
            "partition 0 still waits for its first"
        );
    }

    /// Only the first record's own report frees the partition: a report of an older record
    /// that failed (sent before the rule applied, or before a long idle time) changes
    /// nothing; any acknowledgement shows Kafka holds the producer's sequence.
    #[test]
    fn only_the_first_records_own_failure_makes_the_next_one_first() {
        let mut writes = FirstWrites::<()>::default();
        let t = topic("T.events");
        let now = Instant::now();
        assert!(writes.admit(&t, 0, 10, now));
        assert!(
            !writes.reported(&t, 0, 9, false, now),
            "an older record's failure"
        );
        assert!(
            !writes.admit(&t, 0, 11, now),
            "the first is still unanswered"
        );
        assert!(
            writes.reported(&t, 0, 10, false, now),
            "the first's own failure"
        );
        assert!(
            writes.admit(&t, 0, 12, now),
            "the next record is the first again"
        );
        assert!(!writes.admit(&t, 0, 13, now), "and travels alone");
        writes.not_sent(&t, 0, 11);
        assert!(
            !writes.admit(&t, 0, 13, now),
            "another slot refused on the spot frees nothing"
        );
        writes.not_sent(&t, 0, 12);
        assert!(
            writes.admit(&t, 0, 13, now),
            "the first refused on the spot: the next is first"
        );
        assert!(
            !writes.reported(&t, 0, 9, true, now),
            "an older record acknowledged"
        );
        assert!(
            writes.admit(&t, 0, 14, now),
            "Kafka holds the sequence: records go"
        );
        assert!(
            !writes.reported(&t, 0, 14, false, now),
            "a failure after that holds nothing"
        );
        assert!(writes.admit(&t, 0, 15, now));
    }

    /// A partition without an acknowledged record for longer than Kafka may keep the
    /// producer's state has a first record again.
    #[test]
    fn a_partition_idle_for_long_has_a_first_record_again() {
        let mut writes = FirstWrites::<()>::default();
        let t = topic("T.events");
        let then = Instant::now();
        assert!(writes.admit(&t, 1, 1, then));
        writes.reported(&t, 1, 1, true, then);
        let later = then + IDLE_BEFORE_FIRST_AGAIN - Duration::from_secs(1);
        assert!(writes.admit(&t, 1, 2, later));
        assert!(writes.admit(&t, 1, 3, later), "still within the idle time");
        let much_later = then + IDLE_BEFORE_FIRST_AGAIN;
        assert!(
            writes.admit(&t, 1, 4, much_later),
            "the first record after it goes"
        );
        assert!(!writes.admit(&t, 1, 5, much_later), "alone");
    }

    /// Records parked behind a first one go in their order once it is acknowledged; after a
    /// failed first the next parked one goes alone; a record librdkafka could not take yet is
    /// first in line again (and, released as a first, no longer in flight); a partition that
    /// cannot release does not hold one that can.
    #[test]
    fn parked_records_go_in_order_once_the_first_is_acknowledged() {
        let mut writes = FirstWrites::<&str>::default();
        let (a, b) = (topic("A.events"), topic("B.events"));
        let now = Instant::now();
        assert!(writes.admit(&a, 0, 1, now));
        for (slot, r) in [(2, "a2"), (3, "a3"), (4, "a4")] {
            assert!(!writes.admit(&a, 0, slot, now));
            writes.park(&a, 0, slot, r);
        }
        assert!(writes.admit(&b, 0, 5, now));
        assert!(!writes.admit(&b, 0, 6, now));
        writes.park(&b, 0, 6, "b6");
        assert_eq!(writes.parked(), 4);
        assert_eq!(
            writes.next_release(now),
            None,
            "nothing before a first's report"
        );
        // B's first is acknowledged: B's parked record goes although A, ahead, cannot.
        writes.reported(&b, 0, 5, true, now);
        assert_eq!(writes.next_release(now), Some((b.clone(), 0, 6, "b6")));
        // A's first failed: the next parked record is the new first, alone.
        assert!(writes.reported(&a, 0, 1, false, now));
        assert_eq!(writes.next_release_of(&a, 0, now), Some((2, "a2")));
        assert_eq!(writes.next_release_of(&a, 0, now), None);
        // Released as a first, refused for a full queue: parked again, and still the first.
        writes.unrelease(&a, 0, 2, "a2");
        assert_eq!(writes.next_release(now), Some((a.clone(), 0, 2, "a2")));
        assert!(
            !writes.admit(&a, 0, 7, now),
            "a new record waits behind the parked ones"
        );
        writes.park(&a, 0, 7, "a7");
        writes.reported(&a, 0, 2, true, now);
        assert_eq!(writes.next_release_of(&a, 0, now), Some((3, "a3")));
        let (slot, r) = writes.next_release_of(&a, 0, now).unwrap();
        assert_eq!(r, "a4");
        writes.unrelease(&a, 0, slot, r);
        assert_eq!(writes.next_release(now), Some((a.clone(), 0, 4, "a4")));
        assert_eq!(writes.next_release(now), Some((a.clone(), 0, 7, "a7")));
        assert_eq!(writes.next_release(now), None);
        assert_eq!(writes.parked(), 0);
        assert!(writes.admit(&a, 0, 8, now), "nothing parked: records go");
    }

    /// A first record that failed for good (its session ends) leaves its parked records to
    /// be taken back, oldest first, none of them sent.
    #[test]
    fn the_parked_records_of_a_failed_first_are_taken_back_in_order() {
        let mut writes = FirstWrites::<&str>::default();
        let t = topic("T.events");
        let now = Instant::now();
        assert!(writes.admit(&t, 3, 1, now));
        writes.park(&t, 3, 2, "r2");
        writes.park(&t, 3, 3, "r3");
        assert!(writes.reported(&t, 3, 1, false, now));
        assert_eq!(writes.take_parked(&t, 3), vec![(2, "r2"), (3, "r3")]);
        assert_eq!(writes.parked(), 0);
        assert_eq!(writes.next_release(now), None);
        assert!(writes.admit(&t, 3, 4, now), "the next record is a first");
    }

    /// An older record's acknowledgement while the first is in flight shows Kafka holds the
    /// producer's sequence: the parked records all go. After the idle time, the front parked
    /// record goes alone, as a first.
    #[test]
    fn an_acknowledgement_frees_the_parked_records_and_an_idle_partition_releases_one_first() {
        let mut writes = FirstWrites::<&str>::default();
        let t = topic("T.events");
        let now = Instant::now();
        assert!(writes.admit(&t, 0, 1, now));
        writes.park(&t, 0, 2, "r2");
        writes.park(&t, 0, 3, "r3");
        writes.reported(&t, 0, 0, true, now);
        assert_eq!(writes.next_release_of(&t, 0, now), Some((2, "r2")));
        assert_eq!(writes.next_release_of(&t, 0, now), Some((3, "r3")));
        // Acknowledged long ago: a parked record goes as a first, alone.
        assert!(writes.admit(&t, 1, 4, now));
        writes.reported(&t, 1, 4, true, now);
        let later = now + IDLE_BEFORE_FIRST_AGAIN;
        assert!(writes.admit(&t, 1, 5, later), "a first after the idle time");
        writes.park(&t, 1, 6, "r6");
        writes.park(&t, 1, 7, "r7");
        writes.reported(&t, 1, 5, false, later);
        assert_eq!(writes.next_release_of(&t, 1, later), Some((6, "r6")));
        assert_eq!(writes.next_release_of(&t, 1, later), None, "r6 goes alone");
    }
}
