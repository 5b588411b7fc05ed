//! Where a replication slot stands, and waiting for the relay's promise: once the slot's
//! `confirmed_flush_lsn` passes a position, every event committed before it is in Kafka.

use pgoutput::Lsn;
use std::time::{Duration, Instant};

/// `pg_current_wal_lsn()`: the end of what has been written so far.
pub async fn current_wal_lsn(db: &tokio_postgres::Client) -> Lsn {
    let row = db
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .expect("pg_current_wal_lsn()");
    Lsn::parse(row.get(0)).expect("PostgreSQL prints LSNs as X/Y")
}

/// The slot's confirmed position; `None` when the slot does not exist (or has none yet).
pub async fn confirmed_flush_lsn(db: &tokio_postgres::Client, slot: &str) -> Option<Lsn> {
    let row = db
        .query_opt(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .expect("reading pg_replication_slots")?;
    row.get::<_, Option<String>>(0).and_then(|s| Lsn::parse(&s))
}

/// Waits until `slot` confirms `target`; panics after `timeout` with `log()` (the relay's
/// log, typically). Returns how long it took.
pub async fn wait_confirmed(
    db: &tokio_postgres::Client,
    slot: &str,
    target: Lsn,
    timeout: Duration,
    log: impl Fn() -> String,
) -> Duration {
    let start = Instant::now();
    loop {
        let confirmed = confirmed_flush_lsn(db, slot).await;
        if confirmed.is_some_and(|c| c >= target) {
            return start.elapsed();
        }
        if start.elapsed() > timeout {
            panic!(
                "slot {slot} did not confirm {target} within {timeout:?} (at {confirmed:?}); {}; relay log:\n{}",
                slot_report(db, slot).await,
                log()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What PostgreSQL says of `slot` and the walsender streaming it, for a failure message:
/// whether the server sent what the relay did not confirm, or never sent it.
async fn slot_report(db: &tokio_postgres::Client, slot: &str) -> String {
    let row = db
        .query_opt(
            "SELECT s.active_pid::text, s.restart_lsn::text, r.state, r.sent_lsn::text, \
                    r.write_lsn::text, r.flush_lsn::text, pg_current_wal_lsn()::text \
             FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid \
             WHERE s.slot_name = $1",
            &[&slot],
        )
        .await;
    let row = match row {
        Ok(Some(row)) => row,
        Ok(None) => return "the slot does not exist".into(),
        Err(e) => return format!("reading pg_replication_slots: {e}"),
    };
    let names = [
        "active_pid",
        "restart_lsn",
        "walsender state",
        "sent_lsn",
        "write_lsn",
        "flush_lsn",
        "pg_current_wal_lsn",
    ];
    let fields: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let value: Option<String> = row.get(i);
            format!("{name} {}", value.as_deref().unwrap_or("-"))
        })
        .collect();
    format!("PostgreSQL: {}", fields.join(", "))
}

/// Everything written so far is delivered: reads `pg_current_wal_lsn()` and waits until the
/// slot confirms it. Returns that position.
pub async fn wait_delivered(
    db: &tokio_postgres::Client,
    slot: &str,
    timeout: Duration,
    log: impl Fn() -> String,
) -> Lsn {
    let target = current_wal_lsn(db).await;
    wait_confirmed(db, slot, target, timeout, log).await;
    target
}
