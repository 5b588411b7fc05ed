//! Source: the replication stream. One *session* is one replication connection (pgoutput,
//! through `pgwire-replication`) plus one producer: it makes sure the publication and the
//! slot exist, takes the initial snapshot when one is owed, streams from the slot's
//! position (or from what this process confirmed, if the slot has not recorded it yet), and
//! on a graceful stop records its final position on the slot. Any error ends the session;
//! the supervisor decides what follows from its kind. Nothing is confirmed that Kafka did not
//! acknowledge, so a new session resends what the last one had in flight: nothing is lost.

mod claim;
mod initial_only;
mod pg_stream;
mod plan;
mod server;
mod set_up;
mod standby;
mod stream;
#[cfg(test)]
mod tests;

pub use pg_stream::PgStream;
use server::{
    advance_slot_on, create_slot_exporting_snapshot, final_position_holds_on,
    parse_timeline_history, slot_holder, walsender, Identity, Walsender,
};
use standby::log_standby_snapshots;
pub use stream::{Change, ChangeStream, Streamer, SHUTDOWN_DRAIN_TIMEOUT, SILENCE_BEFORE_PROBE};

use crate::source::session::{AbortOnDrop, Source};

use super::postgres;
use super::{catalog, slot_history, snapshot};
use crate::config::ConnectionInfo;
use crate::config::{CdcSettings, Heartbeat, OnMissingSlot, OnServerRewind, Settings};
use crate::confirm::Confirmations;
use crate::deliver::{exactly_once, Deliver, KafkaProducer, Refusals};
use crate::error::{Problem, RelayError};
use crate::metrics::Metrics;
use outbox_router::connect::ColumnFacts;
use outbox_router::{Router, TableName};
use pgoutput::Lsn;
use pgwire_replication::{
    Lsn as PgLsn, ReplicationClient, ReplicationConfig, ReplicationEvent, ReplicationMetrics,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::Instrument;

/// WAL messages read from the replication connection and not yet decoded, at most: enough to
/// keep the connection's reader ahead of the decoder, which runs on the same two cores, and
/// little enough that a catch-up's memory is the producer's in-flight window, not this
/// buffer's (the crate's defaults are 8,192 messages and 32 MiB). A larger message still
/// passes, alone.
const REPLICATION_BUFFER_EVENTS: usize = 256;
const REPLICATION_BUFFER_BYTES: usize = 1 << 20;

/// CDC mode, session after session.
pub struct Replication<'a> {
    settings: &'a Settings,
    cdc: &'a CdcSettings,
    conn: ConnectionInfo,
    /// Which of the URL's hosts this session's SQL connection reached: its replication
    /// connection goes to the same one.
    host: usize,
    metrics: Arc<Metrics>,
    written: Arc<crate::deliver::WrittenTopics>,
    confirmations: Confirmations,
    /// The server the last session reached.
    identity: Option<Identity>,
    /// The slot is in the slot history (or the role cannot write it: warned once).
    remembered: bool,
    /// `snapshot.mode=always`: this process took its snapshot (one per start).
    snapshot_taken: bool,
    /// The walsender of this process's last session: if a dead connection left it holding
    /// the slot, the next session ends it instead of standing by for its own ghost.
    walsender: Option<Walsender>,
    /// The SQL backend that held this process's claim on the slot in its last session: if a
    /// dead connection left it holding the claim, the next session ends it.
    claimed_by: Option<claim::Backend>,
    /// Another instance held the slot when this one last tried (it stood by): the session
    /// that takes the slot over fences its `--exactly-once` tail reads.
    stood_by: bool,
    /// What the broker refused, carried from session to session.
    refusals: Refusals,
    /// Why the canary is off, as last warned (warned again only when the reason changes).
    canary_off: Option<String>,
    _heartbeat: Option<AbortOnDrop>,
}

impl<'a> Replication<'a> {
    pub fn new(
        settings: &'a Settings,
        cdc: &'a CdcSettings,
        metrics: Arc<Metrics>,
        written: Arc<crate::deliver::WrittenTopics>,
    ) -> Result<Self, RelayError> {
        let conn = ConnectionInfo::parse(settings.postgres_url.expose())
            .map_err(RelayError::Misconfiguration)?;
        let heartbeat = cdc
            .heartbeat
            .clone()
            .filter(|h| h.action_query.is_some())
            .map(|h| {
                AbortOnDrop(tokio::spawn(heartbeat_loop(
                    // An action query writes: on the primary when capturing from a standby.
                    crate::source::postgres::Database::for_writes(settings),
                    h,
                )))
            });
        Ok(Self {
            settings,
            cdc,
            conn,
            host: 0,
            confirmations: Confirmations::new(metrics.clone()),
            metrics,
            written,
            identity: None,
            remembered: false,
            snapshot_taken: false,
            walsender: None,
            claimed_by: None,
            stood_by: false,
            refusals: Refusals::default(),
            canary_off: None,
            _heartbeat: heartbeat,
        })
    }

