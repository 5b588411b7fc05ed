//! The acknowledgement rule — the one invariant that protects the user's events:
//!
//! **A position is confirmed to the source only when every event at or before it has been
//! acknowledged by Kafka (the event itself, or its dead letter).**
//!
//! PostgreSQL discards WAL (and will never resend a transaction) once the slot's
//! `confirmed_flush_lsn` is past the transaction's commit. So the position we report is the
//! `end_lsn` of the newest transaction whose events — and the events of every earlier
//! transaction — are all delivered. Deliveries complete out of order (they are ordered per
//! partition only), so events are numbered as they are produced ([`Seq`]) and the
//! confirmable position advances over the longest delivered prefix.
//!
//! With nothing in flight and no transaction open, a keepalive's `wal_end` is confirmable
//! too: every transaction that commits later has a larger commit LSN and will still be sent.
//! That keeps an idle outbox from holding WAL in a busy database, without a heartbeat table.
//!
//! The types carry the rule: an event can only be handed to the delivery stage with the
//! [`Ticket`] that [`AckTracker::produced`] returns, and only that ticket (not a number
//! that could be an LSN) can report it delivered. Polling mode uses the same tracker for its
//! batches: a poll commits only once [`AckTracker::all_delivered`].
//!
//! [`AckTracker`] is pure (no I/O, no clock) and is the only place that decides what may
//! be confirmed; its tests are the proof. `--cleanup` only defers a position it allows: the
//! stream confirms it once the ledger has the rows delivered before it
//! (`source/cleanup.rs`), never an earlier or later one.

use pgoutput::Lsn;
use std::collections::VecDeque;

/// Sequence number of one produced event, in production order: a count, never a WAL
/// position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seq(u64);

/// Proof that an event was registered with the tracker before it was produced. The delivery
/// stage carries it with the record and hands it back once Kafka acknowledged the record (or
/// its dead letter); [`AckTracker::delivered`] consumes it. Not `Clone`: an event is
/// acknowledged once.
#[must_use = "a registered event must be handed to the delivery stage, or the session must fail"]
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket {
    seq: Seq,
}

impl Ticket {
    pub fn seq(&self) -> Seq {
        self.seq
    }
}

#[derive(Debug)]
pub struct AckTracker {
    /// Sequence number of `delivered[0]`: every event before it is delivered.
    base: u64,
    /// Delivery state of events `base..base + delivered.len()`.
    delivered: VecDeque<bool>,
    /// Committed transactions not yet confirmable: (number of events produced up to and
    /// including the transaction, its `end_lsn`).
    commits: VecDeque<(u64, Lsn)>,
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

    /// The highest position that may be reported to the source.
    pub fn confirmed(&self) -> Lsn {
        self.confirmed
    }

    /// A Begin was seen and its Commit not yet.
    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    /// Every event numbered before this one has been acknowledged (`--cleanup` records the
    /// rows of those events before a position is confirmed).
    pub fn delivered_before(&self) -> Seq {
        Seq(self.base)
    }

    /// The number the next event gets: every event registered so far is numbered before it.
    /// Once [`Self::delivered_before`] reaches it, all of them were acknowledged.
    pub fn next_seq(&self) -> Seq {
        Seq(self.produced_total())
    }

    /// Every event registered so far has been acknowledged.
    pub fn all_delivered(&self) -> bool {
        self.delivered.is_empty()
    }

    pub fn begin(&mut self) {
        self.in_transaction = true;
    }

    /// Registers an event about to be handed to the producer.
    pub fn produced(&mut self) -> Ticket {
        self.delivered.push_back(false);
        Ticket {
            seq: Seq(self.base + self.delivered.len() as u64 - 1),
        }
    }

    fn produced_total(&self) -> u64 {
        self.base + self.delivered.len() as u64
    }

    /// A transaction committed at `end_lsn`; returns a newly confirmable position, if any.
    pub fn commit(&mut self, end_lsn: Lsn) -> Option<Lsn> {
        self.in_transaction = false;
        self.commits.push_back((self.produced_total(), end_lsn));
        self.advance()
    }

