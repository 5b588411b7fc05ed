//! The replication connection as the stream loop's [`ChangeStream`]: changes in, positions
//! confirmed out, a liveness probe after a silence, and catalog look-ups on a SQL connection.

use super::*;

/// How long the liveness probe waits for PostgreSQL's answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The replication connection as a [`ChangeStream`], with a SQL connection for catalog
/// look-ups during the session.
pub struct PgStream {
    pub(super) client: ReplicationClient,
    /// Where the replication worker says whether the stream is behind.
    pub(super) lag: Arc<ReplicationMetrics>,
    pub(super) sql: tokio_postgres::Client,
    pub(super) database: postgres::Database,
    pub(super) display: String,
    pub(super) slot: String,
    /// The server process that streams to this connection.
    pub(super) walsender: Option<Walsender>,
}

impl ChangeStream for PgStream {
    fn catching_up(&self) -> bool {
        self.lag.catching_up()
    }

    async fn recv(&mut self) -> Result<Option<Change>, RelayError> {
        let event = self
            .client
            .recv()
            .await
            .map_err(|e| RelayError::replication(e, &self.display, &self.slot))?;
        Ok(event.map(|event| match event {
            ReplicationEvent::Begin {
                final_lsn,
                xid,
                commit_time_micros,
            } => Change::Begin {
                commit: Lsn::from_u64(final_lsn.as_u64()),
                xid,
                commit_time_micros,
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
            ReplicationEvent::Message {
                transactional,
                lsn,
                prefix,
                content,
            } => Change::Message {
                lsn: Lsn::from_u64(lsn.as_u64()),
                transactional,
                prefix,
                content,
            },
            ReplicationEvent::StoppedAt { .. } => Change::Other,
        }))
    }

    fn confirm(&mut self, lsn: Lsn) {
        self.client
            .update_applied_lsn(PgLsn::from_u64(lsn.as_u64()));
    }

    /// The slot must still be held by this connection's walsender, and PostgreSQL must
    /// answer within [`PROBE_TIMEOUT`] (over the session's SQL connection, which shares the
    /// replication connection's path).
    async fn probe(&mut self) -> Result<(), RelayError> {
        // The SQL connection may have been closed while idle (idle_session_timeout, a
        // pooler): one fresh connection before judging the replication connection.
        if self.sql.is_closed() {
            if let Ok(Ok(fresh)) =
                tokio::time::timeout(PROBE_TIMEOUT, self.database.connect()).await
            {
                self.sql = fresh;
            }
        }
        let query = catalog::slot_state(&self.sql, &self.slot);
        let state = match tokio::time::timeout(PROBE_TIMEOUT, query).await {
            Err(_) => {
                return Err(RelayError::ConnectionLost(anyhow::anyhow!(
                    "no data for {SILENCE_BEFORE_PROBE:?} and PostgreSQL at {} did not answer a liveness check within \
                     {PROBE_TIMEOUT:?}: the connection is presumed dead",
                    self.display
                )))
            }
            Ok(result) => result.map_err(|e| {
                RelayError::postgres("checking the replication connection", e, || {
                    "the role needs the REPLICATION attribute".into()
                })
            })?,
        };
        let holder = state.and_then(|s| s.active_pid);
        let ours = self.walsender.as_ref().map(|w| w.pid);
        if ours.is_some() && holder != ours {
            return Err(RelayError::ConnectionLost(anyhow::anyhow!(
                "the server no longer streams slot {} to this relay (held by {holder:?}, ours was {ours:?})",
                self.slot
            )));
        }
        Ok(())
    }

    async fn column_facts(&mut self, table: &TableName) -> Result<Vec<ColumnFacts>, RelayError> {
        catalog::column_facts(&self.sql, table).await
    }
}
