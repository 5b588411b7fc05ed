//! The relay loop: replication stream -> pgoutput decoder -> outbox router -> Kafka sink ->
//! acknowledgement tracker -> confirmed LSN back to the stream.
//!
//! One *session* is one replication connection plus one producer. Any transient failure
//! (connection lost, delivery failed, slot held by another instance) ends the session; the
//! supervisor in [`run`] starts a new one after a backoff, from the highest position
//! confirmed so far — everything after it is sent again, so nothing is lost (a few events
//! may be duplicated: at-least-once, as with Debezium).

use crate::ack::{AckTracker, EventSeq, Lsn};
use crate::backoff::{pause, Backoff};
use crate::config::Settings;
use crate::dead_letter::DeadLetter;
use crate::debezium::SnapshotMode;
use crate::error::RelayError;
use crate::metrics::Metrics;
use crate::postgres::{self, format_lsn, ConnectionInfo};
use crate::sink::{Delivery, DeliveryFailure, KafkaSink, SendOutcome, SinkSettings};
use crate::snapshot::{self, SnapshotState, TakenSnapshot};
use anyhow::anyhow;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use outbox_router::{OutboxRecord, RouteOutcome, Router, TableName};
use pgoutput::{LogicalMessage, Relation};
use pgwire_replication::{Lsn as PgLsn, ReplicationClient, ReplicationConfig, ReplicationEvent};
use prometheus_client::metrics::counter::Counter;
use rand::Rng;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::Instrument;