    /// The canary cannot run this session: says why once (and again when the reason changes,
    /// or after a session that ran it); its age no longer counts.
    fn canary_off(&mut self, why: String) {
        self.metrics.canary_off();
        if self.canary_off.as_deref() != Some(why.as_str()) {
            tracing::warn!("no canary: {why}; or turn the canary off with --canary-interval 0");
            self.canary_off = Some(why);
        }
    }

    fn replication_config(&self, start: Lsn) -> ReplicationConfig {
        let (host, port) = self.conn.hosts[self.host].clone();
        let mut tls = self.conn.tls.clone();
        if tls.sni_hostname.is_some() {
            // verify-full checks the name of the host it reached.
            tls.sni_hostname = Some(host.clone());
        }
        ReplicationConfig::new(
            host,
            self.conn.user.clone(),
            self.conn.password.clone(),
            self.conn.database.clone(),
            self.cdc.slot.clone(),
            self.cdc.publication.as_str(),
        )
        .with_port(port)
        .with_tls(tls)
        .with_start_lsn(PgLsn::from_u64(start.as_u64()))
        .with_status_interval(self.cdc.status_interval)
        .with_application_name("outbox-relay")
        .with_options(postgres::SESSION_OPTIONS)
        .with_buffer_size(REPLICATION_BUFFER_EVENTS)
        .with_buffer_bytes(REPLICATION_BUFFER_BYTES)
    }

