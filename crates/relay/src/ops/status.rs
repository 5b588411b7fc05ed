//! `status`: where the slot is and how far behind the server it is.

use crate::config::validate_slot_name;
use crate::error::RelayError;
use crate::source::postgres;

/// `status`: where the slot is and how far behind the server it is.
pub async fn status(url: &str, slot: &str) -> Result<bool, RelayError> {
    validate_slot_name(slot).map_err(|m| RelayError::misconfigured(format!("slot: {m}")))?;
    let client = postgres::connect(url).await?;
    let row = client
        .query_opt(
            "SELECT plugin::text, database::text, active_pid, confirmed_flush_lsn::text, pg_current_wal_lsn()::text, \
                    (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, wal_status \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(|e| RelayError::postgres("reading the replication slots", e, || "the role needs the REPLICATION attribute or pg_monitor".into()))?;
    let Some(r) = row else {
        println!("slot {slot} does not exist; `outbox-relay run` creates it (or see `outbox-relay setup-sql`)");
        return Ok(false);
    };
    let active: Option<i32> = r.get(2);
    println!("slot            {slot}");
    println!(
        "plugin          {}",
        r.get::<_, Option<String>>(0).unwrap_or_default()
    );
    println!(
        "database        {}",
        r.get::<_, Option<String>>(1).unwrap_or_default()
    );
    println!(
        "active          {}",
        active
            .map(|p| format!("yes (pid {p})"))
            .unwrap_or_else(|| "no".into())
    );
    println!(
        "confirmed LSN   {}",
        r.get::<_, Option<String>>(3).unwrap_or_default()
    );
    println!("server WAL LSN  {}", r.get::<_, String>(4));
    println!(
        "lag             {} bytes",
        r.get::<_, Option<i64>>(5).unwrap_or(0)
    );
    println!(
        "WAL status      {}",
        r.get::<_, Option<String>>(6).unwrap_or_default()
    );
    Ok(true)
}
