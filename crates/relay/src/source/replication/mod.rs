//! Source: the replication stream. One *session* is one replication connection (pgoutput,
//! through `pgwire-replication`) plus one producer: it makes sure the publication and the
//! slot exist, takes the initial snapshot when one is owed, streams from the slot's
//! position (or from what this process confirmed, if the slot has not recorded it yet), and
//! on a graceful stop records its final position on the slot. Any error ends the session;
//! the supervisor decides what follows from its kind. Nothing is confirmed that Kafka did not
//! acknowledge, so a new session resends what the last one had in flight: nothing is lost.

mod stream;
#[cfg(test)]
mod tests;

pub use stream::{Change, ChangeStream, Streamer, SHUTDOWN_DRAIN_TIMEOUT};

use super::postgres::{self, ConnectionInfo};
use super::{catalog, snapshot};
use crate::config::{CdcSettings, Heartbeat, Settings, SnapshotMode};
use crate::confirm::Confirmations;
use crate::deliver::{Deliver, KafkaProducer};
use crate::error::RelayError;
use crate::ops::metrics::Metrics;
use crate::secret::Secret;
use crate::supervisor;
use outbox_router::connect::ColumnFacts;
use outbox_router::{Router, TableName};
use pgoutput::Lsn;
use pgwire_replication::{Lsn as PgLsn, ReplicationClient, ReplicationConfig, ReplicationEvent};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::Instrument;

/// CDC mode, session after session.
pub struct Replication<'a> {
    settings: &'a Settings,
    cdc: &'a CdcSettings,
    conn: ConnectionInfo,
    metrics: Arc<Metrics>,
    confirmations: Confirmations,
    _heartbeat: Option<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<'a> Replication<'a> {
    pub fn new(
        settings: &'a Settings,
        cdc: &'a CdcSettings,
        metrics: Arc<Metrics>,
    ) -> Result<Self, RelayError> {
        let conn = ConnectionInfo::parse(settings.postgres_url.expose())
            .map_err(RelayError::Misconfiguration)?;
        let heartbeat = cdc
            .heartbeat
            .clone()
            .filter(|h| h.action_query.is_some())
            .map(|h| {
                AbortOnDrop(tokio::spawn(heartbeat_loop(
                    settings.postgres_url.clone(),
                    h,
                )))
            });
        Ok(Self {
            settings,
            cdc,
            conn,
            confirmations: Confirmations::new(metrics.clone()),
            metrics,
            _heartbeat: heartbeat,
        })
    }

    async fn run_session(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), RelayError> {
        let (settings, cdc) = (self.settings, self.cdc);
        let table = settings.table();
        let sql = postgres::connect(settings.postgres_url.expose()).await?;
        let initial_snapshot = cdc.snapshot == SnapshotMode::Initial;
        if initial_snapshot {
            snapshot::register_new_slot(&sql, table, &cdc.slot).await?;
        }
        let slot_position = catalog::ensure_publication_and_slot(
            &sql,
            table,
            &cdc.publication,
            cdc.publication_mode,
            &cdc.slot,
            &self.conn.database,
        )
        .await?;
        let snapshot_state = if initial_snapshot {
            snapshot::state(&sql, table, &cdc.slot).await?
        } else {
            snapshot::SnapshotState::None
        };
        let start = self.confirmations.resume_from(slot_position);
        let producer = KafkaProducer::new(&settings.kafka)?;
        let config = ReplicationConfig::new(
            self.conn.host.clone(),
            self.conn.user.clone(),
            self.conn.password.clone(),
            self.conn.database.clone(),
            cdc.slot.clone(),
            cdc.publication.as_str(),
        )
        .with_port(self.conn.port)
        .with_tls(self.conn.tls.clone())
        .with_start_lsn(PgLsn::from_u64(start.as_u64()))
        .with_status_interval(cdc.status_interval)
        .with_application_name("outbox-relay");
        let client = ReplicationClient::connect(config)
            .await
            .map_err(|e| RelayError::replication(e, &self.conn.display, &cdc.slot))?;
        tracing::info!(table = %table, start_lsn = %start, postgres = %self.conn.display, "streaming");
        self.metrics.streaming.set(1);
        self.metrics.active.set(1);
        let stream = PgStream {
            client,
            sql,
            display: self.conn.display.clone(),
            slot: cdc.slot.clone(),
        };
        let deliver = Deliver::new(
            producer,
            &settings.kafka.dead_letter_topic,
            self.metrics.clone(),
        );
        let mut streamer = Streamer::new(
            stream,
            deliver,
            Router::new(settings.router.clone()),
            start,
            &mut self.confirmations,
            self.metrics.clone(),
            table,
            settings.kafka.max_in_flight,
        );
        let result = match snapshot_state {
            snapshot::SnapshotState::Owed => {
                let rows = snapshot::read(settings.postgres_url.expose(), table).await;
                match rows {
                    Ok(rows) => {
                        tracing::info!(%table, rows = rows.rows.len(), "snapshot.mode=initial: relaying the rows already in the outbox");
                        let taken = rows.taken.clone();
                        let relayed = streamer.relay_snapshot(rows, start).await;
                        match relayed {
                            Ok(()) => snapshot::mark_complete(
                                &streamer.stream.sql,
                                table,
                                &cdc.slot,
                                &taken,
                            )
                            .await
                            .map(|()| {
                                tracing::info!(%table, "snapshot complete; streaming");
                                streamer.skip_snapshot(taken);
                            }),
                            Err(e) => Err(e),
                        }
                    }
                    Err(e) => Err(e),
                }
            }
            snapshot::SnapshotState::Done(taken) => {
                streamer.skip_snapshot(taken);
                Ok(())
            }
            snapshot::SnapshotState::None => Ok(()),
        };
        let result = match result {
            Ok(()) => streamer.stream(shutdown).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            streamer.stream.client.abort();
            return Err(e);
        }
        let final_lsn = streamer.finish().await;
        let counts = streamer.counts();
        let _ = streamer.stream.client.shutdown().await;
        // The replication protocol has no "final status" on close: record the position.
        catalog::advance_slot(settings.postgres_url.expose(), &cdc.slot, final_lsn).await?;
        tracing::info!(confirmed_lsn = %final_lsn, events = counts.events, dead_letters = counts.dead_letters, "stopped");
        Ok(())
    }
}

