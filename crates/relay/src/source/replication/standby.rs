//! Capture from a hot standby (PostgreSQL 16+): whether it may be done here, and the nudge that
//! makes the primary log its running transactions, so that a slot made on the standby becomes
//! consistent within a second.

use super::*;

impl Replication<'_> {
    /// Logical decoding on a standby: PostgreSQL 16+, and no failover slot (made on the
    /// primary, synchronized to standbys, never on a standby).
    pub(super) async fn may_capture_from_standby(
        &self,
        sql: &tokio_postgres::Client,
    ) -> Result<(), RelayError> {
        let major = crate::source::postgres::check_server_version(sql).await?;
        if major < 16 {
            return Err(RelayError::misconfigured(format!(
                "{} is a standby (in recovery) of PostgreSQL {major}: logical decoding on a standby needs PostgreSQL 16+; \
                 point --postgres-url at the primary (or list both with target_session_attrs=read-write)",
                self.conn.display
            )));
        }
        if self.cdc.slot_failover {
            return Err(RelayError::misconfigured(
                "--slot-failover makes a failover slot on the primary, and --postgres-url names a standby: capture \
                 from the primary (a failover slot is synchronized to standbys), or leave --slot-failover out",
            ));
        }
        tracing::info!(postgres = %self.conn.display, primary = self.settings.primary_url.is_some(),
            "capturing from a standby: the slot lives here{}",
            if self.settings.primary_url.is_some() { "; writes go to --primary-url" } else { "; without --primary-url, what needs writes is refused" });
        Ok(())
    }
}

/// `heartbeat.action.query` every `heartbeat.interval.ms`, as Debezium runs it (typically
/// an UPDATE of a heartbeat table, so that a database whose other tables are not published
/// still produces WAL the slot can move past). Failures are logged and retried.
/// While a slot is made on a standby: asks the primary every second to log its running
/// transactions (`pg_log_standby_snapshot()`), which the standby's slot creation waits for.
pub(super) async fn log_standby_snapshots(primary: postgres::Database) {
    let Ok(client) = primary.connect().await else {
        return;
    };
    loop {
        if let Err(e) = client
            .batch_execute("SELECT pg_log_standby_snapshot()")
            .await
        {
            tracing::debug!("pg_log_standby_snapshot() on the primary: {e}");
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
