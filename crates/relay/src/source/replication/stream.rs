//! The streaming loop of one replication session, over two seams: a [`ChangeStream`] (the
//! replication connection, or a fake) and a [`Producer`] (librdkafka, or a fake). Each change
//! is decoded, routed, handed to the delivery stage with its ticket; each acknowledgement
//! goes through the tracker, and whatever position it allows is confirmed back to the
//! stream. Reading pauses while `max_in_flight` records are unacknowledged.

use crate::confirm::Confirmations;
use crate::deliver::Seq;
use crate::deliver::{
    AckTracker, Counts, Deliver, EventPosition, Origin, Producer, CATCH_UP_LINGER,
};
use crate::error::RelayError;
use crate::metrics::Metrics;
use crate::route;
use crate::source::snapshot::SnapshotReader;
use anyhow::anyhow;
use bytes::Bytes;
use foldhash::{HashMap, HashMapExt as _};
use futures::FutureExt;
use outbox_router::connect::ColumnFacts;
use outbox_router::{RouteOutcome, Router, TableName, TransactionMark};
use pgoutput::{LogicalMessage, Lsn, Relation};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

mod signals;
pub use signals::Signals;

/// How long a graceful shutdown keeps reading to reach the end of an open transaction.
/// Changes handled one after the other when they arrive together, before the stream loop
/// looks at its timers and acknowledgements again.
const BURST: usize = 256;

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
        xid: u32,
        commit_time_micros: i64,
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
    /// A logical decoding message (`pg_logical_emit_message`): inside its transaction's
    /// Begin/Commit when transactional, on its own otherwise.
    Message {
        lsn: Lsn,
        transactional: bool,
        prefix: String,
        content: Bytes,
    },
    /// Anything the relay does not act on.
    Other,
}

/// What the loop needs of a replication connection.
pub trait ChangeStream {
    /// Whether the stream is behind the database (its changes were sent well after they
    /// committed: they are late already). Their events are then handed to Kafka in groups.
    fn catching_up(&self) -> bool {
        false
    }
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
    /// The first outbox table's name, for rows whose relation is not known.
    table: Arc<str>,
    /// relation id -> `schema.table`, from Relation messages: the table a dead letter names.
    relation_tables: HashMap<u32, Arc<str>>,
    max_in_flight: usize,
    /// Key and value bytes in flight past which reading pauses too.
    max_in_flight_bytes: usize,
    /// The open transaction's commit LSN and the index of its next change: each event's
    /// place in the replay order (`--exactly-once`).
    commit: Lsn,
    change_index: u32,
    /// `--exactly-once`: the liveness probe also runs while the in-flight window is full, so
    /// an instance cut off from PostgreSQL stops producing within the probe's bound.
    probe_when_full: bool,
    /// Debezium's heartbeat records (`heartbeat.interval.ms`), when the router writes them.
    heartbeat: Option<tokio::time::Interval>,
    /// The open transaction, when BEGIN/END records are written (`provide.transaction.metadata`).
    transaction: Option<OpenTransaction>,
    /// When to look for partitions Kafka leaves unanswered (`Deliver::check_stuck`).
    stuck_check: tokio::time::Interval,
    /// The canaries this stream produces.
    canary: Option<CanaryStream>,
    /// `--cleanup`: relayed rows written to the ledger before a position is confirmed.
    cleanup: Option<crate::source::cleanup::Recorder>,
    cleanup_flush: Option<tokio::time::Interval>,
    /// The open transaction's commit time (PostgreSQL micros), for the ledger.
    commit_time_micros: Option<i64>,
    /// The open transaction's id, and the end of the last transaction this session
    /// committed: the change events' source block (transforms before the EventRouter).
    xid: Option<u32>,
    last_commit: Option<Lsn>,
    /// The last position reported to the source.
    reported: Lsn,
    /// The open transaction's inserts, updates and deletes of the outbox tables (Debezium's
    /// events seen) and its changes of other tables (filtered), counted into the metrics at
    /// its commit.
    seen: [u64; 4],
    /// The relation ids of the outbox tables (a few: a scan is cheaper than a hash).
    captured: Vec<u32>,
    /// Whether Debezium's series are served (the counts above are kept only then).
    debezium_series: bool,
    /// Signals, and the incremental and blocking snapshots they start.
    signals: Option<Signals>,
    /// The server's WAL end as the stream last reported it.
    server_wal: Lsn,
}

/// The canaries a stream produces: the slot's own, to `topic`.
struct CanaryStream {
    topic: Arc<str>,
    slot: String,
    /// `--canary-method table`: the canary table's schema, and its relation once the stream
    /// described it. Its changes are the canary's alone: never routed, never a business
    /// event, never in a transaction's metadata.
    table: Option<(String, Option<Relation>)>,
}