    /// Kafka acknowledged the ticket's event; returns a newly confirmable position, if any.
    pub fn delivered(&mut self, ticket: Ticket) -> Option<Lsn> {
        if let Some(index) = ticket.seq.0.checked_sub(self.base) {
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

    fn lsn(n: u64) -> Lsn {
        Lsn::from_u64(n)
    }

    #[test]
    fn a_commit_is_confirmed_only_after_all_its_events() {
        let mut t = AckTracker::new(lsn(10));
        t.begin();
        let a = t.produced();
        let b = t.produced();
        assert_eq!(t.commit(lsn(100)), None);
        assert_eq!(t.delivered(b), None, "a later event's ack confirms nothing");
        assert_eq!(t.confirmed(), lsn(10));
        assert_eq!(t.delivered(a), Some(lsn(100)));
    }

    #[test]
    fn an_earlier_transaction_holds_back_later_ones() {
        let mut t = AckTracker::new(Lsn::ZERO);
        t.begin();
        let first = t.produced();
        let _ = t.commit(lsn(100));
        t.begin();
        let second = t.produced();
        let _ = t.commit(lsn(200));
        assert_eq!(t.delivered(second), None);
        assert_eq!(t.delivered(first), Some(lsn(200)));
    }

    #[test]
    fn an_open_transaction_is_never_confirmed() {
        let mut t = AckTracker::new(Lsn::ZERO);
        t.begin();
        let a = t.produced();
        assert_eq!(t.delivered(a), None);
        assert_eq!(
            t.keepalive(lsn(500)),
            None,
            "keepalive inside a transaction"
        );
        assert_eq!(t.commit(lsn(300)), Some(lsn(300)));
    }

    #[test]
    fn keepalive_confirms_only_when_idle() {
        let mut t = AckTracker::new(Lsn::ZERO);
        assert_eq!(t.keepalive(lsn(50)), Some(lsn(50)));
        t.begin();
        let a = t.produced();
        let _ = t.commit(lsn(100));
        assert_eq!(t.keepalive(lsn(150)), None, "an event is in flight");
        assert_eq!(t.delivered(a), Some(lsn(100)));
        assert_eq!(t.keepalive(lsn(150)), Some(lsn(150)));
        assert_eq!(t.keepalive(lsn(120)), None, "never backwards");
    }

    #[test]
    fn transactions_without_events_confirm_at_once_when_nothing_is_pending() {
        let mut t = AckTracker::new(Lsn::ZERO);
        t.begin();
        assert_eq!(t.commit(lsn(40)), Some(lsn(40)));
    }

    #[test]
    fn a_batch_is_complete_when_every_ticket_came_back() {
        let mut t = AckTracker::new(Lsn::ZERO);
        let a = t.produced();
        let b = t.produced();
        assert!(!t.all_delivered());
        let _ = t.delivered(b);
        assert!(!t.all_delivered());
        let _ = t.delivered(a);
        assert!(t.all_delivered());
    }

    proptest! {
        /// For any interleaving of deliveries, the confirmed LSN is exactly the end of the
        /// newest transaction whose events and all earlier events are delivered.
        #[test]
        fn confirmed_is_the_end_of_the_delivered_prefix(
            sizes in prop::collection::vec(0usize..5, 1..20),
            order_seed in any::<u64>(),
        ) {
            let mut t = AckTracker::new(Lsn::ZERO);
            let mut tickets = Vec::new();
            for (tx, size) in sizes.iter().enumerate() {
                t.begin();
                for _ in 0..*size { tickets.push(Some(t.produced())); }
                let _ = t.commit(lsn((tx as u64 + 1) * 100));
            }
            let mut order: Vec<usize> = (0..tickets.len()).collect();
            let mut state = order_seed;
            for i in (1..order.len()).rev() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                order.swap(i, (state >> 33) as usize % (i + 1));
            }
            let mut done = vec![false; tickets.len()];
            for index in order {
                let ticket = tickets[index].take().expect("each ticket once");
                let _ = t.delivered(ticket);
                done[index] = true;
                // The expected confirmed LSN: the last tx all of whose events (and all
                // earlier events) are done.
                let prefix = done.iter().take_while(|d| **d).count();
                let mut expected = 0;
                let mut count = 0;
                for (tx, size) in sizes.iter().enumerate() {
                    count += size;
                    if count <= prefix { expected = (tx as u64 + 1) * 100; } else { break; }
                }
                prop_assert_eq!(t.confirmed(), lsn(expected));
            }
            prop_assert_eq!(t.confirmed(), lsn(sizes.len() as u64 * 100));
            prop_assert!(t.all_delivered());
        }
    }
}
