//! What the producer reports for each record, and what travels with a record while it is in
//! flight (its [`Tag`]): the ticket that acknowledges it, where it came from, and whether
//! it is an event or a dead letter.

use super::dead_letter::{DeadLetter, RefusedRecord};
use super::exactly_once::EventPosition;
use super::tracker::Ticket;
use pgoutput::Lsn;
use prometheus_client::metrics::counter::Counter;
use std::sync::Arc;

/// How one record's delivery ended.
#[derive(Debug)]
pub enum Outcome {
    /// Kafka acknowledged the record (`acks=all`): it is durable.
    Acknowledged,
    /// The broker or the producer refused this record for what it is (too large, invalid,
    /// a partition the topic does not have): retrying cannot help, it is dead-lettered.
    Refused {
        error: String,
        record: RefusedRecord,
    },
    /// The broker refused another record of this record's batch, and failed this one with it
    /// (KIP-467). A streamed event is sent again by the next session, whose replay
    /// dead-letters the refused one first; a record no replay repeats in order (a snapshot or
    /// polled row) is dead-lettered with its payload, so that nothing loops.
    Neighbour {
        error: String,
        record: RefusedRecord,
    },
    /// The broker refuses the relay itself (authorization, authentication): nothing gets
    /// through until an operator acts, so the relay stops with the fix.
    Forbidden { error: String },
    /// The broker refuses the producer's settings (or is too old for them): retrying cannot
    /// help, so the relay stops naming the error.
    Misconfigured { error: String },
    /// The record did not reach the broker (timeout, connection, fatal producer state):
    /// never skipped; the session ends and resumes from the last confirmed position.
    Failed { error: String },
}

/// Where an event came from: its table, its WAL position when it has one (rows read with
/// SQL by polling mode have none), and its place in the source's replay order.
#[derive(Debug, Clone)]
pub struct Origin {
    pub table: Arc<str>,
    pub position: Option<Lsn>,
    /// Its place in the source's replay order (`--exactly-once`); `None` for rows read with
    /// SQL by polling mode.
    pub event: Option<EventPosition>,
}

/// What travels with a record through the producer and comes back with its outcome.
#[derive(Debug)]
pub struct Tag {
    pub ticket: Ticket,
    pub origin: Origin,
    pub kind: Kind,
}

#[derive(Debug)]
pub enum Kind {
    /// An outbox event; the counter is its topic's `outbox_relay_events_total`.
    Event(Counter),
    /// The dead letter of an event (kept to send it again without its payload if the
    /// dead-letter topic refuses it as it is).
    DeadLetter(Box<DeadLetter>),
    /// The end-to-end canary written at this time (milliseconds since the epoch).
    Canary(i64),
}