    /// A replication session that has not started streaming, the server it reached, and
    /// where that server's WAL ends now (IDENTIFY_SYSTEM's `xlogpos`).
    async fn connect_gated(
        &self,
        start: Lsn,
    ) -> Result<(ReplicationClient, Identity, Lsn), RelayError> {
        let error = |e| RelayError::replication(e, &self.conn.display, &self.cdc.slot);
        // connect_timeout applies as to the SQL connection (libpq: per host).
        let within = self.conn.connect_timeout.unwrap_or(Duration::from_secs(30));
        let (host, port) = &self.conn.hosts[self.host];
        let mut client = tokio::time::timeout(
            within,
            ReplicationClient::connect_gated(self.replication_config(start)),
        )
        .await
        .map_err(|_| {
            RelayError::ConnectionLost(anyhow::anyhow!(
                "the replication connection to {host}:{port} did not answer within {within:?} (connect_timeout)"
            ))
        })?
        .map_err(error)?;
        if self.conn.target.checks() {
            // The server the SQL connection was chosen for may have changed role since (a
            // failover): the replication connection is held to the same rule.
            let rows = client
                .simple_query(
                    "SELECT current_setting('transaction_read_only') = 'on', pg_is_in_recovery()",
                )
                .await
                .map_err(error)?;
            let flag = |i: usize| {
                rows.first()
                    .and_then(|r| r.get(i).cloned().flatten())
                    .is_some_and(|v| v.as_ref() == b"t")
            };
            if !self.conn.target.accepts(flag(0), flag(1), false)
                && self.conn.target != crate::config::SessionTarget::PreferStandby
            {
                return Err(RelayError::ConnectionLost(anyhow::anyhow!(
                    "the replication connection reached {host}:{port}, which is no longer {} (target_session_attrs)",
                    self.conn.target.name()
                )));
            }
        }
        let system = client.identify_system().await.map_err(error)?;
        // A promoted standby's positions before it branched off are its predecessor's too
        // (`--exactly-once` trusts the tails written there).
        let history = if system.timeline > 1 {
            client
                .simple_query(&format!("TIMELINE_HISTORY {}", system.timeline))
                .await
                .map_err(error)?
                .first()
                .and_then(|row| row.get(1).cloned().flatten())
                .map(|content| parse_timeline_history(&content))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Ok((
            client,
            Identity {
                system_id: system.system_id,
                timeline: system.timeline,
                history,
            },
            Lsn::from_u64(system.xlogpos.as_u64()),
        ))
    }

    /// One session: set-up, assembly, then the stream until shutdown or an error.
    async fn run_session(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), RelayError> {
        let set_up = self.set_up().await?;
        let context = SessionContext {
            settings: self.settings,
            cdc: self.cdc,
            postgres: self.conn.display.clone(),
            metrics: self.metrics.clone(),
        };
        let (streamer, opening) = self.assemble(set_up)?;
        let (result, streamed) = stream_until_shutdown(streamer, opening, &context, shutdown).await;
        if streamed {
            // This session held the slot: the next one takes nothing over.
            self.stood_by = false;
        }
        match result? {
            Some(final_lsn) => self.record_final_position(final_lsn).await,
            None => Ok(()),
        }
    }

    /// A graceful stop's last position, checked and recorded on the slot where the server did
    /// not take it with the last status update, on the server this session streamed from
    /// only: on a connection to the session's host whose IDENTIFY_SYSTEM names the same
    /// system and timeline, which then advances the slot itself. Any other server (a failover
    /// in between: a promoted standby branched off before that position, and its commits
    /// between the branch and the position would be skipped) is left as it is: the next start
    /// resumes from its slot's own position, which may send events again, never lose one.
    async fn record_final_position(&self, lsn: Lsn) -> Result<(), RelayError> {
        let Some(session) = self.identity.clone() else {
            return Ok(());
        };
        let (mut client, reached, _) = match self.connect_gated(lsn).await {
            Ok(connected) => connected,
            Err(e) => {
                tracing::warn!(slot = %self.cdc.slot, final_lsn = %lsn, "stopping: the server this session streamed from cannot be reached to check the final position ({e}); it is not recorded elsewhere, and the next start resumes from the slot's own position");
                return Ok(());
            }
        };
        if !final_position_holds_on(&session, &reached) {
            tracing::warn!(slot = %self.cdc.slot, final_lsn = %lsn,
                session_system = %session.system_id, session_timeline = session.timeline,
                system = %reached.system_id, timeline = reached.timeline,
                "stopping: the server reached now is not the one this session streamed from (a failover); the final \
                 position is not recorded there, and the next start resumes from that server's own slot position");
            return Ok(());
        }
        advance_slot_on(&mut client, &self.cdc.slot, lsn)
            .await
            .map_err(|e| RelayError::replication(e, &self.conn.display, &self.cdc.slot))
    }

    /// A replication connection at the slot's position (`None`: the slot is made on it
    /// later), the server it reached, the start position and where the server's WAL ends.
    /// After a failover (another system or timeline than the last session's), what this
    /// process confirmed to the old server says nothing about the new one (its WAL may be
    /// behind it): it starts from the slot's own position. The same server with its WAL
    /// ending before what this process confirmed went back in time: `--on-server-rewind`.
    async fn connect_at(
        &mut self,
        slot_position: Option<Lsn>,
    ) -> Result<(ReplicationClient, Identity, Lsn, Lsn), RelayError> {
        let confirmed = self.confirmations.last();
        let mut start = match slot_position {
            Some(position) => self.confirmations.resume_from(position),
            None => Lsn::ZERO,
        };
        let (mut client, identity, wal_end) = self.connect_gated(start).await?;
        if let (Some(previous), Some(position)) = (&self.identity, slot_position) {
            let behind = confirmed.filter(|confirmed| wal_end < *confirmed);
            if *previous == identity {
                if let Some(confirmed) = behind {
                    let reread = self
                        .on_server_rewind(&mut client, &identity, wal_end, position, confirmed)
                        .await?;
                    if reread {
                        self.confirmations.forget();
                        start = self.confirmations.resume_from(position);
                        drop(client);
                        client = self.connect_gated(start).await?.0;
                    }
                }
            } else {
                tracing::warn!(
                    previous_system = %previous.system_id, previous_timeline = previous.timeline,
                    system = %identity.system_id, timeline = identity.timeline, slot_lsn = %position,
                    "PostgreSQL's system or timeline changed (a failover): resuming from the slot's own position"
                );
                self.confirmations.forget();
                start = self.confirmations.resume_from(position);
                drop(client);
                client = self.connect_gated(start).await?.0;
            }
        }
        Ok((client, identity, start, wal_end))
    }

    /// The server (same system, same timeline) has WAL only up to `wal_end`, before
    /// `confirmed`, which this process confirmed to it: restored from a file-system copy or a
    /// VM snapshot, or a cold copy started. Commits it makes now take positions below
    /// `confirmed`, which PostgreSQL would skip from a start at `confirmed`. A standby that has
    /// not replayed that far yet is waited for; otherwise `--on-server-rewind` decides: stop
    /// with the choices (refuse), resume from the slot's `slot_position` (reread: true) or
    /// from `confirmed` (accept-gap: false).
    async fn on_server_rewind(
        &self,
        client: &mut ReplicationClient,
        identity: &Identity,
        wal_end: Lsn,
        slot_position: Lsn,
        confirmed: Lsn,
    ) -> Result<bool, RelayError> {
        let slot = &self.cdc.slot;
        let in_recovery = client
            .simple_query("SELECT pg_is_in_recovery()")
            .await
            .ok()
            .and_then(|rows| rows.first().and_then(|r| r.first().cloned().flatten()))
            .is_some_and(|v| v.as_ref() == b"t");
        if in_recovery {
            return Err(RelayError::ConnectionLost(anyhow::anyhow!(
                "the standby has WAL up to {wal_end} only, below {confirmed} which this relay confirmed: waiting for \
                 it to replay further"
            )));
        }
        let (system, timeline) = (&identity.system_id, identity.timeline);
        match self.cdc.on_server_rewind {
            OnServerRewind::Refuse => Err(Problem::new(
                format!(
                    "PostgreSQL went back in time: system {system}, timeline {timeline}, has WAL up to {wal_end} \
                     only and slot {slot} is at {slot_position}, but this relay confirmed {confirmed} to it (the \
                     server was restored from a file-system copy or a VM snapshot, or a cold copy was started). \
                     Kafka holds the events of commits up to {confirmed} that the server no longer has, and resuming \
                     from {confirmed} would skip every commit the server makes below it"
                ),
                format!(
                    "choose, and start again with one of: --on-server-rewind reread (resume from the slot's position \
                     {slot_position}: everything the server has after it is relayed, events relayed before come \
                     again; consumers deduplicate by event id), or --on-server-rewind accept-gap (resume from \
                     {confirmed}: commits the server makes below it are not relayed). A relay started anew knows \
                     only the slot's position, and resumes from it as reread does"
                ),
            )
            .into()),
            OnServerRewind::Reread => {
                tracing::warn!(%slot, %wal_end, slot_lsn = %slot_position, %confirmed, "PostgreSQL went back in time (same system and timeline, its WAL ends before what this relay confirmed): resuming from the slot's position; events after it come again (--on-server-rewind reread)");
                Ok(true)
            }
            OnServerRewind::AcceptGap => {
                tracing::warn!(%slot, %wal_end, slot_lsn = %slot_position, %confirmed, "PostgreSQL went back in time (same system and timeline, its WAL ends before what this relay confirmed): resuming from {confirmed}; commits the server makes below it are not relayed (--on-server-rewind accept-gap)");
                Ok(false)
            }
        }
    }

    /// The session's pipeline: the stream, the delivery stage (with `--exactly-once`'s
    /// guard) and the confirmations, in one [`Streamer`].
    fn assemble(
        &mut self,
        set_up: SetUp,
    ) -> Result<(Streamer<'_, PgStream, KafkaProducer>, Opening), RelayError> {
        let (settings, cdc) = (self.settings, self.cdc);
        let SetUp {
            sql,
            client,
            walsender,
            system_id,
            timeline,
            history,
            wal_end,
            recorder,
            opening,
        } = set_up;
        let producer = if cdc.exactly_once {
            KafkaProducer::new(&exactly_once::producer_settings(&settings.kafka))?
        } else {
            KafkaProducer::new(&settings.kafka)?
        };
        let stream = PgStream {
            lag: client.metrics(),
            client,
            sql,
            database: crate::source::postgres::Database::of(settings),
            display: self.conn.display.clone(),
            slot: cdc.slot.clone(),
            walsender,
        };
        // What was refused before this session's start is never replayed again.
        self.refusals.forget_before(opening.start);
        let mut deliver = Deliver::new(
            producer,
            &settings.kafka.dead_letter_topic,
            self.metrics.clone(),
            self.written.clone(),
        )
        .with_refusals(self.refusals.clone());
        if cdc.exactly_once {
            deliver = deliver.with_exactly_once(exactly_once::Guard::for_session(
                &cdc.slot,
                &system_id,
                timeline,
                &history,
                wal_end,
                self.stood_by,
                &settings.kafka,
            ));
        }
        let mut streamer = Streamer::new(
            stream,
            deliver,
            Router::new(settings.router.clone()),
            opening.start,
            &mut self.confirmations,
            self.metrics.clone(),
            &opening.home,
            settings.kafka.max_in_flight,
        )
        .stuck_after(settings.kafka.stuck_partition_after)
        .max_in_flight_bytes(settings.kafka.max_in_flight_bytes);
        if cdc.exactly_once {
            streamer = streamer.probe_when_full();
        }
        if let Some(heartbeat) = &cdc.heartbeat {
            streamer = streamer.heartbeats_every(heartbeat.interval);
        }
        if let Some(canary) = cdc.canary.as_ref().filter(|_| opening.canary) {
            streamer = streamer.canaries(
                &canary.topic,
                &cdc.slot,
                canary.method,
                &opening.home.schema,
            );
        }
        if let Some(recorder) = recorder {
            streamer = streamer.cleanup(recorder);
        }
        if cdc.signals.any() {
            streamer = streamer.signals(signals_for_session(settings, cdc, &opening));
        }
        Ok((streamer, opening))
    }
}

/// The signals of a session: its channels started, the incremental snapshot under way resumed.
fn signals_for_session(
    settings: &Settings,
    cdc: &CdcSettings,
    opening: &Opening,
) -> crate::source::replication::stream::Signals {
    use crate::source::signal::channels;
    let name = match &settings.router.output {
        outbox_router::Output::Connect(format) => format.topic_prefix.clone(),
        outbox_router::Output::Raw => cdc.slot.clone(),
    };
    let mut tasks = Vec::new();
    let inbox = (cdc.signals.kafka || cdc.signals.file).then(|| {
        let (to, inbox) = tokio::sync::mpsc::unbounded_channel();
        if cdc.signals.kafka {
            tasks.push(channels::spawn_kafka(
                &cdc.signals,
                &settings.kafka,
                &name,
                to.clone(),
            ));
        }
        if cdc.signals.file {
            tasks.push(channels::spawn_file(&cdc.signals, to));
        }
        inbox
    });
    crate::source::replication::stream::Signals::new(
        (*cdc.signals).clone(),
        crate::source::postgres::Database::for_writes(settings),
        opening.tables.clone(),
        cdc.slot.clone(),
        opening.home.clone(),
        opening.incremental.clone(),
        (inbox, tasks),
        cdc.snapshot_fetch_size,
    )
}

/// What set-up made for a session: the SQL and replication connections, the server, and
/// where the session starts.
struct SetUp {
    sql: tokio_postgres::Client,
    client: ReplicationClient,
    walsender: Option<Walsender>,
    system_id: String,
    timeline: u32,
    /// The timelines the server's branched off (see [`Identity`]).
    history: Vec<(u32, Lsn)>,
    /// Where the server's WAL ended when the session connected.
    wal_end: Lsn,
    /// `--cleanup`: what the stream writes the ledger with.
    recorder: Option<crate::source::cleanup::Recorder>,
    opening: Opening,
}

/// Where a session starts and what it relays first.
struct Opening {
    tables: Vec<TableName>,
    /// The table whose schema keeps the snapshot marker and the slot's history.
    home: TableName,
    start: Lsn,
    /// `snapshot.mode=initial` (or a reread) is owed: the rows first, then the stream.
    snapshot_owed: bool,
    /// The snapshot exported with a slot made by this session, and its consistent point.
    exported: Option<(String, Lsn)>,
    /// `--cleanup`: what the session's cleaner deletes.
    cleaning: Option<crate::source::cleanup::Cleaning>,
    /// The canary runs this session (on, and its table published where it is a row).
    canary: bool,
    /// An incremental snapshot under way when the last session ended: its confirmed progress.
    incremental: Option<crate::source::incremental::Progress>,
}

/// What the loop of a session reads of its relay.
struct SessionContext<'a> {
    settings: &'a Settings,
    cdc: &'a CdcSettings,
    /// The server, as logs name it (no password).
    postgres: String,
    metrics: Arc<Metrics>,
}

