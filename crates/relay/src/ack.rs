//! The acknowledgement rule — the one invariant that protects the user's events:
//!
//! **An LSN is confirmed to PostgreSQL only when every event at or before it has been
//! acknowledged by Kafka.**
//!
//! PostgreSQL discards WAL (and will never resend a transaction) once the slot's
//! `confirmed_flush_lsn` is past the transaction's commit. So the position we report is the
//! `end_lsn` of the newest transaction whose events — and the events of every earlier
//! transaction — are all delivered. Deliveries complete out of order (they are ordered per
//! partition only), so events are numbered as they are produced and the confirmable
//! position advances over the longest delivered prefix.
//!
//! With nothing in flight and no transaction open, a keepalive's `wal_end` is confirmable
//! too: every transaction that commits later has a larger commit LSN and will still be sent.
//! That keeps an idle outbox from holding WAL in a busy database, without a heartbeat table.
//!
//! [`AckTracker`] is pure (no I/O, no clock) and is the only place that decides what may
//! be confirmed; its tests are the proof.

use std::collections::VecDeque;

/// A WAL position (`pg_lsn` as a number).
pub type Lsn = u64;

/// Sequence number of one produced event, in production order.
pub type EventSeq = u64;

#[derive(Debug)]
pub struct AckTracker {
    /// Sequence number of `delivered[0]`: every event before it is delivered.
    base: EventSeq,
    /// Delivery state of events `base..base + delivered.len()`.
    delivered: VecDeque<bool>,
    /// Committed transactions not yet confirmable: (number of events produced up to and
    /// including the transaction, its `end_lsn`).
    commits: VecDeque<(EventSeq, Lsn)>,
    in_transaction: bool,
    confirmed: Lsn,
}

impl AckTracker {
    /// `confirmed`: the position already safe (the slot's, or an earlier session's).
    pub fn new(confirmed: Lsn) -> Self {
        Self {
            base: 0,
            delivered: VecDeque::new(),
            commits: VecDeque::new(),
            in_transaction: false,
            confirmed,
        }
    }

    /// The highest position that may be reported to PostgreSQL.
    pub fn confirmed(&self) -> Lsn {
        self.confirmed
    }

    /// Events produced and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.delivered.iter().filter(|d| !**d).count()
    }

    /// A Begin was seen and its Commit not yet.
    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    pub fn begin(&mut self) {
        self.in_transaction = true;
    }

    /// Registers an event handed to the producer; returns its sequence number.
    pub fn produced(&mut self) -> EventSeq {
        self.delivered.push_back(false);
        self.base + self.delivered.len() as u64 - 1
    }

    fn produced_total(&self) -> EventSeq {
        self.base + self.delivered.len() as u64
    }

    /// A transaction committed at `end_lsn`; returns a newly confirmable position, if any.
    pub fn commit(&mut self, end_lsn: Lsn) -> Option<Lsn> {
        self.in_transaction = false;
        self.commits.push_back((self.produced_total(), end_lsn));
        self.advance()
    }

    /// Kafka acknowledged event `seq`; returns a newly confirmable position, if any.
    pub fn delivered(&mut self, seq: EventSeq) -> Option<Lsn> {
        if let Some(index) = seq.checked_sub(self.base) {
            if let Some(slot) = self.delivered.get_mut(index as usize) {
                *slot = true;
            }
        }
        self.advance()
    }

    /// The server reported its WAL end; confirmable only when nothing is pending.
    pub fn keepalive(&mut self, wal_end: Lsn) -> Option<Lsn> {
        let idle = !self.in_transaction && self.delivered.is_empty() && self.commits.is_empty();
        if idle && wal_end > self.confirmed {
            self.confirmed = wal_end;
            return Some(wal_end);
        }
        None
    }

    fn advance(&mut self) -> Option<Lsn> {
        while self.delivered.front() == Some(&true) {
            self.delivered.pop_front();
            self.base += 1;
        }
        let mut newly = None;
        while let Some(&(events_before, end_lsn)) = self.commits.front() {
            if events_before > self.base {
                break;
            }
            self.commits.pop_front();
            if end_lsn > self.confirmed {
                self.confirmed = end_lsn;
                newly = Some(end_lsn);
            }
        }
        newly
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_commit_is_confirmed_only_after_all_its_events() {
        let mut t = AckTracker::new(10);
        t.begin();
        let a = t.produced();
        let b = t.produced();
        assert_eq!(t.commit(100), None);
        assert_eq!(t.delivered(b), None, "a later event's ack confirms nothing");
        assert_eq!(t.confirmed(), 10);
        assert_eq!(t.delivered(a), Some(100));
    }

    #[test]
    fn an_earlier_transaction_holds_back_later_ones() {
        let mut t = AckTracker::new(0);
        t.begin();
        let first = t.produced();
        t.commit(100);
        t.begin();
        let second = t.produced();
        t.commit(200);
        assert_eq!(t.delivered(second), None);
        assert_eq!(t.delivered(first), Some(200));
    }

    #[test]
    fn an_open_transaction_is_never_confirmed() {
        let mut t = AckTracker::new(0);
        t.begin();
        let a = t.produced();
        assert_eq!(t.delivered(a), None);
        assert_eq!(t.keepalive(500), None, "keepalive inside a transaction");
        assert_eq!(t.commit(300), Some(300));
    }

    #[test]
    fn keepalive_confirms_only_when_idle() {
        let mut t = AckTracker::new(0);
        assert_eq!(t.keepalive(50), Some(50));
        t.begin();
        let a = t.produced();
        t.commit(100);
        assert_eq!(t.keepalive(150), None, "an event is in flight");
        assert_eq!(t.delivered(a), Some(100));
        assert_eq!(t.keepalive(150), Some(150));
        assert_eq!(t.keepalive(120), None, "never backwards");
    }

    #[test]
    fn transactions_without_events_confirm_at_once_when_nothing_is_pending() {
        let mut t = AckTracker::new(0);
        t.begin();
        assert_eq!(t.commit(40), Some(40));
    }

    proptest! {
        /// For any interleaving of deliveries, the confirmed LSN is exactly the end of the
        /// newest transaction whose events and all earlier events are delivered.
        #[test]
        fn confirmed_is_the_end_of_the_delivered_prefix(
            sizes in prop::collection::vec(0usize..5, 1..20),
            order_seed in any::<u64>(),
        ) {
            let mut t = AckTracker::new(0);
            let mut tx_of_event = Vec::new();
            for (tx, size) in sizes.iter().enumerate() {
                t.begin();
                for _ in 0..*size { t.produced(); tx_of_event.push(tx); }
                t.commit((tx as u64 + 1) * 100);
            }
            let mut order: Vec<usize> = (0..tx_of_event.len()).collect();
            let mut state = order_seed;
            for i in (1..order.len()).rev() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                order.swap(i, (state >> 33) as usize % (i + 1));
            }
            let mut done = vec![false; tx_of_event.len()];
            for seq in order {
                t.delivered(seq as u64);
                done[seq] = true;
                // The expected confirmed LSN: the last tx all of whose events (and all
                // earlier events) are done.
                let prefix = done.iter().take_while(|d| **d).count();
                let mut expected = 0;
                let mut count = 0;
                for (tx, size) in sizes.iter().enumerate() {
                    count += size;
                    if count <= prefix { expected = (tx as u64 + 1) * 100; } else { break; }
                }
                prop_assert_eq!(t.confirmed(), expected);
            }
            prop_assert_eq!(t.confirmed(), sizes.len() as u64 * 100);
            prop_assert_eq!(t.in_flight(), 0);
        }
    }
}
