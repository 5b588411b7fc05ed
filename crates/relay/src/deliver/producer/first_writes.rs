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
//! per producer, and again after [`IDLE_BEFORE_FIRST_AGAIN`] without a record there (Kafka
//! forgets a producer after `producer.id.expiration.ms`, a day by default).

use foldhash::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a partition may go without an acknowledged record of this producer before its
/// next record travels alone again: well within Kafka's `producer.id.expiration.ms` (a day
/// by default), after which the broker no longer checks this producer's sequence there.
pub(super) const IDLE_BEFORE_FIRST_AGAIN: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No record of this producer acknowledged here (or not for long).
    New,
    /// Its first record is in flight: the next ones are parked until its report.
    FirstInFlight,
    /// Kafka acknowledged a record of this producer here, last at this time.
    Acknowledged(Instant),
}

#[derive(Debug)]
struct Partition<R> {
    state: State,
    /// Records waiting for the first one's acknowledgement, in the order they came.
    parked: VecDeque<R>,
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
/// name, no copy of it). Partition numbers are the topic's (the producer checks them against
/// its count first), so a topic's partitions are a vector.
#[derive(Debug)]
pub(super) struct FirstWrites<R> {
    topics: HashMap<Arc<str>, Vec<Partition<R>>>,
    /// The partitions with parked records, in the order they were first parked.
    waiting: VecDeque<(Arc<str>, i32)>,
    /// Parked records, all partitions together.
    parked: usize,
}

impl<R> Default for FirstWrites<R> {
    fn default() -> Self {
        Self {
            topics: HashMap::default(),
            waiting: VecDeque::new(),
            parked: 0,
        }
    }
}

impl<R> FirstWrites<R> {
    fn partition(&mut self, topic: &Arc<str>, partition: i32) -> &mut Partition<R> {
        let index = usize::try_from(partition).unwrap_or(0);
        if !self.topics.contains_key(&**topic) {
            self.topics.insert(topic.clone(), Vec::new());
        }
        let partitions = self.topics.get_mut(&**topic).expect("inserted above");
        if partitions.len() <= index {
            partitions.resize_with(index + 1, Partition::default);
        }
        &mut partitions[index]
    }

    /// Records parked, all partitions together.
    pub(super) fn parked(&self) -> usize {
        self.parked
    }

    /// Whether a record for `topic`/`partition` may be handed over at `now`: a partition's
    /// first record may, and the partition's next ones must be [parked](Self::park) until
    /// its report (as must any record behind parked ones).
    pub(super) fn admit(&mut self, topic: &Arc<str>, partition: i32, now: Instant) -> bool {
        let part = self.partition(topic, partition);
        if !part.parked.is_empty() {
            return false;
        }
        Self::admit_state(&mut part.state, now)
    }

    fn admit_state(state: &mut State, now: Instant) -> bool {
        match *state {
            State::FirstInFlight => false,
            State::Acknowledged(at)
                if now.saturating_duration_since(at) < IDLE_BEFORE_FIRST_AGAIN =>
            {
                true
            }
            State::New | State::Acknowledged(_) => {
                *state = State::FirstInFlight;
                true
            }
        }
    }

    /// Keeps `record` for `topic`/`partition` until [`admit`](Self::admit) would let it go.
    pub(super) fn park(&mut self, topic: &Arc<str>, partition: i32, record: R) {
        let part = self.partition(topic, partition);
        part.parked.push_back(record);
        if part.parked.len() == 1 {
            self.waiting.push_back((topic.clone(), partition));
        }
        self.parked += 1;
    }

    /// The next parked record that may go at `now`, oldest first within its partition: after
    /// an acknowledgement every parked record of the partition, after a failed first record
    /// the next one alone.
    pub(super) fn next_release(&mut self, now: Instant) -> Option<(Arc<str>, i32, R)> {
        for i in 0..self.waiting.len() {
            let (topic, partition) = self.waiting[i].clone();
            let part = self.partition(&topic, partition);
            if !Self::admit_state(&mut part.state, now) {
                continue;
            }
            let record = part
                .parked
                .pop_front()
                .expect("a waiting partition has parked records");
            if part.parked.is_empty() {
                self.waiting.remove(i);
            }
            self.parked -= 1;
            return Some((topic, partition, record));
        }
        None
    }

    /// A record [released](Self::next_release) that librdkafka could not take yet (its queue
    /// is full): first in its partition's line again, and not in flight.
    pub(super) fn unrelease(&mut self, topic: &Arc<str>, partition: i32, record: R) {
        self.not_sent(topic, partition);
        let part = self.partition(topic, partition);
        part.parked.push_front(record);
        if part.parked.len() == 1 {
            self.waiting.push_front((topic.clone(), partition));
        }
        self.parked += 1;
    }

    /// The record admitted last for `topic`/`partition` never reached librdkafka (it refused
    /// it on the spot): the partition's next record is its first again.
    pub(super) fn not_sent(&mut self, topic: &Arc<str>, partition: i32) {
        let part = self.partition(topic, partition);
        if part.state == State::FirstInFlight {
            part.state = State::New;
        }
    }