/// Relays the snapshot the opening owes, then streams until shutdown (a graceful end: in-flight
/// deliveries drained, the last position recorded) or an error. Also says whether the
/// session streamed (held the slot).
async fn stream_until_shutdown(
    mut streamer: Streamer<'_, PgStream, KafkaProducer>,
    opening: Opening,
    context: &SessionContext<'_>,
    shutdown: &mut watch::Receiver<bool>,
) -> (Result<Option<Lsn>, RelayError>, bool) {
    let SessionContext {
        settings,
        cdc,
        postgres,
        metrics,
    } = context;
    let mut streamed = false;
    let result = async {
        if opening.snapshot_owed {
            relay_snapshot(&mut streamer, &opening, settings, cdc).await?;
        } else {
            // Debezium's task tells SKIPPED at each start without a snapshot to take.
            streamer.snapshot_metrics().snapshot_skipped();
            streamer.notify("SKIPPED", Vec::new()).await?;
        }
        let stream = &mut streamer.stream;
        stream
            .client
            .start()
            .await
            .map_err(|e| RelayError::replication(e, &stream.display, &stream.slot))?;
        stream
            .client
            .wait_started()
            .await
            .map_err(|e| RelayError::replication(e, &stream.display, &stream.slot))?;
        tracing::info!(tables = %opening.tables.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "), start_lsn = %opening.start, postgres = %postgres,
            exactly_once = cdc.exactly_once, "streaming");
        streamed = true;
        // The canary, written while this session holds the slot (aborted with it).
        let _canary = cdc.canary.clone().filter(|_| opening.canary).map(|canary| {
            let database = crate::source::postgres::Database::for_writes(settings);
            let (slot, schema) = (cdc.slot.clone(), opening.home.schema.clone());
            let metrics = metrics.clone();
            AbortOnDrop(tokio::spawn(async move {
                crate::source::canary::write_every(database, slot, &schema, canary, metrics).await
            }))
        });
        let _canary_reader = cdc
            .canary
            .clone()
            .filter(|canary| opening.canary && canary.read_back)
            .map(|canary| {
                AbortOnDrop(tokio::spawn(crate::source::canary::read_back(
                    settings.kafka.clone(),
                    canary.topic,
                    cdc.slot.clone(),
                    metrics.clone(),
                )))
            });
        // Whether the slot survives a failover, every 10 s.
        let _survival = AbortOnDrop(tokio::spawn(crate::source::survival::watch(
            settings.postgres_url.clone(),
            cdc.slot.clone(),
            metrics.clone(),
            Duration::from_secs(10),
            cdc.slot_failover,
        )));
        // The cleaner, run while this session holds the slot (one instance cleans).
        let _cleaner = settings
            .cleanup
            .clone()
            .zip(opening.cleaning.clone())
            .map(|(cleanup, cleaning)| {
                AbortOnDrop(tokio::spawn(crate::source::cleanup::clean_every(
                    // Deletes: on the primary when capturing from a standby.
                    crate::source::postgres::Database::for_writes(settings),
                    cleanup,
                    cleaning,
                    metrics.clone(),
                )))
            });
        metrics.streaming.set(1);
        metrics.set_standing_by(false);
        metrics.active.set(1);
        streamer.resume_incremental().await?;
        streamer.stream(shutdown).await
    }
    .await;
    if let Err(e) = result {
        streamer.stream.client.abort();
        if matches!(e, RelayError::BrokerUnavailable(_)) {
            // Remember what the broker refused, whichever report came first (a batch's
            // innocent records may be reported before the one that failed it).
            streamer.settle(Duration::from_secs(5)).await;
        }
        return (Err(e), streamed);
    }
    let final_lsn = streamer.finish().await;
    let counts = streamer.counts();
    // The position goes to the server with the last status update, before the stream ends;
    // the caller checks it there (`Replication::record_final_position`).
    let _ = streamer.stream.client.shutdown().await;
    tracing::info!(confirmed_lsn = %final_lsn, events = counts.events, dead_letters = counts.dead_letters, skipped = counts.skipped, "stopped");
    (Ok(Some(final_lsn)), streamed)
}

