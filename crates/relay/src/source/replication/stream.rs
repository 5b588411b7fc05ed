//! The streaming loop of one replication session, over two seams: a [`ChangeStream`] (the
//! replication connection, or a fake) and a [`Producer`] (librdkafka, or a fake). Each change
//! is decoded, routed, handed to the delivery stage with its ticket; each acknowledgement
//! goes through the tracker, and whatever position it allows is confirmed back to the
//! stream. Reading pauses while `max_in_flight` records are unacknowledged.

use crate::confirm::Confirmations;
use crate::deliver::{AckTracker, Counts, Deliver, EventPosition, Origin, Producer, Ticket};
use crate::error::RelayError;
use crate::metrics::Metrics;
use crate::route;
use crate::source::snapshot::SnapshotRows;
use anyhow::anyhow;
use bytes::Bytes;
use outbox_router::connect::ColumnFacts;
use outbox_router::{RouteOutcome, Router, TableName};
use pgoutput::{LogicalMessage, Lsn, Relation};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long a graceful shutdown keeps reading to reach the end of an open transaction.
const TRANSACTION_FINISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Silence on the replication connection after which the relay checks that the server still
/// streams to it. A connection can die without closing (a network path lost, a NAT entry
/// dropped): without this check a lone instance would wait for TCP to give up (~15 min).
pub const SILENCE_BEFORE_PROBE: Duration = Duration::from_secs(10);

/// How long a graceful shutdown waits for in-flight deliveries before giving up on them
/// (they are then re-sent by the next run: nothing is confirmed for them).
pub const SHUTDOWN_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a long snapshot logs its progress.
const SNAPSHOT_PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

/// Says when a periodic progress line is due.
struct Progress {
    every: Duration,
    last: Instant,
}

impl Progress {
    fn every(every: Duration) -> Self {
        Self {
            every,
            last: Instant::now(),
        }
    }

    fn due(&mut self) -> bool {
        if self.last.elapsed() < self.every {
            return false;
        }
        self.last = Instant::now();
        true
    }
}

/// One change of the replication stream, as the loop needs it.
#[derive(Debug, Clone)]
pub enum Change {
    /// A transaction starts; `commit` is the LSN of its commit record.
    Begin {
        commit: Lsn,
    },
    /// One pgoutput message.
    Data {
        wal_start: Lsn,
        wal_end: Lsn,
        data: Bytes,
    },
    Commit {
        end_lsn: Lsn,
        commit_time_micros: i64,
    },
    KeepAlive {
        wal_end: Lsn,
    },
    /// Anything the relay does not act on (logical decoding messages, ...).
    Other,
}

/// What the loop needs of a replication connection.
pub trait ChangeStream {
    /// The next change; `Ok(None)` when the stream ended. Cancel-safe.
    fn recv(&mut self) -> impl Future<Output = Result<Option<Change>, RelayError>>;
    /// Reports `lsn` as flushed. Only ever called with a position the tracker allows.
    fn confirm(&mut self, lsn: Lsn);
    /// Checks, after a silence, that the server still streams to this connection; an error
    /// ends the session (the supervisor reconnects).
    fn probe(&mut self) -> impl Future<Output = Result<(), RelayError>>;
    /// Nullability and defaults of `table`'s columns (Kafka Connect schemas need them).
    fn column_facts(
        &mut self,
        table: &TableName,
    ) -> impl Future<Output = Result<Vec<ColumnFacts>, RelayError>>;
}

pub struct Streamer<'a, S: ChangeStream, P: Producer> {
    pub stream: S,
    deliver: Deliver<P>,
    router: Router,
    tracker: AckTracker,
    confirmations: &'a mut Confirmations,
    metrics: Arc<Metrics>,
    table: Arc<str>,
    max_in_flight: usize,
    /// The open transaction's commit LSN and the index of its next change: each event's
    /// place in the replay order (`--exactly-once`).
    commit: Lsn,
    change_index: u32,
    /// `--exactly-once`: the liveness probe also runs while the in-flight window is full, so
    /// an instance cut off from PostgreSQL stops producing within the probe's bound.
    probe_when_full: bool,
}