    /// A record of `topic`/`partition` came back: Kafka acknowledged it (at `now`) or not.
    /// After a failed first record, the next one is the first again.
    pub(super) fn reported(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        acknowledged: bool,
        now: Instant,
    ) {
        let part = self.partition(topic, partition);
        part.state = match (part.state, acknowledged) {
            (_, true) => State::Acknowledged(now),
            (State::FirstInFlight, false) => State::New,
            (other, false) => other,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first record of each partition travels alone; after its acknowledgement the
    /// partition takes records freely; other partitions and topics are not held by it.
    #[test]
    fn a_partitions_first_record_travels_alone_until_kafka_acknowledged_it() {
        let mut writes = FirstWrites::<u32>::default();
        let (orders, customers): (Arc<str>, Arc<str>) =
            ("Order.events".into(), "Customer.events".into());
        let now = Instant::now();
        assert!(
            writes.admit(&orders, 2, now),
            "a partition's first record goes"
        );
        assert!(
            !writes.admit(&orders, 2, now),
            "the second waits for its report"
        );
        assert!(!writes.admit(&orders, 2, now), "and keeps waiting");
        assert!(
            writes.admit(&orders, 0, now),
            "another partition has a first record of its own"
        );
        assert!(
            writes.admit(&customers, 2, now),
            "so has another topic's partition"
        );
        writes.reported(&orders, 2, true, now);
        for _ in 0..3 {
            assert!(
                writes.admit(&orders, 2, now),
                "acknowledged: records go freely"
            );
        }
        assert!(
            !writes.admit(&orders, 0, now),
            "partition 0 still waits for its first"
        );
    }

    /// A first record that failed (not written, or unknown) makes the next one the first;
    /// a first record librdkafka refused on the spot frees the partition at once; a failure
    /// after an acknowledgement changes nothing (Kafka holds the producer's sequence).
    #[test]
    fn a_first_record_that_did_not_land_makes_the_next_one_first() {
        let mut writes = FirstWrites::<u32>::default();
        let topic: Arc<str> = "T.events".into();
        let now = Instant::now();
        assert!(writes.admit(&topic, 0, now));
        writes.reported(&topic, 0, false, now);
        assert!(
            writes.admit(&topic, 0, now),
            "the next record is the first again"
        );
        assert!(!writes.admit(&topic, 0, now), "and travels alone");
        writes.not_sent(&topic, 0);
        assert!(
            writes.admit(&topic, 0, now),
            "refused on the spot: the next is first"
        );
        writes.reported(&topic, 0, true, now);
        writes.reported(&topic, 0, false, now);
        assert!(writes.admit(&topic, 0, now));
        assert!(
            writes.admit(&topic, 0, now),
            "a failure after an acknowledgement holds nothing"
        );
    }

    /// A partition without an acknowledged record for longer than Kafka may keep the
    /// producer's state has a first record again.
    #[test]
    fn a_partition_idle_for_long_has_a_first_record_again() {
        let mut writes = FirstWrites::<u32>::default();
        let topic: Arc<str> = "T.events".into();
        let then = Instant::now();
        assert!(writes.admit(&topic, 1, then));
        writes.reported(&topic, 1, true, then);
        let later = then + IDLE_BEFORE_FIRST_AGAIN - Duration::from_secs(1);
        assert!(writes.admit(&topic, 1, later));
        assert!(writes.admit(&topic, 1, later), "still within the idle time");
        let much_later = then + IDLE_BEFORE_FIRST_AGAIN;
        assert!(
            writes.admit(&topic, 1, much_later),
            "the first record after the idle time goes"
        );
        assert!(!writes.admit(&topic, 1, much_later), "alone");
    }

    /// Records parked behind a first one go in their order once it is acknowledged; after a
    /// failed first record, the next parked one goes alone; a record librdkafka could not
    /// take yet is first in line again. Other partitions are never held.
    #[test]
    fn parked_records_go_in_order_once_the_first_is_acknowledged() {
        let mut writes = FirstWrites::<u32>::default();
        let topic: Arc<str> = "T.events".into();
        let now = Instant::now();
        assert!(writes.admit(&topic, 0, now));
        for r in 1..=3 {
            assert!(!writes.admit(&topic, 0, now));
            writes.park(&topic, 0, r);
        }
        assert!(writes.admit(&topic, 1, now), "another partition goes");
        assert_eq!(writes.parked(), 3);
        assert_eq!(
            writes.next_release(now),
            None,
            "nothing before the first's report"
        );
        // The first failed: the next parked record is the new first, alone.
        writes.reported(&topic, 0, false, now);
        assert_eq!(writes.next_release(now), Some((topic.clone(), 0, 1)));
        assert_eq!(writes.next_release(now), None);
        assert!(
            !writes.admit(&topic, 0, now),
            "a new record waits behind the parked ones"
        );
        writes.park(&topic, 0, 4);
        writes.reported(&topic, 0, true, now);
        assert_eq!(writes.next_release(now), Some((topic.clone(), 0, 2)));
        // librdkafka's queue is full: record 3 waits, first in line.
        let (t, p, r) = writes.next_release(now).unwrap();
        assert_eq!(r, 3);
        writes.unrelease(&t, p, r);
        assert_eq!(writes.next_release(now), Some((topic.clone(), 0, 3)));
        assert_eq!(writes.next_release(now), Some((topic.clone(), 0, 4)));
        assert_eq!(writes.next_release(now), None);
        assert_eq!(writes.parked(), 0);
        assert!(writes.admit(&topic, 0, now), "nothing parked: records go");
    }
}
