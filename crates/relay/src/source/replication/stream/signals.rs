//! The stream's side of signals: rows of the signal table read from the stream, signals from
//! the Kafka and file channels, and the incremental and blocking snapshots they start, run
//! in the stream's order (see `source/incremental.rs` for why the order matters).

use super::{ChangeStream, Streamer};
use crate::deliver::{EventPosition, Producer};
use crate::error::RelayError;
use crate::source::incremental::{self, sql, Chunk, Incremental};
use crate::source::signal::{self, Action, Signal, SnapshotKind};
use outbox_router::TableName;
use pgoutput::{LogicalMessage, Lsn, Relation};
use std::sync::Arc;

/// The relation id the rows of an incremental snapshot are routed under (PostgreSQL OIDs
/// never reach it; the initial snapshot's count down from `u32::MAX`).
pub const INCREMENTAL_RELATION_ID: u32 = u32::MAX - 4096;

/// How long reading one chunk (its watermarks, its rows) may take before the connection is
/// taken for lost.
const CHUNK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Read-only chunks sent one after the other when the stream already passed each.
const READ_ONLY_CHUNKS_AT_ONCE: usize = 64;

/// What `Incremental Snapshot` notifications are called.
const INCREMENTAL: &str = "Incremental Snapshot";
/// Blocking snapshots tell as initial snapshots do, as Debezium's.
const BLOCKING: &str = "Initial Snapshot";

/// Signals and the snapshots they start, for one stream.
pub struct Signals {
    pub settings: crate::config::SignalSettings,
    /// The signal table's relation, once the stream described it.
    relation: Option<Relation>,
    pub incremental: Incremental,
    /// Where chunks are read and watermarks written (the primary when capturing from a
    /// standby), connected when first needed.
    database: crate::source::postgres::Database,
    client: Option<tokio_postgres::Client>,
    /// The outbox tables, `schema.table`: what a snapshot signal may name.
    known: Vec<TableName>,
    /// The slot (progress is saved per slot) and the schema of the relay's own tables.
    slot: String,
    home: TableName,
    /// The table whose Relation the chunk rows were last routed under, and its key columns
    /// with their types.
    described: Option<(String, Vec<(String, String)>)>,
    /// The Relation routed last under [`INCREMENTAL_RELATION_ID`].
    routed: Option<Relation>,
    /// Signals of the Kafka and file channels.
    pub inbox: Option<tokio::sync::mpsc::UnboundedReceiver<Signal>>,
    /// Rows a blocking snapshot fetches at most per round trip (`snapshot.fetch.size`).
    fetch_size: usize,
    /// The tasks reading the Kafka and file channels, ended with the session.
    _channels: Vec<crate::source::session::AbortOnDrop>,
}

impl Signals {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        settings: crate::config::SignalSettings,
        database: crate::source::postgres::Database,
        known: Vec<TableName>,
        slot: String,
        home: TableName,
        resumed: Option<incremental::Progress>,
        (inbox, channels): (
            Option<tokio::sync::mpsc::UnboundedReceiver<Signal>>,
            Vec<crate::source::session::AbortOnDrop>,
        ),
        fetch_size: usize,
    ) -> Self {
        Self {
            settings,
            relation: None,
            incremental: resumed.map(Incremental::resume).unwrap_or_default(),
            database,
            client: None,
            known,
            slot,
            home,
            described: None,
            routed: None,
            inbox,
            fetch_size,
            _channels: channels,
        }
    }

    /// Whether `data` (an insert, update or delete) is a change of the signal table.
    pub fn owns(&self, data: &[u8]) -> bool {
        let Some(relation) = &self.relation else {
            return false;
        };
        matches!(data.first(), Some(b'I' | b'U' | b'D'))
            && data.get(1..5) == Some(&relation.relation_id.to_be_bytes()[..])
    }

    /// Whether `relation` describes the signal table (kept, then).
    pub fn describes(&mut self, relation: &Relation) -> bool {
        let is = self
            .settings
            .table
            .as_ref()
            .is_some_and(|t| t.schema == relation.namespace && t.name == relation.name);
        if is {
            self.relation = Some(relation.clone());
        }
        is
    }

    async fn client(&mut self) -> Result<&tokio_postgres::Client, RelayError> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            let client = self.database.connect().await?;
            // A statement of the snapshot never holds the stream for long.
            client
                .batch_execute("SET statement_timeout = '60s'")
                .await
                .map_err(|e| RelayError::postgres("setting statement_timeout", e, String::new))?;
            self.client = Some(client);
        }
        Ok(self.client.as_ref().expect("connected"))
    }

    fn known_ids(&self) -> Vec<String> {
        self.known.iter().map(ToString::to_string).collect()
    }
}