/// `snapshot.mode=initial`: the outbox tables' rows, table after table, each read in the
/// snapshot exported with the slot; then the marker that says the snapshot is done. Debezium's
/// notifications tell it: STARTED, IN_PROGRESS and TABLE_SCAN_COMPLETED for each table,
/// COMPLETED, or ABORTED when it fails.
async fn relay_snapshot<S: stream::ChangeStream>(
    streamer: &mut Streamer<'_, S, KafkaProducer>,
    opening: &Opening,
    settings: &Settings,
    cdc: &CdcSettings,
) -> Result<(), RelayError> {
    streamer.notify("STARTED", Vec::new()).await?;
    let taken = relay_snapshot_tables(streamer, opening, settings, cdc).await;
    streamer.snapshot_metrics().snapshot_ended(taken.is_ok());
    match taken {
        Ok(()) => streamer.notify("COMPLETED", Vec::new()).await,
        Err(e) => {
            // Told if it can be, soon: the snapshot's own error is what ends the session.
            let told = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                streamer.notify("ABORTED", Vec::new()),
            )
            .await;
            if !matches!(told, Ok(Ok(()))) {
                tracing::warn!("the ABORTED notification of the snapshot could not be written");
            }
            Err(e)
        }
    }
}

async fn relay_snapshot_tables<S: stream::ChangeStream>(
    streamer: &mut Streamer<'_, S, KafkaProducer>,
    opening: &Opening,
    settings: &Settings,
    cdc: &CdcSettings,
) -> Result<(), RelayError> {
    let snapshot = opening
        .exported
        .as_ref()
        .map(|(name, point)| (name.as_str(), *point));
    let database = crate::source::postgres::Database::of(settings);
    let mut taken = (None, None);
    // Every table counted first (Debezium's markers say which row is the snapshot's last,
    // which an empty table after it does not change), then read one after the other.
    let counts = snapshot::count_rows(&database, &opening.tables, snapshot).await?;
    let places = snapshot::places(&counts);
    // The tables as Debezium names them in its notifications: a HashSet's order while in
    // progress, the captured tables' order once a table is scanned.
    let ids: Vec<String> = opening.tables.iter().map(|t| t.to_string()).collect();
    let in_progress = outbox_router::java_hash_set_order(ids.clone()).join(",");
    let captured = ids.join(",");
    streamer.snapshot_metrics().snapshot_started(&ids);
    for (i, (table, place)) in opening.tables.iter().zip(places).enumerate() {
        let relation_id = snapshot::SNAPSHOT_RELATION_ID - i as u32;
        let mut rows = snapshot::open(
            &database,
            table,
            relation_id,
            snapshot,
            cdc.snapshot_fetch_size,
        )
        .await?;
        tracing::info!(%table, rows = rows.total, exported = snapshot.is_some(),
            "snapshot.mode=initial: relaying the rows already in the outbox");
        streamer
            .notify(
                "IN_PROGRESS",
                vec![
                    ("current_collection_in_progress", table.to_string()),
                    ("data_collections", in_progress.clone()),
                ],
            )
            .await?;
        taken = (rows.snapshot.clone(), rows.position);
        // Each table's rows are numbered from 0: one sequence per table.
        let name = match opening.tables.len() {
            1 => rows.snapshot.clone(),
            _ => rows.snapshot.clone().map(|s| format!("{s}/{table}")),
        };
        streamer
            .relay_snapshot(&mut rows, name, taken.1.unwrap_or(opening.start), place)
            .await?;
        streamer.snapshot_metrics().table_scanned(i, rows.total);
        streamer
            .notify(
                "TABLE_SCAN_COMPLETED",
                vec![
                    ("scanned_collection", table.to_string()),
                    ("data_collections", captured.clone()),
                    ("total_rows_scanned", rows.total.to_string()),
                    ("status", "SUCCEEDED".to_owned()),
                ],
            )
            .await?;
        rows.finish().await?;
    }
    // On the primary when capturing from a standby.
    let writer = crate::source::postgres::Database::for_writes(settings)
        .connect()
        .await?;
    snapshot::mark_complete(&writer, &opening.home, &cdc.slot, taken).await?;
    tracing::info!(
        tables = opening.tables.len(),
        "snapshot complete; streaming"
    );
    Ok(())
}