/// How long a graceful shutdown waits for in-flight deliveries before giving up on them
/// (they are then re-sent by the next run: nothing is confirmed for them).
const SHUTDOWN_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a graceful shutdown keeps reading to reach the end of an open transaction.
const TRANSACTION_FINISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs until `shutdown` turns true (returns Ok) or a fatal error.
pub async fn run(
    settings: Settings,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), RelayError> {
    let conn = ConnectionInfo::parse(settings.postgres_url.expose()).map_err(RelayError::Fatal)?;
    if let Some(debezium) = &settings.debezium {
        log_debezium_summary(debezium);
    }
    let _heartbeat = settings
        .heartbeat
        .clone()
        .filter(|h| h.action_query.is_some())
        .map(|h| {
            AbortOnDrop(tokio::spawn(heartbeat_loop(
                settings.postgres_url.clone(),
                h,
            )))
        });
    let mut confirmed: Option<Lsn> = None;
    let mut backoff = Backoff::default();
    loop {
        let started = Instant::now();
        // Every line a session logs names its slot (and publication).
        let span = tracing::info_span!("session", slot = %settings.slot, publication = %settings.publication);
        let result = session(&settings, &conn, &metrics, &mut confirmed, &mut shutdown)
            .instrument(span)
            .await;
        metrics.streaming.set(0);
        if result.as_ref().is_err_and(|e| e.is_transient()) {
            metrics.reconnects.inc();
        }
        match result {
            Ok(()) => return Ok(()),
            Err(e) if e.is_slot_busy() && !*shutdown.borrow() => {
                tracing::info!(slot = %settings.slot, "{e}; standing by until the slot is free");
                let delay = Duration::from_millis(rand::thread_rng().gen_range(800..1200));
                if pause(delay, &mut shutdown).await {
                    return Ok(());
                }
            }
            Err(e) if e.is_transient() && !*shutdown.borrow() => {
                let delay = backoff.after_session(started.elapsed());
                tracing::warn!(
                    slot = %settings.slot,
                    confirmed_lsn = %confirmed.map(format_lsn).unwrap_or_else(|| "slot".into()),
                    retry_in_ms = delay.as_millis() as u64,
                    "{e}; reconnecting and resuming from the last confirmed position"
                );
                if pause(delay, &mut shutdown).await {
                    return Ok(());
                }
            }
            Err(e) if e.is_transient() => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

fn log_debezium_summary(debezium: &crate::config::DebeziumSummary) {
    tracing::info!(
        connector = debezium.connector_name.as_deref().unwrap_or("(unnamed)"),
        "running Debezium connector configuration"
    );
    for note in &debezium.notes {
        tracing::info!("in effect: {note}");
    }
    if !debezium.unknown_options.is_empty() {
        tracing::warn!(
            options = %debezium.unknown_options.join(", "),
            "these connector options are not known to outbox-relay and were ignored; check their spelling, or see the README's Debezium option table"
        );
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `heartbeat.action.query` every `heartbeat.interval.ms`, as Debezium runs it (typically
/// an UPDATE of a heartbeat table, so that a database whose other tables are not published
/// still produces WAL the slot can move past). Failures are logged and retried.
async fn heartbeat_loop(url: crate::secret::Secret, heartbeat: crate::debezium::Heartbeat) {
    let Some(query) = heartbeat.action_query else {
        return;
    };
    let mut client = None;
    let mut ticks = tokio::time::interval(heartbeat.interval.max(Duration::from_millis(10)));
    loop {
        ticks.tick().await;
        if client.is_none() {
            client = postgres::connect(url.expose()).await.ok();
        }
        if let Some(c) = &client {
            if let Err(e) = c.batch_execute(&query).await {
                tracing::warn!("heartbeat.action.query failed: {e}");
                client = None;
            }
        }
    }
}

enum Step {
    Shutdown,
    Delivered(InFlightResult),
    Replication(Result<Option<ReplicationEvent>, pgwire_replication::PgWireError>),
}

/// One record's delivery outcome, with what the relay needs to act on it.
type InFlightResult = (EventSeq, Lsn, Result<(), DeliveryFailure>);

struct Session<'a> {
    settings: &'a Settings,
    display: &'a str,
    sink: KafkaSink,
    router: Router,
    /// A regular connection for catalog look-ups during the session.
    sql: tokio_postgres::Client,
    tracker: AckTracker,
    in_flight: FuturesUnordered<BoxFuture<'static, InFlightResult>>,
    /// Events whose own delivery was refused for what they are: each is confirmed only
    /// once its dead letter is delivered (it keeps the event's sequence number).
    pending_dead_letters: VecDeque<(EventSeq, DeadLetter)>,
    client: ReplicationClient,
    confirmed: &'a mut Option<Lsn>,
    metrics: Arc<Metrics>,
    /// Acknowledged-events counter per topic, looked up once per topic.
    topic_counters: HashMap<Arc<str>, Counter>,
    /// (end LSN, commit time in PostgreSQL micros) of commits not yet confirmed.
    commit_times: VecDeque<(Lsn, i64)>,
    dead_letter_topic: Arc<str>,
    events: u64,
    dead_letters: u64,
    /// The initial snapshot, whose transactions the stream must not relay again.
    already_relayed: Option<TakenSnapshot>,
    /// The open transaction's rows were in the initial snapshot.
    skipping_transaction: bool,
}

async fn session(
    settings: &Settings,
    conn: &ConnectionInfo,
    metrics: &Arc<Metrics>,
    confirmed: &mut Option<Lsn>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), RelayError> {
    let sql = postgres::connect(settings.postgres_url.expose()).await?;
    let initial_snapshot = settings.snapshot == SnapshotMode::Initial;
    if initial_snapshot {
        snapshot::register_new_slot(&sql, settings.table(), &settings.slot).await?;
    }
    let slot_start = postgres::ensure_publication_and_slot(
        &sql,
        settings.table(),
        &settings.publication,
        settings.publication_mode,
        &settings.slot,
        &conn.database,
    )
    .await?;
    let snapshot_state = if initial_snapshot {
        snapshot::state(&sql, settings.table(), &settings.slot).await?
    } else {
        SnapshotState::None
    };
    // Resume from what we confirmed ourselves if the slot has not recorded it yet:
    // PostgreSQL skips transactions that committed before the start position.
    let slot_lsn = slot_start.lsn;
    let start = confirmed.map_or(slot_lsn, |c| c.max(slot_lsn));
    let sink = KafkaSink::new(&SinkSettings {
        bootstrap_servers: &settings.bootstrap_servers,
        max_in_flight: settings.max_in_flight,
        topic_partitions: settings.topic_partitions,
        topic_replication_factor: settings.topic_replication_factor,
        producer_properties: &settings.producer_properties,
    })?;
    let config = ReplicationConfig::new(
        conn.host.clone(),
        conn.user.clone(),
        conn.password.clone(),
        conn.database.clone(),
        settings.slot.clone(),
        settings.publication.as_str(),
    )
    .with_port(conn.port)
    .with_tls(conn.tls.clone())
    .with_start_lsn(PgLsn::from_u64(start))
    .with_status_interval(settings.status_interval)
    .with_application_name("outbox-relay");
    let client = ReplicationClient::connect(config)
        .await
        .map_err(|e| RelayError::classify_replication(e, &conn.display))?;
    tracing::info!(slot = %settings.slot, publication = %settings.publication, table = %settings.table(),
        start_lsn = %format_lsn(start), postgres = %conn.display, "streaming");
    metrics.streaming.set(1);
    let probe = spawn_broker_probe(&sink, metrics.clone());
    let mut s = Session {
        settings,
        display: &conn.display,
        sink,
        router: Router::new(settings.router.clone()),
        sql,
        tracker: AckTracker::new(start),
        in_flight: FuturesUnordered::new(),
        pending_dead_letters: VecDeque::new(),
        client,
        confirmed,
        metrics: metrics.clone(),
        topic_counters: HashMap::new(),
        commit_times: VecDeque::new(),
        dead_letter_topic: settings.dead_letter_topic.as_str().into(),
        events: 0,
        dead_letters: 0,
        already_relayed: None,
        skipping_transaction: false,
    };
    if s.confirmed.is_none() {
        *s.confirmed = Some(start);
    }
    let result = match snapshot_state {
        SnapshotState::Owed => s.take_snapshot(start).await,
        SnapshotState::Done(taken) => {
            s.already_relayed = Some(taken);
            Ok(())
        }
        SnapshotState::None => Ok(()),
    };
    let result = match result {
        Ok(()) => s.stream(shutdown).await,
        Err(e) => Err(e),
    };
    probe.abort();
    if result.is_ok() {
        s.finish().await?;
    } else {
        s.client.abort();
    }
    result
}

impl Session<'_> {
    async fn stream(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), RelayError> {
        // On shutdown, read on to the end of the open transaction (bounded in time): its
        // events are then confirmed rather than sent again by the next run.
        let mut stop_by: Option<Instant> = None;
        loop {
            if stop_by.is_none() && *shutdown.borrow() {
                stop_by = Some(Instant::now() + TRANSACTION_FINISH_TIMEOUT);
            }
            if let Some(deadline) = stop_by {
                if !self.tracker.in_transaction() || Instant::now() > deadline {
                    return Ok(());
                }
            }
            let room = self.in_flight.len() < self.settings.max_in_flight;
            let step = tokio::select! {
                biased;
                _ = shutdown.changed(), if stop_by.is_none() => Step::Shutdown,
                _ = tokio::time::sleep(Duration::from_millis(100)), if stop_by.is_some() => continue,
                Some(delivered) = self.in_flight.next(), if !self.in_flight.is_empty() => Step::Delivered(delivered),
                event = self.client.recv(), if room => Step::Replication(event),
            };
            self.metrics.in_flight.set(self.in_flight.len() as i64);
            match step {
                Step::Shutdown => continue,
                Step::Delivered(delivered) => {
                    self.on_delivered(delivered)?;
                    self.send_pending_dead_letters().await?;
                }
                Step::Replication(Ok(Some(event))) => self.on_event(event).await?,
                Step::Replication(Ok(None)) => {
                    return Err(RelayError::Transient(anyhow!(
                        "the replication stream from {} ended",
                        self.display
                    )))
                }
                Step::Replication(Err(e)) => {
                    return Err(RelayError::classify_replication(e, self.display))
                }
            }
        }
    }

    fn on_delivered(&mut self, (seq, lsn, result): InFlightResult) -> Result<(), RelayError> {
        match result {
            Ok(()) => {
                if let Some(lsn) = self.tracker.delivered(seq) {
                    self.confirm(lsn);
                }
                Ok(())
            }
            // The broker refused the record itself: retrying cannot help, dead-letter it.
            Err(DeliveryFailure {
                error,
                rejected: Some(r),
            }) => {
                let letter = DeadLetter::refused_by_broker(
                    &error,
                    r,
                    self.settings.table().to_string(),
                    lsn,
                );
                self.pending_dead_letters.push_back((seq, letter));
                Ok(())
            }
            // Never skip: the slot stays where it is and the next session re-sends.
            Err(DeliveryFailure {
                error,
                rejected: None,
            }) => {
                let fatal = self
                    .sink
                    .fatal_error()
                    .map(|f| format!(" (producer fatal error: {f})"))
                    .unwrap_or_default();
                Err(RelayError::Transient(anyhow!(
                    "Kafka did not acknowledge an event: {error}{fatal}"
                )))
            }
        }
    }

    fn confirm(&mut self, lsn: Lsn) {
        self.client.update_applied_lsn(PgLsn::from_u64(lsn));
        *self.confirmed = Some(lsn);
        self.metrics.set_confirmed(lsn);
        let now = pg_now_micros();
        while let Some(&(end_lsn, committed_at)) = self.commit_times.front() {
            if end_lsn > lsn {
                break;
            }
            self.commit_times.pop_front();
            self.metrics
                .commit_to_ack_seconds
                .observe((now - committed_at).max(0) as f64 / 1e6);
        }
        tracing::debug!(lsn = %format_lsn(lsn), "confirmed");
    }

    async fn on_event(&mut self, event: ReplicationEvent) -> Result<(), RelayError> {
        match event {
            ReplicationEvent::Begin { xid, final_lsn, .. } => {
                self.skipping_transaction = self
                    .already_relayed
                    .as_ref()
                    .is_some_and(|s| s.already_relayed(xid, final_lsn.as_u64()));
                self.tracker.begin()
            }
            ReplicationEvent::Commit {
                end_lsn,
                commit_time_micros,
                ..
            } => {
                self.commit_times
                    .push_back((end_lsn.as_u64(), commit_time_micros));
                if let Some(lsn) = self.tracker.commit(end_lsn.as_u64()) {
                    self.confirm(lsn);
                }
            }
            ReplicationEvent::KeepAlive { wal_end, .. } => {
                self.metrics.set_server_wal(wal_end.as_u64());
                if let Some(lsn) = self.tracker.keepalive(wal_end.as_u64()) {
                    self.confirm(lsn);
                }
            }
            ReplicationEvent::XLogData {
                wal_start,
                wal_end,
                data,
                ..
            } => {
                self.metrics.set_server_wal(wal_end.as_u64());
                let undecodable = |e: pgoutput::DecodeError| {
                    RelayError::Fatal(anyhow!(
                        "undecodable pgoutput message at LSN {}: {e}; nothing after the last confirmed position was confirmed",
                        format_lsn(wal_start.as_u64())
                    ))
                };
                // Inserts, nearly all of the stream, take the router's zero-allocation path.
                if data.first() == Some(&b'I') {
                    if self.skipping_transaction {
                        return Ok(());
                    }
                    let outcome = self.router.route_message(&data).map_err(undecodable)?;
                    self.handle_outcome(outcome, wal_start.as_u64()).await?;
                } else {
                    let message = pgoutput::decode(data).map_err(undecodable)?;
                    self.route_and_produce(&message, wal_start.as_u64()).await?;
                }
            }
            // Logical decoding messages are not outbox rows.
            ReplicationEvent::Message { .. } => {}
            ReplicationEvent::StoppedAt { .. } => {}
        }
        Ok(())
    }

    /// snapshot.mode=initial: relays the outbox's rows, waits until Kafka acknowledged all
    /// of them, then records the snapshot as complete (see `snapshot.rs` for why this order
    /// loses nothing).
    async fn take_snapshot(&mut self, lsn: Lsn) -> Result<(), RelayError> {
        let table = self.settings.table().clone();
        let rows = snapshot::read(self.settings.postgres_url.expose(), &table).await?;
        tracing::info!(%table, rows = rows.rows.len(), "snapshot.mode=initial: relaying the rows already in the outbox");
        self.route_and_produce(&LogicalMessage::Relation(rows.relation), lsn)
            .await?;
        for insert in rows.rows {
            self.route_and_produce(&LogicalMessage::Insert(insert), lsn)
                .await?;
        }
        while !self.in_flight.is_empty() || !self.pending_dead_letters.is_empty() {
            self.send_pending_dead_letters().await?;
            if !self.in_flight.is_empty() {
                self.wait_for_one_delivery().await?;
            }
        }
        snapshot::mark_complete(&self.sql, &table, &self.settings.slot, &rows.taken).await?;
        tracing::info!(%table, "snapshot complete; streaming");
        self.already_relayed = Some(rows.taken);
        Ok(())
    }

    async fn route_and_produce(
        &mut self,
        message: &LogicalMessage,
        wal_start: Lsn,
    ) -> Result<(), RelayError> {
        if let LogicalMessage::Relation(relation) = message {
            self.refresh_column_facts(relation).await?;
        }
        let outcome = self.router.route(message);
        self.handle_outcome(outcome, wal_start).await
    }

    async fn handle_outcome(
        &mut self,
        outcome: RouteOutcome,
        wal_start: Lsn,
    ) -> Result<(), RelayError> {
        match outcome {
            RouteOutcome::Ignored => {}
            RouteOutcome::SkippedUpdate {
                table,
                error: false,
            } => {
                tracing::warn!(%table, lsn = %format_lsn(wal_start), "an UPDATE of an outbox row was skipped (table.op.invalid.behavior=warn)")
            }
            RouteOutcome::SkippedUpdate { table, error: true } => {
                tracing::error!(%table, lsn = %format_lsn(wal_start), "an UPDATE of an outbox row was skipped (table.op.invalid.behavior=error)")
            }
            RouteOutcome::Fatal(reason) => {
                return Err(RelayError::Fatal(anyhow!(
                    "{reason} (at LSN {}; nothing after the last confirmed position was confirmed)",
                    format_lsn(wal_start)
                )))
            }
            RouteOutcome::Record(record) => self.produce(&record, wal_start).await?,
            RouteOutcome::Invalid(row) => {
                let seq = self.tracker.produced();
                self.pending_dead_letters
                    .push_back((seq, DeadLetter::from_invalid_row(row, wal_start)));
                self.send_pending_dead_letters().await?;
            }
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
        let facts = postgres::column_facts(&self.sql, &table).await?;
        self.router.set_column_facts(&table, facts);
        Ok(())
    }

    async fn produce(&mut self, record: &OutboxRecord, lsn: Lsn) -> Result<(), RelayError> {
        self.sink.ensure_topic(&record.topic).await?;
        loop {
            match self.sink.send(record)? {
                SendOutcome::Accepted(delivery) => {
                    let seq = self.tracker.produced();
                    let counter = self.topic_counter(&record.topic);
                    self.track(seq, lsn, delivery, counter);
                    self.events += 1;
                    return Ok(());
                }
                SendOutcome::QueueFull => self.wait_for_one_delivery().await?,
                SendOutcome::Rejected(reason) => {
                    let seq = self.tracker.produced();
                    let letter = DeadLetter::rejected_by_producer(
                        reason,
                        record,
                        self.settings.table().to_string(),
                        lsn,
                    );
                    self.pending_dead_letters.push_back((seq, letter));
                    return self.send_pending_dead_letters().await;
                }
            }
        }
    }

    /// Sends the queued dead letters. A dead letter the producer refuses too is not
    /// dropped: the session fails and nothing after it is confirmed.
    async fn send_pending_dead_letters(&mut self) -> Result<(), RelayError> {
        while let Some((seq, letter)) = self.pending_dead_letters.pop_front() {
            tracing::warn!(table = %letter.table, lsn = %format_lsn(letter.lsn), reason = %letter.reason,
                dead_letter_topic = &*self.dead_letter_topic, "sending an outbox event to the dead-letter topic");
            let topic = self.dead_letter_topic.clone();
            self.sink.ensure_topic(&topic).await?;
            loop {
                match self.sink.send_raw(&topic, letter.key.as_ref(), letter.value.as_ref(), letter.headers())? {
                    SendOutcome::Accepted(delivery) => {
                        // A refused dead letter must not be dead-lettered again: any failure is fatal to the session.
                        let delivery = delivery
                            .map(|r| r.map_err(|f| DeliveryFailure { error: format!("dead-letter write failed: {}", f.error), rejected: None }))
                            .boxed();
                        let counter = self.metrics.dead_letters.clone();
                        self.track(seq, letter.lsn, delivery, counter);
                        self.dead_letters += 1;
                        break;
                    }
                    SendOutcome::QueueFull => self.wait_for_one_delivery().await?,
                    SendOutcome::Rejected(reason) => {
                        return Err(RelayError::Transient(anyhow!(
                            "the dead letter for the event at {} was refused too ({reason}); nothing after it is confirmed",
                            format_lsn(letter.lsn)
                        )))
                    }
                }
            }
        }
        Ok(())
    }

    /// `acked` counts the record once Kafka acknowledged it.
    fn track(&mut self, seq: EventSeq, lsn: Lsn, delivery: Delivery, acked: Counter) {
        self.in_flight.push(
            delivery
                .map(move |r| {
                    if r.is_ok() {
                        acked.inc();
                    }
                    (seq, lsn, r)
                })
                .boxed(),
        );
    }

    fn topic_counter(&mut self, topic: &Arc<str>) -> Counter {
        if let Some(c) = self.topic_counters.get(topic) {
            return c.clone();
        }
        let c = self
            .metrics
            .events
            .get_or_create(&crate::metrics::TopicLabels {
                topic: topic.to_string(),
            })
            .clone();
        self.topic_counters.insert(topic.clone(), c.clone());
        c
    }

    async fn wait_for_one_delivery(&mut self) -> Result<(), RelayError> {
        match self.in_flight.next().await {
            // Dead letters this queues are sent by the caller's loop.
            Some(delivered) => self.on_delivered(delivered),
            // Queue full with nothing of ours in flight: give librdkafka a moment.
            None => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok(())
            }
        }
    }

    /// Graceful end: stop reading, wait for in-flight deliveries, confirm, record the
    /// final position on the slot.
    async fn finish(&mut self) -> Result<(), RelayError> {
        let pending = self.in_flight.len();
        tracing::info!(
            in_flight = pending,
            "stopping: waiting for in-flight deliveries"
        );
        let drain = async {
            while let Some(delivered) = self.in_flight.next().await {
                self.on_delivered(delivered)?;
                self.send_pending_dead_letters().await?;
            }
            Ok::<(), RelayError>(())
        };
        match tokio::time::timeout(SHUTDOWN_DRAIN_TIMEOUT, drain).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("a delivery failed during shutdown ({e}); it will be re-sent on the next start"),
            Err(_) => tracing::warn!(
                in_flight = self.in_flight.len(),
                "deliveries still pending after {SHUTDOWN_DRAIN_TIMEOUT:?}; they will be re-sent on the next start"
            ),
        }
        let _ = self.client.shutdown().await;
        let lsn = self.tracker.confirmed();
        postgres::advance_slot(
            self.settings.postgres_url.expose(),
            &self.settings.slot,
            lsn,
        )
        .await?;
        tracing::info!(slot = %self.settings.slot, confirmed_lsn = %format_lsn(lsn), events = self.events,
            dead_letters = self.dead_letters, "stopped");
        Ok(())
    }
}

/// Microseconds since 2000-01-01 UTC, PostgreSQL's epoch, to compare with commit times.
fn pg_now_micros() -> i64 {
    const PG_EPOCH_UNIX_SECS: i64 = 946_684_800;
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    unix - PG_EPOCH_UNIX_SECS * 1_000_000
}

/// Checks every few seconds that the broker answers, for `/ready`.
fn spawn_broker_probe(sink: &KafkaSink, metrics: Arc<Metrics>) -> tokio::task::JoinHandle<()> {
    let producer = sink.producer_handle();
    tokio::spawn(async move {
        loop {
            let p = producer.clone();
            let ok = tokio::task::spawn_blocking(move || {
                use rdkafka::producer::Producer;
                p.client()
                    .fetch_metadata(None, Duration::from_secs(3))
                    .is_ok()
            })
            .await
            .unwrap_or(false);
            metrics.set_broker_reachable(ok);
            tokio::time::sleep(Duration::from_secs(if ok { 5 } else { 1 })).await;
        }
    })
}