/// Whether a snapshot's failure ends the session rather than the snapshot alone: a lost
/// connection or broker (the next session reads on), or what ends streaming too. Any other
/// (a privilege, a filter or a signal table PostgreSQL refuses) can never succeed by trying
/// again: the snapshot is ABORTED and the stream goes on.
fn ends_the_session(error: &RelayError) -> bool {
    matches!(
        error,
        RelayError::ConnectionLost(_)
            | RelayError::BrokerUnavailable(_)
            | RelayError::RegistryUnavailable(_)
            | RelayError::Misconfiguration(_)
            | RelayError::Undecodable { .. }
    )
}

/// Debezium's offset as its `log` signal prints it.
fn offset_text(lsn: Lsn, xid: Option<u32>, commit_us: Option<i64>) -> String {
    let mut parts = vec![format!("lsn={}", lsn.as_u64())];
    if let Some(xid) = xid {
        parts.push(format!("txId={xid}"));
    }
    if let Some(us) = commit_us {
        parts.push(format!("ts_usec={}", crate::pg_time::epoch_micros(us)));
    }
    format!("{{{}}}", parts.join(", "))
}

impl<S: ChangeStream, P: Producer> Streamer<'_, S, P> {
    /// Signals read from the signal table, the Kafka topic or the file (see `Signals`).
    pub fn signals(mut self, signals: Signals) -> Self {
        self.signals = Some(signals);
        self
    }

    /// A change of the signal table at `lsn`: an insert is a signal; updates and deletes
    /// are none. Never routed.
    pub(super) async fn on_signal_row(
        &mut self,
        lsn: Lsn,
        data: &bytes::Bytes,
    ) -> Result<(), RelayError> {
        // Still a change of its transaction: replays number the rest alike.
        self.change_index += 1;
        let Some(relation) = self.signals.as_ref().and_then(|s| s.relation.clone()) else {
            return Ok(());
        };
        let Ok(LogicalMessage::Insert(insert)) = pgoutput::decode(data.clone()) else {
            return Ok(());
        };
        match signal::from_row(&relation, &insert) {
            Ok(signal) => self.on_signal(signal, lsn).await,
            Err(why) => {
                tracing::warn!("{why}");
                Ok(())
            }
        }
    }

    /// One signal, from any channel; `lsn`: where the stream is.
    pub(super) async fn on_signal(&mut self, signal: Signal, lsn: Lsn) -> Result<(), RelayError> {
        let action = match signal.action() {
            Ok(action) => action,
            Err(why) => {
                tracing::warn!("{why}");
                return Ok(());
            }
        };
        if !matches!(action, Action::WindowOpen | Action::WindowClose) {
            tracing::info!(id = signal.id.as_deref().unwrap_or(""), r#type = %signal.kind, data = %signal.data, "signal received");
        }
        let Some(signals) = self.signals.as_mut() else {
            return Ok(());
        };
        let id = signal.id.clone().unwrap_or_default();
        match action {
            Action::Log { message } => {
                let offset = offset_text(lsn, self.xid, self.commit_time_micros);
                tracing::info!(target: "io.debezium.pipeline.signal.actions.Log", "{}", signal::log_line(&message, &offset));
            }
            Action::WindowOpen => {
                signals.incremental.opened(&id);
            }
            Action::WindowClose => {
                if let Some(chunk) = signals.incremental.closed(&id) {
                    self.send_chunk(chunk, lsn).await?;
                    self.read_chunk().await?;
                }
            }
            Action::ExecuteSnapshot {
                kind: SnapshotKind::Blocking,
                collections,
                conditions,
                ..
            } => {
                self.blocking_snapshot(&collections, &conditions, lsn)
                    .await?;
            }
            Action::ExecuteSnapshot {
                kind: SnapshotKind::Incremental,
                collections,
                conditions,
                surrogate_key,
            } => {
                if signals.settings.table.is_none() && !signals.settings.read_only {
                    tracing::warn!("Incremental snapshot is not properly configured, either sinalling data collection is not provided or connector-specific snapshotting not set (signal.data.collection, --signal-table: the watermarks are written there)");
                    return Ok(());
                }
                let added = incremental::expand(
                    &collections,
                    &conditions,
                    surrogate_key.as_deref(),
                    &signals.known_ids(),
                );
                let progress = &mut signals.incremental.progress;
                let was_running = progress.running();
                if was_running && signal.id.is_some() && progress.correlation_id == signal.id {
                    // The same signal read again (its transaction replayed after a restart
                    // resumed the snapshot it started).
                    return Ok(());
                }
                progress.correlation_id = signal.id.clone();
                let added: Vec<_> = added
                    .into_iter()
                    .filter(|c| !progress.collections.contains(c))
                    .collect();
                progress.collections.extend(added.iter().cloned());
                if was_running {
                    return Ok(());
                }
                // Saved at once (once what was sent before is acknowledged): a restart before
                // the first chunk still takes the snapshot.
                signals.incremental.reached(self.tracker.next_seq());
                let names = added
                    .iter()
                    .map(|c| c.id.as_str())
                    .collect::<Vec<_>>()
                    .join(",");
                self.notify_as(
                    INCREMENTAL,
                    signal.id.clone(),
                    "STARTED",
                    vec![("data_collections", names)],
                )
                .await?;
                self.read_chunk().await?;
            }
            Action::StopSnapshot {
                kind: SnapshotKind::Incremental,
                collections,
            } => {
                if signals.incremental.progress.running() {
                    signals.incremental.stops.push(collections);
                    if signals.incremental.chunk.is_none() {
                        self.read_chunk().await?;
                    }
                }
            }
            Action::StopSnapshot { .. } => {}
            Action::PauseSnapshot => {
                let inc = &mut signals.incremental;
                if inc.progress.running() && !inc.paused {
                    inc.paused = true;
                    let (id, names) = (inc.progress.correlation_id.clone(), inc.progress.ids());
                    self.notify_as(INCREMENTAL, id, "PAUSED", vec![("data_collections", names)])
                        .await?;
                }
            }
            Action::ResumeSnapshot => {
                let inc = &mut signals.incremental;
                if inc.progress.running() && inc.paused {
                    inc.paused = false;
                    let (id, names) = (inc.progress.correlation_id.clone(), inc.progress.ids());
                    let idle = inc.chunk.is_none();
                    self.notify_as(
                        INCREMENTAL,
                        id,
                        "RESUMED",
                        vec![("data_collections", names)],
                    )
                    .await?;
                    if idle {
                        self.read_chunk().await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// After a restart in the middle of an incremental snapshot: reads on from its saved
    /// progress (no STARTED again, as Debezium).
    pub async fn resume_incremental(&mut self) -> Result<(), RelayError> {
        let running = self
            .signals
            .as_ref()
            .is_some_and(|s| s.incremental.progress.running() && s.incremental.chunk.is_none());
        if running {
            tracing::info!("resuming the incremental snapshot where its confirmed progress was");
            self.read_chunk().await?;
        }
        Ok(())
    }

    /// Debezium's `readChunk` (see [`Self::read_next_chunk`]), bounded in time. A failure
    /// that another session cannot mend (a privilege, a signal table that takes no text, a
    /// filter PostgreSQL refuses) ends the snapshot, ABORTED, and the stream goes on; a lost
    /// connection or broker ends the session, which resumes the snapshot from its progress.
    async fn read_chunk(&mut self) -> Result<(), RelayError> {
        let read = tokio::time::timeout(CHUNK_TIMEOUT, self.read_next_chunk()).await;
        let error = match read {
            Ok(Ok(())) => return Ok(()),
            Err(_) => {
                if let Some(signals) = self.signals.as_mut() {
                    // A connection that may hang: a new one next time.
                    signals.client = None;
                }
                return Err(RelayError::ConnectionLost(anyhow::anyhow!(
                    "an incremental snapshot's chunk took more than {} s to read",
                    CHUNK_TIMEOUT.as_secs()
                )));
            }
            Ok(Err(e)) => e,
        };
        if ends_the_session(&error) {
            return Err(error);
        }
        let Some(signals) = self.signals.as_mut() else {
            return Err(error);
        };
        tracing::error!("the incremental snapshot is aborted: {error}");
        let inc = &mut signals.incremental;
        let (id, names) = (inc.progress.correlation_id.clone(), inc.progress.ids());
        inc.chunk = None;
        inc.progress = incremental::Progress::default();
        inc.reached(self.tracker.next_seq());
        self.notify_as(
            INCREMENTAL,
            id,
            "ABORTED",
            vec![("data_collections", names)],
        )
        .await
    }

    /// Debezium's `readChunk`: the stops asked for applied, then (unless paused) the open
    /// watermark, the next chunk of the current table (tables with nothing left reported and
    /// passed), the close watermark.
    async fn read_next_chunk(&mut self) -> Result<(), RelayError> {
        let Some(signals) = self.signals.as_mut() else {
            return Ok(());
        };
        let inc = &mut signals.incremental;
        let was_running = inc.progress.running();
        let id = inc.progress.correlation_id.clone();
        let (removed, _) = inc.apply_stops();
        if !removed.is_empty() {
            let done = !inc.progress.running();
            inc.reached(self.tracker.next_seq());
            if done {
                self.notify_as(INCREMENTAL, id.clone(), "COMPLETED", Vec::new())
                    .await?;
            }
            // The snapshot's id is forgotten once it completed: Debezium's ABORTED after a
            // COMPLETED gets a new one.
            self.notify_as(
                INCREMENTAL,
                if done { None } else { id.clone() },
                "ABORTED",
                vec![("data_collections", removed.join(","))],
            )
            .await?;
        }
        let Some(signals) = self.signals.as_mut() else {
            return Ok(());
        };
        if !signals.incremental.progress.running() || signals.incremental.paused {
            return Ok(());
        }
        // Read-only: no watermark rows; the chunk's window is where the stream stands
        // when it is read, up to the server's WAL position once it was read.
        let read_only = signals.settings.read_only;
        let table = match (read_only, signals.settings.table.clone()) {
            (true, _) => None,
            (false, Some(table)) => Some(table),
            (false, None) => return Ok(()),
        };
        let chunk_id = uuid::Uuid::new_v4().to_string();
        let open_us = crate::metrics::now_ms() * 1000;
        if let Some(table) = &table {
            sql::write_watermark(
                signals.client().await?,
                table,
                (
                    &format!("{chunk_id}-open"),
                    signal::WINDOW_OPEN,
                    &signal::open_data(open_us),
                ),
            )
            .await?;
        }
        loop {
            let signals = self.signals.as_mut().expect("signals");
            let Some(current) = signals.incremental.progress.current().cloned() else {
                break;
            };
            let data_collections = signals.incremental.progress.ids();
            let status = self.next_rows(&current, &chunk_id).await?;
            let signals = self.signals.as_mut().expect("signals");
            let inc = &mut signals.incremental;
            match status {
                None => {
                    // The chunk's own last key, as Debezium's `last_processed_key`.
                    let (maximum, last) = (
                        inc.progress.max_key.clone().unwrap_or_default().join(","),
                        inc.chunk
                            .as_ref()
                            .map_or_else(|| "<null>".to_owned(), |c| c.end_key.join(",")),
                    );
                    self.notify_as(
                        INCREMENTAL,
                        id.clone(),
                        "IN_PROGRESS",
                        vec![
                            ("data_collections", data_collections),
                            ("current_collection_in_progress", current.id.clone()),
                            ("maximum_key", maximum),
                            ("last_processed_key", last),
                        ],
                    )
                    .await?;
                    break;
                }
                Some(status) => {
                    let scanned = inc.progress.rows_scanned;
                    inc.progress.next_table();
                    self.notify_as(
                        INCREMENTAL,
                        id.clone(),
                        "TABLE_SCAN_COMPLETED",
                        vec![
                            ("data_collections", data_collections),
                            ("scanned_collection", current.id.clone()),
                            ("total_rows_scanned", scanned.to_string()),
                            ("status", status.to_owned()),
                        ],
                    )
                    .await?;
                }
            }
        }
        let signals = self.signals.as_mut().expect("signals");
        match &table {
            Some(table) => {
                sql::write_watermark(
                    signals.client().await?,
                    table,
                    (
                        &format!("{chunk_id}-close"),
                        signal::WINDOW_CLOSE,
                        &signal::close_data(open_us, crate::metrics::now_ms() * 1000),
                    ),
                )
                .await?;
            }
            None if signals.incremental.chunk.is_some() => {
                let high = sql::wal_position(signals.client().await?).await?;
                if let Some(chunk) = signals.incremental.chunk.as_mut() {
                    chunk.open = true;
                    chunk.close_at = Some(high);
                }
            }
            None => {}
        }
        let inc = &mut signals.incremental;
        if !inc.progress.running() {
            inc.reached(self.tracker.next_seq());
            if was_running {
                self.notify_as(INCREMENTAL, id, "COMPLETED", Vec::new())
                    .await?;
            }
        }
        Ok(())
    }

    /// Reads the next chunk of `current` into the window (`None`), or says why the table is
    /// done: SUCCEEDED (read to its maximum key), EMPTY, NO_PRIMARY_KEY, UNKNOWN_SCHEMA,
    /// SQL_EXCEPTION.
    async fn next_rows(
        &mut self,
        current: &incremental::Collection,
        chunk_id: &str,
    ) -> Result<Option<&'static str>, RelayError> {
        let signals = self.signals.as_mut().expect("signals");
        let Some(table) = signals
            .known
            .iter()
            .find(|t| t.to_string() == current.id)
            .cloned()
        else {
            tracing::warn!(table = %current.id, "an incremental snapshot asked for a table that is not an outbox table of this relay: passed over");
            return Ok(Some("UNKNOWN_SCHEMA"));
        };
        // The table's Relation and key, once per table.
        if signals
            .described
            .as_ref()
            .is_none_or(|(id, _)| *id != current.id)
        {
            let client = signals.client().await?;
            let columns = match sql::key_columns(client, &table, current.surrogate_key.as_deref())
                .await?
            {
                Ok(columns) if !columns.is_empty() => columns,
                Ok(_) => {
                    tracing::warn!(%table, "an incremental snapshot needs a primary key (or a surrogate-key): passed over");
                    return Ok(Some("NO_PRIMARY_KEY"));
                }
                Err(why) => {
                    tracing::warn!(%table, "{why}");
                    return Ok(Some("NO_PRIMARY_KEY"));
                }
            };
            signals.described = Some((current.id.clone(), columns.clone()));
            signals.incremental.key_columns = columns.into_iter().map(|(n, _)| n).collect();
        }
        let signals = self.signals.as_mut().expect("signals");
        let columns = signals
            .described
            .as_ref()
            .map(|(_, c)| c.clone())
            .unwrap_or_default();
        let condition = current.condition.clone();
        let size = signals.settings.chunk_size;
        if signals.incremental.progress.max_key.is_none() {
            let client = signals.client().await?;
            match sql::max_key(client, &table, &columns, condition.as_deref()).await {
                Ok(Some(max)) => signals.incremental.progress.max_key = Some(max),
                Ok(None) => return Ok(Some("EMPTY")),
                Err(e) => {
                    tracing::warn!(%table, "incremental snapshot: {e}");
                    return Ok(Some("SQL_EXCEPTION"));
                }
            }
        }
        let relation = crate::source::sql_rows::relation(
            signals.client().await?,
            &table,
            INCREMENTAL_RELATION_ID,
        )
        .await?;
        // Routed again whenever the table changed (an ALTER TABLE meanwhile): the rows read
        // are the table's as it is now.
        if signals.routed.as_ref() != Some(&relation) {
            signals.routed = Some(relation.clone());
            self.route_message(
                &LogicalMessage::Relation(relation.clone()),
                self.tracker.confirmed(),
                None,
            )
            .await?;
        }
        let signals = self.signals.as_mut().expect("signals");
        let progress = &signals.incremental.progress;
        let max = progress.max_key.clone().unwrap_or_default();
        let after = progress.last_key.clone();
        let client = signals.client().await?;
        let rows = match sql::read_chunk(
            client,
            &relation,
            &columns,
            (after.as_deref(), &max),
            condition.as_deref(),
            size,
        )
        .await
        {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(%table, "incremental snapshot: {e}");
                return Ok(Some("SQL_EXCEPTION"));
            }
        };
        let Some((end_key, _)) = rows.last() else {
            return Ok(Some("SUCCEEDED"));
        };
        let end_key = end_key.clone();
        let inc = &mut signals.incremental;
        inc.progress.rows_scanned += rows.len() as u64;
        inc.chunk = Some(Chunk {
            id: chunk_id.to_owned(),
            open: false,
            rows,
            relation_id: INCREMENTAL_RELATION_ID,
            end_key,
            close_at: None,
        });
        Ok(None)
    }

    /// The chunk's rows left after its window, as reads (`source.snapshot: incremental`) at
    /// the close watermark's position, in its transaction.
    async fn send_chunk(&mut self, chunk: Chunk, lsn: Lsn) -> Result<(), RelayError> {
        let name: Arc<str> = format!("incremental-{}", chunk.id).into();
        let end_key = chunk.end_key.clone();
        for (row, (_, insert)) in chunk.rows.into_iter().enumerate() {
            self.make_room().await?;
            if self.router.wants_position() {
                self.set_position(lsn, Some("incremental"), &[]);
            }
            let event = EventPosition::Snapshot {
                snapshot: name.clone(),
                row: row as u64,
            };
            self.route_message(&LogicalMessage::Insert(insert), lsn, Some(event))
                .await?;
        }
        // Saved once these rows, and everything sent before them, are acknowledged.
        let next = self.tracker.next_seq();
        if let Some(signals) = self.signals.as_mut() {
            signals.incremental.sent(end_key, next);
        }
        Ok(())
    }

    /// Read-only incremental snapshots: the stream reached `position` (a transaction committing
    /// there begins, or the server's WAL end with no transaction open): the chunk read before
    /// it goes out once the stream passed the WAL position it was read at, every change
    /// streamed since its reading having had its chance to win over it. In the open
    /// transaction when there is one, else in a transaction of its own.
    pub(super) async fn stream_reached(&mut self, position: Lsn) -> Result<(), RelayError> {
        // On a quiet database the next chunk may be passed already when it is read.
        for _ in 0..READ_ONLY_CHUNKS_AT_ONCE {
            let Some(chunk) = self
                .signals
                .as_mut()
                .and_then(|s| s.incremental.passed(position))
            else {
                return Ok(());
            };
            // Its own transaction at the confirmed position outside the stream's, as a
            // heartbeat's: it confirms nothing new.
            let own = !self.tracker.in_transaction();
            let at = self.tracker.confirmed();
            if own {
                self.tracker.begin();
            }
            self.send_chunk(chunk, position).await?;
            self.read_chunk().await?;
            if own {
                if let Some(lsn) = self.tracker.commit(at) {
                    self.confirm(lsn);
                }
            }
        }
        Ok(())
    }

    /// Saves the incremental snapshot's progress once every event sent before it was reached
    /// is acknowledged.
    pub(super) async fn save_progress(&mut self) -> Result<(), RelayError> {
        let Some(signals) = self.signals.as_mut() else {
            return Ok(());
        };
        signals
            .incremental
            .acknowledged(self.tracker.delivered_before());
        let Some(progress) = signals.incremental.take_due() else {
            return Ok(());
        };
        let (home, slot) = (signals.home.clone(), signals.slot.clone());
        let saved = match signals.client().await {
            Ok(client) => sql::save(client, &home, &slot, &progress).await,
            Err(e) => Err(e),
        };
        match saved {
            Ok(()) => Ok(()),
            Err(e) if ends_the_session(&e) => Err(e),
            // The snapshot goes on; only a restart would take it again from an older point.
            Err(e) => {
                tracing::warn!("the incremental snapshot's progress cannot be saved ({e}): a restart would read it from its last saved point, or from its start");
                Ok(())
            }
        }
    }

    /// A blocking snapshot (`execute-snapshot` with `type: blocking`): the stream waits while
    /// the tables named are read whole, as an initial snapshot reads them (its markers, its
    /// notifications), each in a snapshot of its own, `additional-conditions` limiting rows.
    async fn blocking_snapshot(
        &mut self,
        collections: &[String],
        conditions: &[signal::Condition],
        lsn: Lsn,
    ) -> Result<(), RelayError> {
        let Some(signals) = self.signals.as_mut() else {
            return Ok(());
        };
        // Debezium splits each entry on commas and matches case-insensitively.
        let tables: Vec<TableName> = signals
            .known
            .iter()
            .filter(|t| {
                let id = t.to_string();
                collections
                    .iter()
                    .flat_map(|c| c.split(','))
                    .map(str::trim)
                    .any(|c| incremental::full_match(c, &id, true).unwrap_or(false))
            })
            .cloned()
            .collect();
        let filters: Vec<Option<String>> = tables
            .iter()
            .map(|t| {
                let id = t.to_string();
                conditions
                    .iter()
                    .find(|c| incremental::full_match(&c.collection, &id, true).unwrap_or(false))
                    .map(|c| c.filter.clone())
            })
            .collect();
        let database = signals.database.clone();
        let fetch = signals.fetch_size;
        self.notify_as(BLOCKING, None, "STARTED", Vec::new())
            .await?;
        let taken = async {
            let counts =
                crate::source::snapshot::count_rows_where(&database, &tables, &filters).await?;
            let places = crate::source::snapshot::places(&counts);
            let ids: Vec<String> = tables.iter().map(ToString::to_string).collect();
            let in_progress = outbox_router::java_hash_set_order(ids.clone()).join(",");
            for (i, ((table, place), filter)) in tables.iter().zip(places).zip(&filters).enumerate()
            {
                let relation_id = INCREMENTAL_RELATION_ID - 1 - i as u32;
                let mut rows = crate::source::snapshot::open_where(
                    &database,
                    table,
                    relation_id,
                    filter.as_deref(),
                    fetch,
                )
                .await?;
                self.notify_as(
                    BLOCKING,
                    None,
                    "IN_PROGRESS",
                    vec![
                        ("current_collection_in_progress", table.to_string()),
                        ("data_collections", in_progress.clone()),
                    ],
                )
                .await?;
                let name = format!("blocking-{}/{table}", uuid::Uuid::now_v7());
                self.relay_snapshot(&mut rows, Some(name), lsn, place)
                    .await?;
                self.notify_as(
                    BLOCKING,
                    None,
                    "TABLE_SCAN_COMPLETED",
                    vec![
                        ("scanned_collection", table.to_string()),
                        ("data_collections", ids.join(",")),
                        ("total_rows_scanned", rows.total.to_string()),
                        ("status", "SUCCEEDED".to_owned()),
                    ],
                )
                .await?;
                rows.finish().await?;
            }
            Ok::<(), RelayError>(())
        }
        .await;
        match taken {
            Ok(()) => {
                self.notify_as(BLOCKING, None, "COMPLETED", Vec::new())
                    .await
            }
            Err(e) if ends_the_session(&e) => {
                // Told if it can be, soon: the error itself ends the session (a signal from
                // the signal table comes again with its unconfirmed transaction).
                let _ = tokio::time::timeout(
                    std::time::Duration::from_secs(5),
                    self.notify_as(BLOCKING, None, "ABORTED", Vec::new()),
                )
                .await;
                Err(e)
            }
            Err(e) => {
                tracing::error!("the blocking snapshot is aborted ({e}); streaming goes on");
                self.notify_as(BLOCKING, None, "ABORTED", Vec::new()).await
            }
        }
    }
}
