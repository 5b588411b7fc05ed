//! `snapshot.mode=initial_only` (`--snapshot-mode initial-only`): the outbox rows already there
//! are relayed once and nothing is streamed, as Debezium's `initial_only`: no replication slot
//! is created, and the relay stays up, idle, until stopped (as Debezium's task stays RUNNING).
//! The snapshot's marker (`outbox_relay_snapshots`, under the slot's name) says it was taken:
//! a later start takes none again.

use super::stream::{Change, ChangeStream, Streamer};
use super::{relay_snapshot, Opening, Replication};
use crate::deliver::{Deliver, KafkaProducer};
use crate::error::RelayError;
use crate::source::{catalog, snapshot};
use outbox_router::connect::ColumnFacts;
use outbox_router::{Router, TableName};
use pgoutput::Lsn;
use tokio::sync::watch;

/// No stream: the snapshot's rows only.
struct NoStream {
    sql: tokio_postgres::Client,
}

impl ChangeStream for NoStream {
    async fn recv(&mut self) -> Result<Option<Change>, RelayError> {
        std::future::pending().await
    }

    fn confirm(&mut self, _lsn: Lsn) {}

    async fn probe(&mut self) -> Result<(), RelayError> {
        Ok(())
    }

    async fn column_facts(&mut self, table: &TableName) -> Result<Vec<ColumnFacts>, RelayError> {
        catalog::column_facts(&self.sql, table).await
    }
}

impl Replication<'_> {
    /// The snapshot once (unless its marker says it was taken), then idle until shutdown.
    pub(super) async fn initial_only(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), RelayError> {
        let (settings, cdc) = (self.settings, self.cdc);
        let sql = crate::source::postgres::Database::for_writes(settings)
            .connect()
            .await?;
        let tables = catalog::outbox_tables(&sql, &settings.router).await?;
        let Some(home) = tables.first().cloned() else {
            return Err(RelayError::misconfigured(
                "snapshot.mode=initial_only reads outbox tables; none is configured",
            ));
        };
        let state = snapshot::state(&sql, &home, &cdc.slot).await?;
        if state != snapshot::SnapshotState::Done {
            snapshot::register_new_slot(&sql, &home, &cdc.slot).await?;
            let producer = KafkaProducer::new(&settings.kafka)?;
            let deliver = Deliver::new(
                producer,
                &settings.kafka.dead_letter_topic,
                self.metrics.clone(),
                self.written.clone(),
            );
            let facts = crate::source::postgres::Database::of(settings)
                .connect()
                .await?;
            let mut streamer = Streamer::new(
                NoStream { sql: facts },
                deliver,
                Router::new(settings.router.clone()),
                Lsn::ZERO,
                &mut self.confirmations,
                self.metrics.clone(),
                &home,
                settings.kafka.max_in_flight,
            )
            .max_in_flight_bytes(settings.kafka.max_in_flight_bytes);
            let opening = Opening {
                tables,
                home: home.clone(),
                start: Lsn::ZERO,
                snapshot_owed: true,
                exported: None,
                cleaning: None,
                canary: false,
                incremental: None,
            };
            self.metrics.active.set(1);
            relay_snapshot(&mut streamer, &opening, settings, cdc).await?;
            streamer.finish().await;
        } else {
            tracing::info!(slot = %cdc.slot, "snapshot.mode=initial_only: the snapshot was taken before");
        }
        tracing::info!("Streaming is disabled for snapshot mode initial_only: idle until stopped");
        self.metrics.streaming.set(0);
        while !crate::source::session::stop_requested(shutdown) {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
        Ok(())
    }
}