impl Replication<'_> {
    /// Claims the slot for this session, ending this process's own stale claim first (a
    /// half-open connection of an earlier session); another instance's claim means standing
    /// by, as for a slot another walsender streams.
    async fn claim_slot(&mut self, sql: &tokio_postgres::Client) -> Result<(), RelayError> {
        let slot = self.cdc.slot.as_str();
        let mut claimed = claim::claim(sql, slot).await?;
        if !claimed {
            let holder = claim::claimant(sql, slot).await;
            if let (Some(ours), Some(holder)) = (&self.claimed_by, &holder) {
                if ours == holder {
                    tracing::warn!(pid = ours.pid, "this relay's previous SQL connection still claims the slot on the server: ending it");
                    let _ = sql
                        .query_one("SELECT pg_terminate_backend($1)", &[&ours.pid])
                        .await;
                    for _ in 0..50 {
                        claimed = claim::claim(sql, slot).await?;
                        if claimed {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            if !claimed {
                return Err(RelayError::SlotBusy {
                    slot: slot.to_owned(),
                    detail: match holder {
                        Some(h) => format!(
                            "another outbox-relay instance claims it: server process {}, taking the initial snapshot \
                             or streaming",
                            h.pid
                        ),
                        None => "another outbox-relay instance claims it".into(),
                    },
                });
            }
        }
        self.claimed_by = claim::own_backend(sql).await;
        Ok(())
    }

    /// A previous session of this process died without the server noticing (a half-open
    /// connection): its walsender may still hold the slot until `wal_sender_timeout`. It is
    /// ours, so end it rather than stand by for it. Another instance's walsender is never
    /// touched (that is a standby's wait).
    async fn end_own_stale_walsender(&mut self, sql: &tokio_postgres::Client) {
        let Some(ours) = self.walsender.take() else {
            return;
        };
        let slot = self.cdc.slot.as_str();
        if slot_holder(sql, slot).await.as_ref() != Some(&ours) {
            return;
        }
        tracing::warn!(pid = ours.pid, "this relay's previous replication connection still holds the slot on the server: ending it");
        if let Err(e) = sql
            .query_one("SELECT pg_terminate_backend($1)", &[&ours.pid])
            .await
        {
            tracing::warn!(
                "could not end the stale walsender {}: {}",
                ours.pid,
                crate::error::server_message(&e)
            );
            return;
        }
        for _ in 0..50 {
            if slot_holder(sql, slot).await.as_ref() != Some(&ours) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// PostgreSQL invalidated the slot (for `reason`): with `--on-missing-slot reread` or
    /// `accept-gap` it is dropped and made again as for a slot that is gone (true); without,
    /// the session stops with the fix that matches the reason (`catalog::slot_problem`).
    async fn on_invalidated_slot(
        &mut self,
        sql: &tokio_postgres::Client,
        table: &TableName,
        reason: &str,
    ) -> Result<bool, RelayError> {
        let slot = &self.cdc.slot;
        match self.cdc.on_missing_slot {
            OnMissingSlot::Refuse => return Ok(false),
            OnMissingSlot::Reread => {
                tracing::warn!(%slot, reason, %table, "replication slot {slot} was invalidated ({reason}): dropping it, creating it again and relaying every row still in {table} (--on-missing-slot reread)");
                catalog::drop_slot(sql, slot).await?;
                snapshot::register_new_slot(sql, table, slot).await?;
            }
            OnMissingSlot::AcceptGap => {
                tracing::warn!(%slot, reason, "replication slot {slot} was invalidated ({reason}): dropping it and creating it again at the current position; events it lost are not relayed (--on-missing-slot accept-gap)");
                catalog::drop_slot(sql, slot).await?;
            }
        }
        // Positions of the old slot mean nothing for a new one.
        self.confirmations.forget();
        Ok(true)
    }

    /// The slot is missing: a first start creates it; a slot this relay streamed from
    /// before is gone, and creating a new one at the current position would skip every event
    /// written since — so that happens only when the user chose it.
    async fn on_missing_slot(
        &mut self,
        sql: &tokio_postgres::Client,
        table: &TableName,
    ) -> Result<(), RelayError> {
        let slot = &self.cdc.slot;
        let since = match slot_history::remembered(sql, &table.schema, slot).await? {
            Some(since) => since,
            // This process streamed from it (the history may be unwritable for the role, or
            // a failover brought a server without it).
            None if self.confirmations.last().is_some() => "this process started".to_owned(),
            None => return Ok(()),
        };
        // Positions of the old slot mean nothing for a new one.
        self.confirmations.forget();
        match self.cdc.on_missing_slot {
            OnMissingSlot::Refuse => Err(RelayError::misconfigured(format!(
                "replication slot {slot} is gone (dropped, or not carried over by a failover), but this relay has \
                 streamed from it since {since}: a new slot at the current position would skip every event written \
                 since the old one's last confirmed position. Choose, and start again with one of: \
                 --on-missing-slot reread (create the slot again and relay every row still in {table}; rows relayed \
                 before come again, consumers deduplicate by event id), or --on-missing-slot accept-gap (create it at \
                 the current position; events written in between are not relayed)"
            ))),
            OnMissingSlot::Reread => {
                tracing::warn!(%slot, %table, "replication slot {slot} is gone: creating it again and relaying every row still in {table} (--on-missing-slot reread)");
                snapshot::register_new_slot(sql, table, slot).await
            }
            OnMissingSlot::AcceptGap => {
                tracing::warn!(%slot, "replication slot {slot} is gone: creating it again at the current position; events written since the old slot's position are not relayed (--on-missing-slot accept-gap)");
                Ok(())
            }
        }
    }
}

impl Source for Replication<'_> {
    async fn session(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), RelayError> {
        // Every line a session logs names its slot (and publication).
        let span = tracing::info_span!("session", slot = %self.cdc.slot, publication = %self.cdc.publication);
        let result = if self.cdc.snapshot == crate::config::SnapshotMode::InitialOnly {
            self.initial_only(shutdown).instrument(span).await
        } else {
            self.run_session(shutdown).instrument(span).await
        };
        if let Err(e) = &result {
            if e.consequence() == crate::error::Consequence::StandBy {
                self.stood_by = true;
            }
        }
        result
    }

    fn resume_note(&self) -> String {
        format!(
            "reconnecting and resuming from the last confirmed position ({})",
            self.confirmations
                .last()
                .map_or_else(|| "the slot's".to_owned(), |l| l.to_string())
        )
    }
}

async fn heartbeat_loop(database: postgres::Database, heartbeat: Heartbeat) {
    let Some(query) = heartbeat.action_query else {
        return;
    };
    let mut client = None;
    let mut ticks = tokio::time::interval(heartbeat.interval.max(Duration::from_millis(10)));
    loop {
        ticks.tick().await;
        if client.is_none() {
            client = database.connect().await.ok();
        }
        if let Some(c) = &client {
            if let Err(e) = c.batch_execute(&query).await {
                tracing::warn!(
                    "heartbeat.action.query failed: {}",
                    crate::error::server_message(&e)
                );
                client = None;
            }
        }
    }
}