impl supervisor::Source for Replication<'_> {
    async fn session(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), RelayError> {
        // Every line a session logs names its slot (and publication).
        let span = tracing::info_span!("session", slot = %self.cdc.slot, publication = %self.cdc.publication);
        self.run_session(shutdown).instrument(span).await
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

/// The replication connection as a [`ChangeStream`], with a SQL connection for catalog
/// look-ups during the session.
pub struct PgStream {
    client: ReplicationClient,
    sql: tokio_postgres::Client,
    display: String,
    slot: String,
}

impl ChangeStream for PgStream {
    async fn recv(&mut self) -> Result<Option<Change>, RelayError> {
        let event = self
            .client
            .recv()
            .await
            .map_err(|e| RelayError::replication(e, &self.display, &self.slot))?;
        Ok(event.map(|event| match event {
            ReplicationEvent::Begin { xid, final_lsn, .. } => Change::Begin {
                xid,
                final_lsn: Lsn::from_u64(final_lsn.as_u64()),
            },
            ReplicationEvent::XLogData {
                wal_start,
                wal_end,
                data,
                ..
            } => Change::Data {
                wal_start: Lsn::from_u64(wal_start.as_u64()),
                wal_end: Lsn::from_u64(wal_end.as_u64()),
                data,
            },
            ReplicationEvent::Commit {
                end_lsn,
                commit_time_micros,
                ..
            } => Change::Commit {
                end_lsn: Lsn::from_u64(end_lsn.as_u64()),
                commit_time_micros,
            },
            ReplicationEvent::KeepAlive { wal_end, .. } => Change::KeepAlive {
                wal_end: Lsn::from_u64(wal_end.as_u64()),
            },
            // Logical decoding messages are not outbox rows.
            ReplicationEvent::Message { .. } | ReplicationEvent::StoppedAt { .. } => Change::Other,
        }))
    }

    fn confirm(&mut self, lsn: Lsn) {
        self.client
            .update_applied_lsn(PgLsn::from_u64(lsn.as_u64()));
    }

    async fn column_facts(&mut self, table: &TableName) -> Result<Vec<ColumnFacts>, RelayError> {
        catalog::column_facts(&self.sql, table).await
    }
}

/// `heartbeat.action.query` every `heartbeat.interval.ms`, as Debezium runs it (typically
/// an UPDATE of a heartbeat table, so that a database whose other tables are not published
/// still produces WAL the slot can move past). Failures are logged and retried.
async fn heartbeat_loop(url: Secret, heartbeat: Heartbeat) {
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
                tracing::warn!(
                    "heartbeat.action.query failed: {}",
                    crate::error::server_message(&e)
                );
                client = None;
            }
        }
    }
}
