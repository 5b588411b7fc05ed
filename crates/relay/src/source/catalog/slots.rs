//! The replication slot: its state, made when missing, checked for what keeps it from serving
//! the relay, advanced, dropped.

use super::{catalog_error, server_version_num};
use crate::error::{Problem, RelayError};
use pgoutput::Lsn;
use postgres_protocol::escape::escape_literal;

/// State of the replication slot, as `pg_replication_slots` reports it.
#[derive(Debug, Clone)]
pub struct SlotState {
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub active_pid: Option<i32>,
    pub confirmed_flush_lsn: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost` (invalidated by max_slot_wal_keep_size).
    pub wal_status: Option<String>,
    /// Why PostgreSQL invalidated the slot (17+: `wal_removed`, `rows_removed`,
    /// `wal_level_insufficient`, 18's `idle_timeout`; 16: `wal_removed` from `wal_status`, or
    /// `conflicting` on a standby, which covers the two standby reasons).
    pub invalidation_reason: Option<String>,
    /// A failover slot, synchronized to standbys (17+; `None` before).
    pub failover: Option<bool>,
}

impl SlotState {
    /// Why the slot can no longer stream, if PostgreSQL invalidated it: its
    /// `invalidation_reason` (17+), else what older servers show (`wal_status` lost: WAL
    /// removed; 16's `conflicting`: rows removed on a standby).
    pub fn invalidation(&self) -> Option<&str> {
        self.invalidation_reason
            .as_deref()
            .or((self.wal_status.as_deref() == Some("lost")).then_some("wal_removed"))
    }
}

pub async fn slot_state(
    client: &tokio_postgres::Client,
    slot: &str,
) -> Result<Option<SlotState>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            // invalidation_reason (17+) and conflicting (16) read through jsonb: NULL where the
            // server has no such column.
            "SELECT plugin::text, database::text, active_pid, confirmed_flush_lsn::text, wal_status, \
                    COALESCE(to_jsonb(s) ->> 'invalidation_reason', \
                             CASE WHEN wal_status = 'lost' THEN 'wal_removed' \
                                  WHEN to_jsonb(s) ->> 'conflicting' = 'true' THEN 'conflicting' END), \
                    (to_jsonb(s) ->> 'failover')::boolean \
             FROM pg_replication_slots s WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row.map(|r| SlotState {
        plugin: r.get(0),
        database: r.get(1),
        active_pid: r.get(2),
        confirmed_flush_lsn: r.get::<_, Option<String>>(3).and_then(|l| Lsn::parse(&l)),
        wal_status: r.get(4),
        invalidation_reason: r.get(5),
        failover: r.get(6),
    }))
}

/// Creates the slot when missing (no snapshot) and checks an existing one. Returns its
/// confirmed position, where streaming resumes.
pub async fn ensure_slot(
    client: &tokio_postgres::Client,
    slot: &str,
    database: &str,
    failover: bool,
) -> Result<Lsn, RelayError> {
    let state = slot_state(client, slot)
        .await
        .map_err(catalog_error("reading the catalog"))?;
    let state = match state {
        Some(state) => state,
        None => {
            // PostgreSQL 17: (name, plugin, temporary, twophase, failover).
            let sql = format!(
                "SELECT pg_create_logical_replication_slot({}, 'pgoutput'{})",
                escape_literal(slot),
                if failover { ", false, false, true" } else { "" }
            );
            match client.batch_execute(&sql).await {
                Ok(()) => {
                    tracing::info!(slot, "created replication slot")
                }
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_OBJECT) => {}
                Err(e)
                    if e.code()
                        == Some(&tokio_postgres::error::SqlState::CONFIGURATION_LIMIT_EXCEEDED) =>
                {
                    return Err(no_free_slot().into())
                }
                Err(e) => {
                    return Err(RelayError::postgres(
                        &format!("could not create replication slot {slot}"),
                        e,
                        || {
                            "the user needs the REPLICATION attribute: ALTER ROLE <user> REPLICATION;".into()
                        },
                    ))
                }
            }
            slot_state(client, slot)
                .await
                .map_err(catalog_error("reading the catalog"))?
                .ok_or_else(|| {
                    RelayError::ConnectionLost(anyhow::anyhow!(
                        "slot {slot} vanished right after creation"
                    ))
                })?
        }
    };
    if let Some(problem) = slot_problem(&state, slot, database) {
        return Err(problem.into());
    }
    Ok(state.confirmed_flush_lsn.unwrap_or(Lsn::ZERO))
}

/// What keeps the existing slot `slot` (in `state`) from serving the relay on `database`.
pub fn slot_problem(state: &SlotState, slot: &str, database: &str) -> Option<Problem> {
    if state.plugin.as_deref() != Some("pgoutput") {
        return Some(Problem::new(
            format!(
                "replication slot {slot} uses plugin {:?}, outbox-relay needs pgoutput",
                state.plugin.as_deref().unwrap_or_default()
            ),
            format!(
                "drop it (`SELECT pg_drop_replication_slot({});`) or choose another --slot",
                escape_literal(slot)
            ),
        ));
    }
    if state.database.as_deref() != Some(database) {
        return Some(Problem::new(
            format!(
                "replication slot {slot} belongs to database {:?}, not {database:?}",
                state.database.as_deref().unwrap_or_default()
            ),
            "choose another --slot",
        ));
    }
    state
        .invalidation()
        .map(|reason| invalidated_slot_problem(slot, reason))
}

/// Every replication slot is in use.
pub fn no_free_slot() -> Problem {
    Problem::new(
        "no free replication slot: every slot is in use (max_replication_slots)",
        "drop an unused slot or raise max_replication_slots (needs a restart)",
    )
}

/// Moves the slot's confirmed position to `lsn` after streaming stopped. The replication
/// protocol has no "final status" on close, so a graceful shutdown records its last
/// acknowledged position this way. Retries while the walsender is still exiting.
pub async fn advance_slot(
    database: &crate::source::postgres::Database,
    slot: &str,
    lsn: Lsn,
) -> Result<(), RelayError> {
    let client = database.connect().await?;
    let mut last_error = None;
    for _ in 0..50 {
        let current = slot_state(&client, slot)
            .await
            .map_err(catalog_error("reading the catalog"))?;
        match current {
            Some(s) if s.confirmed_flush_lsn.unwrap_or(Lsn::ZERO) >= lsn => return Ok(()),
            Some(s) if s.active_pid.is_some() => {}
            Some(_) => {
                let sql = format!(
                    "SELECT pg_replication_slot_advance({}, '{}')",
                    escape_literal(slot),
                    lsn
                );
                match client.batch_execute(&sql).await {
                    Ok(()) => return Ok(()),
                    Err(e) => last_error = Some(e.to_string()),
                }
            }
            None => {
                return Err(RelayError::Misconfiguration(anyhow::anyhow!(
                    "replication slot {slot} was dropped"
                )))
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(RelayError::ConnectionLost(anyhow::anyhow!(
        "could not record the final position {} on slot {slot}: {}",
        lsn,
        last_error.unwrap_or_else(|| "the slot stayed active".into())
    )))
}

/// PostgreSQL invalidated the slot for `reason`: it can never stream again. Retrying cannot
/// help; a person must choose (or `--on-missing-slot` chose). The fix matches the reason.
fn invalidated_slot_problem(slot: &str, reason: &str) -> Problem {
    let (why, prevent) = match reason {
        "wal_removed" => (
            "it exceeded max_slot_wal_keep_size: PostgreSQL removed WAL it had not streamed, so events written \
             while it fell behind cannot be relayed from it",
            "raise max_slot_wal_keep_size (or set it to -1) to keep this from happening again",
        ),
        "rows_removed" => (
            "it lives on a standby whose primary removed catalog rows the slot still needed",
            "turn on hot_standby_feedback on the standby and connect it to the primary through a physical slot \
             (primary_slot_name), so the primary keeps those rows",
        ),
        "wal_level_insufficient" => (
            "the primary's wal_level was lowered below logical",
            "set wal_level = logical on the primary again (a restart), then create the slot anew",
        ),
        "conflicting" => (
            "it lives on a standby and conflicted with recovery: the primary removed catalog rows it needed, or its \
             wal_level was lowered below logical",
            "turn on hot_standby_feedback on the standby with a physical slot to the primary (primary_slot_name), and \
             keep wal_level = logical on the primary",
        ),
        "idle_timeout" => (
            "no client streamed from it for longer than idle_replication_slot_timeout",
            "raise idle_replication_slot_timeout (0 turns it off), or keep a relay (or a standby relay) running on \
             the slot",
        ),
        _ => (
            "PostgreSQL gave this reason",
            "see pg_replication_slots.invalidation_reason in PostgreSQL's documentation",
        ),
    };
    Problem::new(
        format!("replication slot {slot} was invalidated ({reason}): {why}"),
        format!(
            "events still in the outbox table can be re-read: start with --on-missing-slot reread (the relay drops \
             the slot, creates it again and relays every row still in the outbox table; rows relayed before come \
             again), or accept the gap with --on-missing-slot accept-gap; by hand: `SELECT \
             pg_drop_replication_slot({});` and start with snapshot.mode=initial. {prevent}",
            escape_literal(slot)
        ),
    )
}

/// `--slot-failover` needs failover slots: PostgreSQL 17 or later.
pub async fn require_failover_slots(client: &tokio_postgres::Client) -> Result<(), RelayError> {
    let version = server_version_num(client).await?;
    if version < 170_000 {
        return Err(RelayError::misconfigured(format!(
            "slot-failover: PostgreSQL {}.{} has no failover slots (they came with PostgreSQL 17); upgrade the \
             server, or leave --slot-failover (slot.failover) off and plan for a slot that a failover does not carry \
             over (--on-missing-slot)",
            version / 10_000,
            version % 100
        )));
    }
    Ok(())
}

/// Drops `slot` (invalidated; `--on-missing-slot` chose to make it again).
pub async fn drop_slot(client: &tokio_postgres::Client, slot: &str) -> Result<(), RelayError> {
    client
        .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
        .await
        .map_err(catalog_error("dropping the invalidated replication slot"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(plugin: &str, database: &str, wal_status: &str) -> SlotState {
        SlotState {
            plugin: Some(plugin.into()),
            database: Some(database.into()),
            active_pid: None,
            confirmed_flush_lsn: None,
            wal_status: Some(wal_status.into()),
            invalidation_reason: None,
            failover: None,
        }
    }

    #[test]
    fn a_slot_serves_the_relay_only_with_pgoutput_on_its_database_and_its_wal_kept() {
        assert_eq!(
            slot_problem(&state("pgoutput", "app", "reserved"), "s", "app"),
            None
        );
        let plugin = slot_problem(&state("wal2json", "app", "reserved"), "s", "app").unwrap();
        assert!(plugin.what.contains("wal2json"), "{plugin}");
        assert!(
            plugin.fix.contains("pg_drop_replication_slot('s')"),
            "{plugin}"
        );
        let database = slot_problem(&state("pgoutput", "other", "reserved"), "s", "app").unwrap();
        assert_eq!(database.fix, "choose another --slot");
        let lost = slot_problem(&state("pgoutput", "app", "lost"), "s", "app").unwrap();
        assert!(lost.what.contains("invalidated (wal_removed)"), "{lost}");
        assert!(lost.fix.contains("max_slot_wal_keep_size"), "{lost}");
        assert!(lost.fix.contains("--on-missing-slot reread"), "{lost}");
        // Each reason PostgreSQL 17 and 18 give has its own fix.
        for (reason, fix) in [
            ("rows_removed", "hot_standby_feedback"),
            ("wal_level_insufficient", "wal_level = logical"),
            ("idle_timeout", "idle_replication_slot_timeout"),
        ] {
            let invalidated = SlotState {
                invalidation_reason: Some(reason.into()),
                ..state("pgoutput", "app", "lost")
            };
            let problem = slot_problem(&invalidated, "s", "app").unwrap();
            assert!(problem.what.contains(reason), "{problem}");
            assert!(problem.fix.contains(fix), "{problem}");
            assert!(!problem.fix.contains("max_slot_wal_keep_size"), "{problem}");
        }
        // run stops with the same problem, both parts typed (check and validate read them).
        assert_eq!(RelayError::from(lost.clone()).problem(), Some(lost));
    }
}
