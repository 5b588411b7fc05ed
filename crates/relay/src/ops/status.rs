//! `status`: where the slot is and how far behind the server it is.

use crate::config::validate_slot_name;
use crate::error::RelayError;
use crate::source::postgres;

/// What `status` found.
#[derive(Debug)]
pub enum SlotStatus {
    Missing,
    Found(serde_json::Value),
}

/// `status`: the slot, as text or (`json`) one JSON object. `Ok(false)`: no such slot.
pub async fn status(url: &str, slot: &str, json: bool) -> Result<bool, RelayError> {
    let found = read(url, slot).await?;
    match (found, json) {
        (SlotStatus::Missing, false) => {
            println!("slot {slot} does not exist; `outbox-relay run` creates it (or see `outbox-relay setup-sql`)");
            Ok(false)
        }
        (SlotStatus::Missing, true) => {
            println!("{}", serde_json::json!({ "slot": slot, "exists": false }));
            Ok(false)
        }
        (SlotStatus::Found(object), true) => {
            println!("{object}");
            Ok(true)
        }
        (SlotStatus::Found(o), false) => {
            let text = |key: &str| match &o[key] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            println!("slot            {slot}");
            println!("plugin          {}", text("plugin"));
            println!("database        {}", text("database"));
            match o["active_pid"].as_i64() {
                Some(pid) => println!("active          yes (pid {pid})"),
                None => println!("active          no"),
            }
            println!("confirmed LSN   {}", text("confirmed_lsn"));
            println!("server WAL LSN  {}", text("server_wal_lsn"));
            println!(
                "lag             {} bytes",
                o["lag_bytes"].as_i64().unwrap_or(0)
            );
            println!("WAL status      {}", text("wal_status"));
            match o["failover_ready"].as_bool() {
                Some(true) => println!("failover        the slot survives a failover"),
                _ => {
                    println!("failover        the slot would not survive a failover:");
                    for missing in o["failover_missing"].as_array().into_iter().flatten() {
                        println!("                - {}", missing.as_str().unwrap_or_default());
                    }
                }
            }
            Ok(true)
        }
    }
}

/// Reads the slot's row.
pub async fn read(url: &str, slot: &str) -> Result<SlotStatus, RelayError> {
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
        return Ok(SlotStatus::Missing);
    };
    // Whether it survives a failover (PostgreSQL 17+; what is missing otherwise).
    let (failover_ready, failover_missing) = match crate::source::survival::assess(url, slot).await
    {
        Ok(s) => (s.survives(), s.missing()),
        Err(e) => (false, vec![format!("cannot tell: {e}")]),
    };
    Ok(SlotStatus::Found(serde_json::json!({
        "slot": slot,
        "exists": true,
        "plugin": r.get::<_, Option<String>>(0),
        "database": r.get::<_, Option<String>>(1),
        "active": r.get::<_, Option<i32>>(2).is_some(),
        "active_pid": r.get::<_, Option<i32>>(2),
        "confirmed_lsn": r.get::<_, Option<String>>(3),
        "server_wal_lsn": r.get::<_, String>(4),
        "lag_bytes": r.get::<_, Option<i64>>(5),
        "wal_status": r.get::<_, Option<String>>(6),
        "failover_ready": failover_ready,
        "failover_missing": failover_missing,
    })))
}