impl CanaryStream {
    /// Whether `data` (an insert, update or delete) is a change of the canary table.
    fn owns(&self, data: &[u8]) -> bool {
        let Some((_, Some(relation))) = &self.table else {
            return false;
        };
        matches!(data.first(), Some(b'I' | b'U' | b'D'))
            && data.get(1..5) == Some(&relation.relation_id.to_be_bytes()[..])
    }

    /// Whether `relation` describes the canary table.
    fn describes(&self, relation: &Relation) -> bool {
        self.table.as_ref().is_some_and(|(schema, _)| {
            relation.namespace == *schema && relation.name == crate::source::canary::TABLE
        })
    }
}

/// What an END record says about the open transaction.
struct OpenTransaction {
    xid: u32,
    ts_ms: i64,
    /// Whether its BEGIN record went out (at its first change, whose position names it).
    begun: bool,
    /// Events per outbox table, in the order first seen.
    per_table: Vec<(String, i64)>,
}

/// A timer that first fires `every` from now, then every `every` (late ticks delayed, not
/// bunched).
fn ticks_every(every: Duration) -> tokio::time::Interval {
    let mut timer = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    timer
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
        let deliver_check_every = deliver.stuck_check_every();
        let debezium_series = metrics.debezium.enabled();
        Self {
            stream,
            deliver,
            router,
            tracker: AckTracker::new(start),
            confirmations,
            metrics,
            table: table.to_string().into(),
            relation_tables: HashMap::new(),
            max_in_flight,
            max_in_flight_bytes: usize::MAX,
            commit: Lsn::ZERO,
            change_index: 0,
            probe_when_full: false,
            heartbeat: None,
            transaction: None,
            stuck_check: ticks_every(deliver_check_every),
            canary: None,
            cleanup: None,
            cleanup_flush: None,
            commit_time_micros: None,
            xid: None,
            last_commit: None,
            reported: start,
            seen: [0; 4],
            captured: Default::default(),
            debezium_series,
            signals: None,
            server_wal: Lsn::ZERO,
        }
    }

    /// `--cleanup`: positions are confirmed only once the ledger has the rows delivered
    /// before them (see `source/cleanup.rs`).
    pub fn cleanup(mut self, recorder: crate::source::cleanup::Recorder) -> Self {
        self.deliver = self.deliver.noting_dead_letters();
        self.cleanup = Some(recorder);
        self.cleanup_flush = Some(ticks_every(crate::source::cleanup::Recorder::FLUSH_EVERY));
        self
    }

    /// Produces the canaries written for `slot` to `topic` (see `source/canary.rs`): rows of
    /// the canary table in `schema`, or logical decoding messages.
    pub fn canaries(
        mut self,
        topic: &str,
        slot: &str,
        method: crate::config::CanaryMethod,
        schema: &str,
    ) -> Self {
        self.deliver.prepare_topic(topic);
        self.canary = Some(CanaryStream {
            topic: topic.into(),
            slot: slot.to_owned(),
            table: (method == crate::config::CanaryMethod::Table)
                .then(|| (schema.to_owned(), None)),
        });
        self
    }

    /// Pauses reading, snapshot included, while `bytes` of keys and values are in flight
    /// (`--max-in-flight-bytes`), as it does at `max_in_flight` records.
    pub fn max_in_flight_bytes(mut self, bytes: usize) -> Self {
        self.max_in_flight_bytes = bytes;
        self
    }

    /// Whether the in-flight window has room for another event: fewer than `max_in_flight`
    /// records and `max_in_flight_bytes` bytes handed over and not yet acknowledged.
    fn has_room(&self) -> bool {
        self.deliver.in_flight() < self.max_in_flight
            && self.deliver.in_flight_bytes() < self.max_in_flight_bytes
    }

    /// Waits until the in-flight window has room, taking acknowledgements (the snapshot's
    /// rows are confirmed by its marker, not by a position) and reporting partitions Kafka
    /// leaves unanswered meanwhile.
    async fn make_room(&mut self) -> Result<(), RelayError> {
        if self.has_room() {
            return Ok(());
        }
        // Held events count against the window: a full window sends them.
        self.deliver.linger(Duration::ZERO);
        while !self.has_room() {
            tokio::select! {
                acknowledged = self.deliver.next_acknowledged() => {
                    // While streaming (an incremental snapshot's chunk), what this allows is
                    // confirmed as anywhere else.
                    if let Some(lsn) = self.tracker.delivered(acknowledged?) {
                        self.confirm(lsn);
                    }
                }
                _ = self.stuck_check.tick() => self.deliver.check_stuck(),
            }
        }
        self.deliver.linger(CATCH_UP_LINGER);
        Ok(())
    }

    /// Reports a partition whose oldest record waited for Kafka longer than `after`.
    pub fn stuck_after(mut self, after: Duration) -> Self {
        self.deliver = self.deliver.with_stuck_after(after);
        self.stuck_check = ticks_every(self.deliver.stuck_check_every());
        self
    }

    /// Writes a heartbeat record every `interval` while streaming (Debezium's
    /// `heartbeat.interval.ms`), if the router writes them.
    pub fn heartbeats_every(mut self, interval: Duration) -> Self {
        if self.router.writes_heartbeats() {
            self.heartbeat = Some(ticks_every(interval.max(Duration::from_millis(10))));
        }
        self
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
        // The silence timer is registered once per silence period, not once per round of the
        // select: when it fires early (something was heard since it was set) it is moved on.
        let probe_timer = tokio::time::sleep_until(last_heard + SILENCE_BEFORE_PROBE);
        tokio::pin!(probe_timer);
        loop {
            if stop_by.is_none() && crate::source::session::stop_requested(shutdown) {
                stop_by = Some(Instant::now() + TRANSACTION_FINISH_TIMEOUT);
            }
            if let Some(deadline) = stop_by {
                if !self.tracker.in_transaction() || Instant::now() > deadline {
                    return Ok(());
                }
            }
            let room = self.has_room();
            if !room {
                // Held events count against the window: a full window sends them, or it
                // would wait for acknowledgements of events not sent yet.
                self.deliver.linger(Duration::ZERO);
            }
            let probe = room || self.probe_when_full;
            if room && !had_room {
                // Not reading while the window was full is not the server's silence.
                last_heard = tokio::time::Instant::now();
            }
            had_room = room;
            let pending = self.deliver.has_pending();
            // Incremental snapshot progress whose position was confirmed.
            self.save_progress().await?;
            let inbox = room
                && stop_by.is_none()
                && self.signals.as_ref().is_some_and(|s| s.inbox.is_some());
            tokio::select! {
                biased;
                _ = shutdown.changed(), if stop_by.is_none() => continue,
                // An async block: select! builds every branch's future, even a disabled one,
                // and a Sleep per message costs a timer registration.
                _ = async { tokio::time::sleep(Duration::from_millis(100)).await }, if stop_by.is_some() => continue,
                acknowledged = self.deliver.next_acknowledged(), if pending => {
                    // Acknowledgements come in batches (a produce response each): the rest of
                    // the batch without a round of the select each, and one confirmation.
                    let mut confirmable = self.tracker.delivered(acknowledged?);
                    for _ in 0..BURST {
                        if !self.deliver.has_pending() {
                            break;
                        }
                        match self.deliver.next_acknowledged().now_or_never() {
                            Some(ticket) => {
                                confirmable = self.tracker.delivered(ticket?).or(confirmable);
                            }
                            None => break,
                        }
                    }
                    if let Some(lsn) = confirmable {
                        self.confirm(lsn);
                    }
                }
                change = self.stream.recv(), if room => {
                    last_heard = tokio::time::Instant::now();
                    self.on_received(change?).await?;
                    // What already arrived behind it, without a round of the select (its
                    // timers, the shutdown watch) for each: one wake-up per burst of changes.
                    for _ in 0..BURST {
                        if !self.has_room() {
                            break;
                        }
                        match self.stream.recv().now_or_never() {
                            Some(change) => self.on_received(change?).await?,
                            None => break,
                        }
                    }
                }
                signal = next_signal(&mut self.signals), if inbox => {
                    match signal {
                        // Watermarks count only from the signal table, in the stream's order.
                        Some(signal) if matches!(signal.kind.as_str(), crate::source::signal::WINDOW_OPEN | crate::source::signal::WINDOW_CLOSE) => {}
                        Some(signal) => {
                            let at = self.tracker.confirmed();
                            self.on_signal(signal, at).await?;
                        }
                        // The channels' tasks ended: nothing more comes from them.
                        None => {
                            if let Some(signals) = self.signals.as_mut() {
                                signals.inbox = None;
                            }
                        }
                    }
                }
                _ = self.stuck_check.tick() => {
                    self.deliver.check_stuck();
                    // An idle stream that already passed a read-only chunk's position.
                    if !self.tracker.in_transaction() {
                        self.stream_reached(self.server_wal).await?;
                    }
                }
                _ = tick(&mut self.cleanup_flush), if self.cleanup.as_ref().is_some_and(|c| c.due()) => {
                    self.flush_cleanup().await?;
                }
                _ = tick(&mut self.heartbeat), if stop_by.is_none() && room && !self.tracker.in_transaction() => {
                    self.send_heartbeat().await?;
                }
                _ = &mut probe_timer, if stop_by.is_none() && probe => {
                    let due = last_heard + SILENCE_BEFORE_PROBE;
                    if tokio::time::Instant::now() < due {
                        probe_timer.as_mut().reset(due);
                        continue;
                    }
                    self.stream.probe().await?;
                    last_heard = tokio::time::Instant::now();
                    probe_timer.as_mut().reset(last_heard + SILENCE_BEFORE_PROBE);
                }
            }
            self.metrics.in_flight.set(self.deliver.in_flight() as i64);
        }
    }

    /// A change read from the stream; its end is a lost connection.
    async fn on_received(&mut self, change: Option<Change>) -> Result<(), RelayError> {
        // Late events go to Kafka in groups, the others at once (`deliver/linger.rs`). The
        // replication worker reads ahead, so this describes `change` or what follows it.
        self.deliver.linger(if self.stream.catching_up() {
            CATCH_UP_LINGER
        } else {
            Duration::ZERO
        });
        match change {
            Some(change) => self.on_change(change).await,
            None => Err(RelayError::ConnectionLost(anyhow!(
                "the replication stream ended"
            ))),
        }
    }

    /// snapshot.mode=initial: relays the rows already in the outbox at `position`, waits
    /// until Kafka acknowledged all of them (they are confirmed by nothing: the caller
    /// records the snapshot complete only then).
    pub async fn relay_snapshot(
        &mut self,
        rows: &mut SnapshotReader,
        snapshot: Option<String>,
        position: Lsn,
        place: crate::source::snapshot::TablePlace,
    ) -> Result<(), RelayError> {
        self.route_message(
            &LogicalMessage::Relation(rows.relation.clone()),
            position,
            None,
        )
        .await?;
        // Rows of two snapshot reads are never compared: a retake gets a name of its own.
        let snapshot: Arc<str> = snapshot
            .unwrap_or_else(|| format!("retake-{}", uuid::Uuid::now_v7()))
            .into();
        self.relay_snapshot_rows(rows, snapshot, position, place)
            .await
    }

    /// Debezium's snapshot series, which the snapshot's steps feed.
    pub fn snapshot_metrics(&self) -> &crate::metrics::debezium::DebeziumSeries {
        &self.metrics.debezium
    }

    /// The snapshot's rows (see [`Self::relay_snapshot`]).
    async fn relay_snapshot_rows(
        &mut self,
        rows: &mut SnapshotReader,
        snapshot: Arc<str>,
        position: Lsn,
        place: crate::source::snapshot::TablePlace,
    ) -> Result<(), RelayError> {
        let total = rows.total;
        self.metrics.snapshot_rows_total.set(total as i64);
        self.metrics.snapshot_rows_done.set(0);
        let mut progress = Progress::every(SNAPSHOT_PROGRESS_INTERVAL);
        // A snapshot's rows are not waited for by anyone: they go to Kafka in groups.
        self.deliver.linger(CATCH_UP_LINGER);
        let mut row = 0u64;
        loop {
            let fetched = rows.next_rows().await?;
            if fetched.is_empty() {
                break;
            }
            // --cleanup: the keys of the rows delivered so far, written as they accumulate.
            if self.cleanup.as_ref().is_some_and(|c| c.due()) {
                self.flush_cleanup().await?;
            }
            for insert in fetched {
                // Rows are read only as fast as Kafka takes them: what is in flight stays
                // within the window, in records and in bytes.
                self.make_room().await?;
                let event = EventPosition::Snapshot {
                    snapshot: snapshot.clone(),
                    row,
                };
                if self.router.wants_position() {
                    let marker = crate::source::snapshot::marker(place, row, total);
                    self.set_position(position, Some(marker), &[]);
                }
                self.route_message(&LogicalMessage::Insert(insert), position, Some(event))
                    .await?;
                row += 1;
                self.metrics.snapshot_rows_done.set(row as i64);
                if progress.due() {
                    tracing::info!(
                        rows_done = row,
                        rows_total = total,
                        percent = row * 100 / total.max(1),
                        "snapshot progress: {row} of {total} rows read and routed"
                    );
                }
            }
        }
        let tracker = &mut self.tracker;
        self.deliver
            .drain(|ticket| {
                let _ = tracker.delivered(ticket);
            })
            .await?;
        // The snapshot's rows go to the ledger before the snapshot is recorded complete.
        self.flush_cleanup().await
    }

    /// `--cleanup`: writes the rows delivered so far to the ledger, then confirms the position
    /// held for them.
    async fn flush_cleanup(&mut self) -> Result<(), RelayError> {
        let Some(recorder) = &mut self.cleanup else {
            return Ok(());
        };
        let dead_lettered = self.deliver.take_dead_lettered();
        if let Some(lsn) = recorder
            .flush(self.tracker.delivered_before(), dead_lettered)
            .await?
        {
            self.report(lsn);
        }
        Ok(())
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
            deliver, tracker, ..
        } = self;
        let mut confirmable = None;
        let drain = deliver.drain(|ticket| {
            if let Some(lsn) = tracker.delivered(ticket) {
                confirmable = Some(lsn);
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
        if let Some(lsn) = confirmable {
            self.confirm(lsn);
        }
        if let Err(e) = self.flush_cleanup().await {
            tracing::warn!("--cleanup: the last relayed rows could not be recorded ({e}); they will be re-sent on the next start");
        }
        self.reported
    }

    /// `lsn` may be confirmed (the tracker allows it): at once, or with `--cleanup` once the
    /// ledger has the rows delivered before it.
    fn confirm(&mut self, lsn: Lsn) {
        match &mut self.cleanup {
            Some(recorder) => recorder.notes().hold(lsn),
            None => self.report(lsn),
        }
    }

    /// Reports `lsn` to the source: to the replication connection, and as the position the
    /// next session resumes from.
    fn report(&mut self, lsn: Lsn) {
        self.reported = self.reported.max(lsn);
        self.stream.confirm(lsn);
        self.confirmations.confirmed(lsn);
    }

    async fn on_change(&mut self, change: Change) -> Result<(), RelayError> {
        match change {
            Change::Begin {
                commit,
                xid,
                commit_time_micros,
            } => {
                self.tracker.begin();
                self.commit = commit;
                self.commit_time_micros = Some(commit_time_micros);
                self.xid = Some(xid);
                self.change_index = 0;
                self.transaction =
                    self.router
                        .writes_transaction_metadata()
                        .then(|| OpenTransaction {
                            xid,
                            ts_ms: crate::pg_time::epoch_millis(commit_time_micros),
                            begun: false,
                            per_table: Vec::new(),
                        });
                // A read-only incremental snapshot's chunk goes before a transaction that
                // committed after it was read.
                self.stream_reached(commit).await?;
            }
            Change::Commit {
                end_lsn,
                commit_time_micros,
            } => {
                // A transaction without a change Debezium dispatches (empty, as PostgreSQL 14
                // and older send them, or every change skipped) has no BEGIN and no END.
                if let Some(open) = self.transaction.take().filter(|open| open.begun) {
                    // PostgresTransactionMonitor: the END's id carries the COMMIT message's
                    // position, the end of the commit record.
                    let end = TransactionMark::End {
                        id: format!("{}:{}", open.xid, end_lsn.as_u64()),
                        ts_ms: crate::pg_time::epoch_millis(commit_time_micros),
                        per_table: open.per_table,
                    };
                    self.transaction_record(&end, end_lsn).await?;
                }
                self.confirmations.committed(end_lsn, commit_time_micros);
                let [creates, updates, deletes, filtered] = std::mem::take(&mut self.seen);
                if self.debezium_series {
                    self.metrics
                        .debezium
                        .committed(creates, updates, deletes, filtered);
                }
                self.last_commit = Some(end_lsn);
                if let Some(lsn) = self.tracker.commit(end_lsn) {
                    self.confirm(lsn);
                }
                self.stream_reached(end_lsn).await?;
            }
            Change::KeepAlive { wal_end } => {
                self.metrics.set_server_wal(wal_end);
                self.server_wal = self.server_wal.max(wal_end);
                if let Some(lsn) = self.tracker.keepalive(wal_end) {
                    self.confirm(lsn);
                }
                if !self.tracker.in_transaction() {
                    self.stream_reached(wal_end).await?;
                }
            }
            Change::Data {
                wal_start,
                wal_end,
                data,
            } => {
                self.metrics.set_server_wal(wal_end);
                self.server_wal = self.server_wal.max(wal_end);
                if self.canary.as_ref().is_some_and(|c| c.owns(&data)) {
                    return self.on_canary_row(wal_start, &data).await;
                }
                if let Some(signals) = self.signals.as_mut() {
                    if signals.owns(&data) {
                        return self.on_signal_row(wal_start, &data).await;
                    }
                    // An incremental snapshot's window: a streamed change of a row of the
                    // chunk read wins over the chunk's copy.
                    if signals.incremental.window_open()
                        && matches!(data.first(), Some(b'I' | b'U' | b'D'))
                    {
                        if let Ok(message) = pgoutput::decode(data.clone()) {
                            signals.incremental.deduplicate(&message);
                        }
                    }
                }
                if matches!(data.first(), Some(b'I' | b'U' | b'D' | b'T')) {
                    // Relation, Type and Origin messages are not changes (and may be sent
                    // at position 0).
                    self.on_transaction_change(wal_start, &data).await?;
                }
                if let (Some(op @ (b'I' | b'U' | b'D')), Some(id)) = (data.first(), data.get(1..5))
                {
                    let id = u32::from_be_bytes(id.try_into().expect("four bytes"));
                    let counter = match (self.captured.contains(&id), op) {
                        (false, _) => 3,
                        (true, b'I') => 0,
                        (true, b'U') => 1,
                        (true, _) => 2,
                    };
                    self.seen[counter] += 1;
                }
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
                        committed_us: self.commit_time_micros,
                    }
                });
                // Inserts, nearly all of the stream, take the router's zero-allocation path.
                if data.first() == Some(&b'I') {
                    if self.router.wants_position() {
                        self.set_position(wal_start, None, &data);
                    }
                    let outcome = self.router.route_message(&data).map_err(undecodable)?;
                    let table = data
                        .get(1..5)
                        .map(|id| u32::from_be_bytes(id.try_into().expect("four bytes")))
                        .map_or_else(|| self.table.clone(), |id| self.table_of(id));
                    let seq = self
                        .deliver_outcome(outcome, wal_start, event, table)
                        .await?;
                    if let (Some(recorder), Some(seq)) = (&mut self.cleanup, seq) {
                        // The row as the router read it: decoded once.
                        let relation_id = data.get(1..5).map_or(0, |id| {
                            u32::from_be_bytes(id.try_into().expect("four bytes"))
                        });
                        recorder.notes().note_columns(
                            seq,
                            relation_id,
                            &data,
                            self.router.last_insert_columns(),
                            self.commit_time_micros,
                        );
                    }
                } else {
                    let message = pgoutput::decode(data).map_err(undecodable)?;
                    self.route_message(&message, wal_start, event).await?;
                }
            }
            Change::Message {
                lsn,
                transactional,
                prefix,
                content,
            } if prefix == crate::source::canary::PREFIX => {
                self.on_canary_message(lsn, transactional, &content).await?;
            }
            Change::Message {
                lsn,
                transactional,
                prefix,
                content,
            } => {
                if transactional {
                    self.on_transaction_change(lsn, &[]).await?;
                }
                let outcome = self.router.route_logical_message(&prefix, &content);
                if matches!(outcome, RouteOutcome::Ignored) && transactional {
                    // Still a change of the transaction: replays number the rest alike.
                    self.change_index += 1;
                    return Ok(());
                }
                let table: Arc<str> = format!("message {prefix}").into();
                if transactional {
                    let event = EventPosition::Stream {
                        commit: self.commit,
                        index: self.change_index,
                        committed_us: self.commit_time_micros,
                    };
                    self.change_index += 1;
                    self.deliver_outcome(outcome, lsn, Some(event), table)
                        .await?;
                } else {
                    // Decoded as it is read, outside any transaction: a transaction of its
                    // own that ends just past the message, so the slot moves past it only
                    // once Kafka has it. (PostgreSQL skips, on a restart, the messages
                    // before the confirmed position.)
                    self.tracker.begin();
                    self.commit = lsn;
                    self.change_index = 0;
                    let event = EventPosition::Stream {
                        commit: lsn,
                        index: 0,
                        committed_us: None,
                    };
                    self.deliver_outcome(outcome, lsn, Some(event), table)
                        .await?;
                    if let Some(confirmable) = self.tracker.commit(Lsn::from_u64(lsn.as_u64() + 1))
                    {
                        self.confirm(confirmable);
                    }
                }
            }
            Change::Other => {}
        }
        Ok(())
    }

    /// A canary message (`--canary-method message`): this relay's own goes to the canary
    /// topic, in its place in the stream; other relays' (other slots of the database) and
    /// canaries when they are off are passed over.
    async fn on_canary_message(
        &mut self,
        lsn: Lsn,
        transactional: bool,
        content: &[u8],
    ) -> Result<(), RelayError> {
        let index = self.change_index;
        if transactional {
            // Still a change of its transaction: replays number the rest alike.
            self.change_index += 1;
        }
        let Some(written) = crate::source::canary::Written::parse(content) else {
            return Ok(());
        };
        let by_message = self.canary.as_ref().is_some_and(|c| c.table.is_none());
        if !transactional || !by_message {
            return Ok(());
        }
        self.produce_canary(lsn, index, written).await
    }

    /// A change of the canary table (`--canary-method table`): the insert of this relay's
    /// row is its canary; the delete before it, and other writers' rows, are passed over.
    async fn on_canary_row(&mut self, lsn: Lsn, data: &Bytes) -> Result<(), RelayError> {
        let index = self.change_index;
        // Still a change of its transaction: replays number the rest alike.
        self.change_index += 1;
        let Some(CanaryStream {
            table: Some((_, Some(relation))),
            ..
        }) = &self.canary
        else {
            return Ok(());
        };
        let written = match pgoutput::decode(data.clone()) {
            Ok(LogicalMessage::Insert(insert)) => {
                crate::source::canary::written_row(relation, &insert)
            }
            _ => None,
        };
        match written {
            Some(written) => self.produce_canary(lsn, index, written).await,
            None => Ok(()),
        }
    }

    /// Produces this relay's canary `written` (at `lsn`, change `index` of its transaction)
    /// to the canary topic; its acknowledgement sets the canary's age. Never routed, never a
    /// business event. Another slot's canary is passed over.
    async fn produce_canary(
        &mut self,
        lsn: Lsn,
        index: u32,
        written: crate::source::canary::Written,
    ) -> Result<(), RelayError> {
        let Some(CanaryStream { topic, slot, .. }) = &self.canary else {
            return Ok(());
        };
        if written.slot != *slot {
            return Ok(());
        }
        let record = outbox_router::OutboxRecord {
            topic: topic.clone(),
            key: Some(bytes::Bytes::copy_from_slice(slot.as_bytes())),
            value: Some(
                serde_json::to_vec(&written)
                    .expect("a canary serialises")
                    .into(),
            ),
            headers: Vec::new(),
            partition: None,
            timestamp_ms: None,
        };
        let ticket = self.tracker.produced();
        let origin = Origin {
            table: "canary".into(),
            position: Some(lsn),
            event: Some(EventPosition::Stream {
                commit: self.commit,
                index,
                committed_us: self.commit_time_micros,
            }),
        };
        self.deliver
            .submit(
                crate::deliver::Routed::Canary {
                    record,
                    written_ms: written.written_ms,
                },
                ticket,
                origin,
            )
            .await
    }

    async fn route_message(
        &mut self,
        message: &LogicalMessage,
        position: Lsn,
        event: Option<EventPosition>,
    ) -> Result<(), RelayError> {
        if let LogicalMessage::Relation(relation) = message {
            if let Some(canary) = self.canary.as_mut().filter(|c| c.describes(relation)) {
                if let Some((_, known)) = &mut canary.table {
                    *known = Some(relation.clone());
                }
                return Ok(());
            }
            if let Some(signals) = self.signals.as_mut() {
                if signals.describes(relation) {
                    return Ok(());
                }
                signals.incremental.describe(relation);
            }
            self.captured.retain(|id| *id != relation.relation_id);
            if self
                .router
                .is_outbox_table(&relation.namespace, &relation.name)
            {
                self.captured.push(relation.relation_id);
            }
            self.relation_tables.insert(
                relation.relation_id,
                format!("{}.{}", relation.namespace, relation.name).into(),
            );
            self.refresh_column_facts(relation).await?;
            if let Some(recorder) = &mut self.cleanup {
                recorder.notes().relation(relation);
            }
        }
        let table = match message {
            LogicalMessage::Insert(insert) => self.table_of(insert.relation_id),
            _ => self.table.clone(),
        };
        let outcome = self.router.route(message);
        let seq = self
            .deliver_outcome(outcome, position, event.clone(), table)
            .await?;
        if let (Some(recorder), Some(seq), LogicalMessage::Insert(insert)) =
            (&mut self.cleanup, seq, message)
        {
            // A snapshot row has no commit time.
            let committed = match event {
                Some(EventPosition::Snapshot { .. }) => None,
                _ => self.commit_time_micros,
            };
            recorder.notes().note(seq, insert, committed);
        }
        Ok(())
    }

    /// Transaction metadata at one change of the open transaction: its BEGIN record before
    /// its first change (named by that change's position, which PostgreSQL 15+ also gives
    /// the BEGIN message it sends just before), and the change counted for its tables.
    async fn on_transaction_change(
        &mut self,
        position: Lsn,
        data: &[u8],
    ) -> Result<(), RelayError> {
        let Some(mut open) = self.transaction.take() else {
            return Ok(());
        };
        let Some(tables) = self
            .router
            .counted_tables(data)
            .map(|t| t.into_iter().map(str::to_owned).collect::<Vec<_>>())
        else {
            self.transaction = Some(open);
            return Ok(());
        };
        let result = self.begin_record(&open, position).await;
        open.begun = true;
        for table in tables {
            match open.per_table.iter_mut().find(|(t, _)| *t == table) {
                Some((_, n)) => *n += 1,
                None => open.per_table.push((table, 1)),
            }
        }
        self.transaction = Some(open);
        result
    }

    async fn begin_record(
        &mut self,
        open: &OpenTransaction,
        position: Lsn,
    ) -> Result<(), RelayError> {
        if open.begun {
            return Ok(());
        }
        let begin = TransactionMark::Begin {
            id: format!("{}:{}", open.xid, position.as_u64()),
            ts_ms: open.ts_ms,
        };
        self.transaction_record(&begin, position).await
    }

    async fn transaction_record(
        &mut self,
        mark: &TransactionMark,
        position: Lsn,
    ) -> Result<(), RelayError> {
        let Some(record) = self.router.transaction_record(mark) else {
            return Ok(());
        };
        self.deliver_outcome(record, position, None, "transaction".into())
            .await?;
        Ok(())
    }

    /// A heartbeat record, between transactions: an event of its own that confirms nothing
    /// new (its "transaction" ends at the position already confirmable), delivered in order
    /// with the events around it.
    async fn send_heartbeat(&mut self) -> Result<(), RelayError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let Some(record) = self.router.heartbeat(now) else {
            return Ok(());
        };
        let position = self.tracker.confirmed();
        self.tracker.begin();
        self.deliver_outcome(record, position, None, "heartbeat".into())
            .await?;
        if let Some(lsn) = self.tracker.commit(position) {
            self.confirm(lsn);
        }
        Ok(())
    }

    /// A notification of the initial snapshot (`Initial Snapshot`, `kind`, with `data` and
    /// the connector's name) to the channels on (see [`Self::notify_as`]).
    pub async fn notify(
        &mut self,
        kind: &str,
        data: Vec<(&str, String)>,
    ) -> Result<(), RelayError> {
        self.notify_as("Initial Snapshot", None, kind, data).await
    }

    /// A notification (`aggregate`, `kind`, with `data` and the connector's name; its `id`, a
    /// random UUID when `None`) to the channels on: logged as Debezium's log channel logs it,
    /// and written to the sink topic: in the open transaction when there is one (confirmed
    /// with it), outside any otherwise, as a heartbeat is.
    pub async fn notify_as(
        &mut self,
        aggregate: &str,
        id: Option<String>,
        kind: &str,
        data: Vec<(&str, String)>,
    ) -> Result<(), RelayError> {
        let Some((channels, connector)) = self.router.notification_channels() else {
            return Ok(());
        };
        let log = channels.log;
        let notification = outbox_router::Notification::with_connector(
            id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            aggregate,
            kind,
            data,
            connector,
            crate::metrics::now_ms(),
        );
        if log {
            tracing::info!(
                target: "io.debezium.pipeline.notification.channels.LogNotificationChannel",
                "[Notification Service]  {}",
                notification.to_java_string()
            );
        }
        let Some(record) = self.router.notification(&notification) else {
            return Ok(());
        };
        if self.tracker.in_transaction() {
            self.deliver_outcome(record, self.commit, None, "notification".into())
                .await?;
            return Ok(());
        }
        let position = self.tracker.confirmed();
        self.tracker.begin();
        self.deliver_outcome(record, position, None, "notification".into())
            .await?;
        if let Some(lsn) = self.tracker.commit(position) {
            self.confirm(lsn);
        }
        Ok(())
    }

    /// Tells the router where the change it routes next is: its source block and, with
    /// transaction metadata, its place in the open transaction (counted already).
    fn set_position(&mut self, lsn: Lsn, snapshot: Option<&'static str>, data: &[u8]) {
        let transaction = self.transaction.as_ref().and_then(|open| {
            // A snapshot's row is no change of the transaction it is sent in.
            (open.begun && snapshot.is_none()).then_some(())?;
            // PostgresTransactionMonitor names the transaction by the position of the change
            // being processed (each event's block carries its own).
            let id = format!("{}:{}", open.xid, lsn.as_u64());
            let total = open.per_table.iter().map(|(_, n)| n).sum();
            let table = self.router.counted_tables(data)?.first()?.to_string();
            let in_table = open
                .per_table
                .iter()
                .find(|(t, _)| *t == table)
                .map_or(0, |(_, n)| *n);
            Some((id, total, in_table))
        });
        self.router.set_position(outbox_router::SourcePosition {
            lsn: lsn.as_u64(),
            // A row snapshotted while streaming (incremental, blocking) keeps the stream's
            // position, its transaction id too, as Debezium's offset does.
            xid: self.xid,
            commit_time_us: if snapshot.is_some() {
                None
            } else {
                self.commit_time_micros.map(crate::pg_time::epoch_micros)
            },
            last_commit_lsn: self.last_commit.map(Lsn::as_u64),
            snapshot,
            transaction,
        });
    }

    fn table_of(&self, relation_id: u32) -> Arc<str> {
        self.relation_tables
            .get(&relation_id)
            .unwrap_or(&self.table)
            .clone()
    }

    /// Hands a routed row to the delivery stage; returns its event's number, if it is one.
    async fn deliver_outcome(
        &mut self,
        outcome: RouteOutcome,
        position: Lsn,
        event: Option<EventPosition>,
        table: Arc<str>,
    ) -> Result<Option<Seq>, RelayError> {
        // The router's outcomes are finished: Kafka Connect's transforms and converters ran on
        // every record (heartbeats and transaction records too, as a worker's chain).
        let Some(routed) = route::triage(outcome, Some(position))? else {
            return Ok(None);
        };
        let ticket = self.tracker.produced();
        let seq = ticket.seq();
        let origin = Origin {
            table,
            position: Some(position),
            event,
        };
        self.deliver.submit(routed, ticket, origin).await?;
        Ok(Some(seq))
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

/// The next signal of the Kafka and file channels; never, without them.
async fn next_signal(signals: &mut Option<Signals>) -> Option<crate::source::signal::Signal> {
    match signals.as_mut().and_then(|s| s.inbox.as_mut()) {
        Some(inbox) => inbox.recv().await,
        None => std::future::pending().await,
    }
}

/// The next tick of an optional timer; never, without one.
async fn tick(timer: &mut Option<tokio::time::Interval>) {
    match timer {
        Some(timer) => {
            timer.tick().await;
        }
        None => std::future::pending().await,
    }
}