impl<'a, S: ChangeStream, P: Producer> Streamer<'a, S, P> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        stream: S,
        deliver: Deliver<P>,
        router: Router,
        start: Lsn,
        confirmations: &'a mut Confirmations,
        metrics: Arc<Metrics>,
        table: &TableName,
        max_in_flight: usize,
    ) -> Self {
        Self {
            stream,
            deliver,
            router,
            tracker: AckTracker::new(start),
            confirmations,
            metrics,
            table: table.to_string().into(),
            max_in_flight,
            commit: Lsn::ZERO,
            change_index: 0,
            probe_when_full: false,
        }
    }

    /// `--exactly-once`: probe PostgreSQL after a silence even while the window is full.
    pub fn probe_when_full(mut self) -> Self {
        self.probe_when_full = true;
        self
    }

    pub fn counts(&self) -> Counts {
        self.deliver.counts()
    }

    #[cfg(test)]
    pub fn deliver_producer(&self) -> &P {
        self.deliver.producer()
    }

    /// Streams until shutdown (Ok, at a transaction boundary when possible) or an error.
    pub async fn stream(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), RelayError> {
        // On shutdown, read on to the end of the open transaction (bounded in time): its
        // events are then confirmed rather than sent again by the next run.
        let mut stop_by: Option<Instant> = None;
        let mut last_heard = tokio::time::Instant::now();
        let mut had_room = true;
        loop {
            if stop_by.is_none() && *shutdown.borrow() {
                stop_by = Some(Instant::now() + TRANSACTION_FINISH_TIMEOUT);
            }
            if let Some(deadline) = stop_by {
                if !self.tracker.in_transaction() || Instant::now() > deadline {
                    return Ok(());
                }
            }
            let room = self.deliver.in_flight() < self.max_in_flight;
            let probe = room || self.probe_when_full;
            if room && !had_room {
                // Not reading while the window was full is not the server's silence.
                last_heard = tokio::time::Instant::now();
            }
            had_room = room;
            let pending = self.deliver.has_pending();
            tokio::select! {
                biased;
                _ = shutdown.changed(), if stop_by.is_none() => continue,
                _ = tokio::time::sleep(Duration::from_millis(100)), if stop_by.is_some() => continue,
                acknowledged = self.deliver.next_acknowledged(), if pending => {
                    self.on_acknowledged(acknowledged?);
                }
                change = self.stream.recv(), if room => {
                    last_heard = tokio::time::Instant::now();
                    match change? {
                        Some(change) => self.on_change(change).await?,
                        None => return Err(RelayError::ConnectionLost(anyhow!("the replication stream ended"))),
                    }
                }
                _ = tokio::time::sleep_until(last_heard + SILENCE_BEFORE_PROBE), if stop_by.is_none() && probe => {
                    self.stream.probe().await?;
                    last_heard = tokio::time::Instant::now();
                }
            }
            self.metrics.in_flight.set(self.deliver.in_flight() as i64);
        }
    }

    /// snapshot.mode=initial: relays the rows already in the outbox at `position`, waits
    /// until Kafka acknowledged all of them (they are confirmed by nothing: the caller
    /// records the snapshot complete only then).
    pub async fn relay_snapshot(
        &mut self,
        rows: SnapshotRows,
        position: Lsn,
    ) -> Result<(), RelayError> {
        self.route_message(&LogicalMessage::Relation(rows.relation), position, None)
            .await?;
        // Rows of two snapshot reads are never compared: a retake gets a name of its own.
        let snapshot: Arc<str> = rows
            .snapshot
            .unwrap_or_else(|| format!("retake-{}", uuid::Uuid::now_v7()))
            .into();
        let total = rows.rows.len() as u64;
        self.metrics.snapshot_rows_total.set(total as i64);
        self.metrics.snapshot_rows_done.set(0);
        let mut progress = Progress::every(SNAPSHOT_PROGRESS_INTERVAL);
        for (row, insert) in rows.rows.into_iter().enumerate() {
            let event = EventPosition::Snapshot {
                snapshot: snapshot.clone(),
                row: row as u64,
            };
            self.route_message(&LogicalMessage::Insert(insert), position, Some(event))
                .await?;
            let done = row as u64 + 1;
            self.metrics.snapshot_rows_done.set(done as i64);
            if progress.due() {
                tracing::info!(
                    rows_done = done,
                    rows_total = total,
                    percent = done * 100 / total.max(1),
                    "snapshot progress: {done} of {total} rows handed to Kafka"
                );
            }
        }
        let tracker = &mut self.tracker;
        self.deliver
            .drain(|ticket| {
                let _ = tracker.delivered(ticket);
            })
            .await
    }

    /// After a failure on the broker: see [`Deliver::settle`].
    pub async fn settle(&mut self, within: Duration) {
        self.deliver.settle(within).await;
    }

    /// Graceful end: waits (bounded) for in-flight deliveries, confirming what they allow.
    /// Returns the position every event before which is acknowledged.
    pub async fn finish(&mut self) -> Lsn {
        let in_flight = self.deliver.in_flight();
        tracing::info!(in_flight, "stopping: waiting for in-flight deliveries");
        let Self {
            deliver,
            tracker,
            stream,
            confirmations,
            ..
        } = self;
        let drain = deliver.drain(|ticket| {
            if let Some(lsn) = tracker.delivered(ticket) {
                stream.confirm(lsn);
                confirmations.confirmed(lsn);
            }
        });
        match tokio::time::timeout(SHUTDOWN_DRAIN_TIMEOUT, drain).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("a delivery failed during shutdown ({e}); it will be re-sent on the next start"),
            Err(_) => tracing::warn!(
                in_flight = self.deliver.in_flight(),
                "deliveries still pending after {SHUTDOWN_DRAIN_TIMEOUT:?}; they will be re-sent on the next start"
            ),
        }
        self.tracker.confirmed()
    }

    fn on_acknowledged(&mut self, ticket: Ticket) {
        if let Some(lsn) = self.tracker.delivered(ticket) {
            self.confirm(lsn);
        }
    }

    fn confirm(&mut self, lsn: Lsn) {
        self.stream.confirm(lsn);
        self.confirmations.confirmed(lsn);
    }

    async fn on_change(&mut self, change: Change) -> Result<(), RelayError> {
        match change {
            Change::Begin { commit } => {
                self.tracker.begin();
                self.commit = commit;
                self.change_index = 0;
            }
            Change::Commit {
                end_lsn,
                commit_time_micros,
            } => {
                self.confirmations.committed(end_lsn, commit_time_micros);
                if let Some(lsn) = self.tracker.commit(end_lsn) {
                    self.confirm(lsn);
                }
            }
            Change::KeepAlive { wal_end } => {
                self.metrics.set_server_wal(wal_end);
                if let Some(lsn) = self.tracker.keepalive(wal_end) {
                    self.confirm(lsn);
                }
            }
            Change::Data {
                wal_start,
                wal_end,
                data,
            } => {
                self.metrics.set_server_wal(wal_end);
                let undecodable = |e: pgoutput::DecodeError| RelayError::Undecodable {
                    lsn: wal_start,
                    error: e.to_string(),
                };
                // A change's place in its transaction counts every insert, update, delete
                // and truncate (not what the router keeps): the same in every replay.
                let event = matches!(data.first(), Some(b'I' | b'U' | b'D' | b'T')).then(|| {
                    let index = self.change_index;
                    self.change_index += 1;
                    EventPosition::Stream {
                        commit: self.commit,
                        index,
                    }
                });
                // Inserts, nearly all of the stream, take the router's zero-allocation path.
                if data.first() == Some(&b'I') {
                    let outcome = self.router.route_message(&data).map_err(undecodable)?;
                    self.deliver_outcome(outcome, wal_start, event).await?;
                } else {
                    let message = pgoutput::decode(data).map_err(undecodable)?;
                    self.route_message(&message, wal_start, event).await?;
                }
            }
            Change::Other => {}
        }
        Ok(())
    }

    async fn route_message(
        &mut self,
        message: &LogicalMessage,
        position: Lsn,
        event: Option<EventPosition>,
    ) -> Result<(), RelayError> {
        if let LogicalMessage::Relation(relation) = message {
            self.refresh_column_facts(relation).await?;
        }
        let outcome = self.router.route(message);
        self.deliver_outcome(outcome, position, event).await
    }

    async fn deliver_outcome(
        &mut self,
        outcome: RouteOutcome,
        position: Lsn,
        event: Option<EventPosition>,
    ) -> Result<(), RelayError> {
        if let Some(routed) = route::triage(outcome, Some(position))? {
            let ticket = self.tracker.produced();
            let origin = Origin {
                table: self.table.clone(),
                position: Some(position),
                event,
            };
            self.deliver.submit(routed, ticket, origin).await?;
        }
        Ok(())
    }

    /// Kafka Connect schemas carry nullability and defaults, which pgoutput does not send:
    /// read them from the catalog whenever an outbox table's Relation message arrives
    /// (once per session and after each ALTER TABLE), as Debezium does.
    async fn refresh_column_facts(&mut self, relation: &Relation) -> Result<(), RelayError> {
        if !self.router.wants_column_facts()
            || !self
                .router
                .is_outbox_table(&relation.namespace, &relation.name)
        {
            return Ok(());
        }
        let table = TableName {
            schema: relation.namespace.clone(),
            name: relation.name.clone(),
        };
        let facts = self.stream.column_facts(&table).await?;
        self.router.set_column_facts(&table, facts);
        Ok(())
    }
}
