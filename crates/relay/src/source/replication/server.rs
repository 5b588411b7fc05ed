//! The server a session reached and its processes: IDENTIFY_SYSTEM's identity and timeline
//! history, the walsender that streams to a connection or holds the slot, the slot made with an
//! exported snapshot, and the graceful stop's last position, recorded only where it belongs.

use super::*;

/// A server process, by pid and start time (a pid alone can be reused after a restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Walsender {
    pub(super) pid: i32,
    pub(super) backend_start: String,
}

/// The walsender that holds `slot` now, if any.
pub(super) async fn slot_holder(sql: &tokio_postgres::Client, slot: &str) -> Option<Walsender> {
    sql.query_opt(
        "SELECT a.pid, a.backend_start::text FROM pg_replication_slots s \
         JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = $1",
        &[&slot],
    )
    .await
    .ok()
    .flatten()
    .map(|r| Walsender {
        pid: r.get(0),
        backend_start: r.get::<_, Option<String>>(1).unwrap_or_default(),
    })
}

/// The walsender serving a gated session (SQL runs on a database replication connection).
pub(super) async fn walsender(client: &mut ReplicationClient) -> Option<Walsender> {
    let rows = client
        .simple_query(
            "SELECT pid, backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()",
        )
        .await
        .ok()?;
    let row = rows.first()?;
    let text = |i: usize| {
        row.get(i)
            .and_then(|v| v.as_ref())
            .and_then(|b| std::str::from_utf8(b).ok())
            .map(str::to_owned)
    };
    Some(Walsender {
        pid: text(0)?.parse().ok()?,
        backend_start: text(1)?,
    })
}

/// Which server a session reached (IDENTIFY_SYSTEM): a new system or timeline means a
/// failover or a restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Identity {
    pub(super) system_id: String,
    pub(super) timeline: u32,
    /// The timelines this one branched off, each with the position where it did
    /// (`TIMELINE_HISTORY`; empty on timeline 1).
    pub(super) history: Vec<(u32, Lsn)>,
}

/// A timeline history file: `parent<TAB>switchpoint<TAB>reason` lines.
pub(super) fn parse_timeline_history(content: &[u8]) -> Vec<(u32, Lsn)> {
    String::from_utf8_lossy(content)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let timeline = fields.next()?.parse().ok()?;
            let switched = fields.next()?.parse().ok()?;
            Some((timeline, switched))
        })
        .collect()
}

/// Whether a position this session confirmed to the server `session` may be recorded on the
/// server `reached` now: the same system on the same timeline. A promoted standby (a new
/// timeline) may have branched off before it, and its commits after the branch would be
/// skipped; a restored copy or another system knows nothing of it.
pub(super) fn final_position_holds_on(session: &Identity, reached: &Identity) -> bool {
    session.system_id == reached.system_id && session.timeline == reached.timeline
}

/// Records `lsn` on `slot` through the replication connection `client` (one server
/// process: the one IDENTIFY_SYSTEM answered for), once the walsender that streamed it let
/// go of it. Nothing to do when the slot is there already.
pub(super) async fn advance_slot_on(
    client: &mut ReplicationClient,
    slot: &str,
    lsn: Lsn,
) -> Result<(), pgwire_replication::PgWireError> {
    use postgres_protocol::escape::escape_literal;
    let state = format!(
        "SELECT active_pid IS NOT NULL, coalesce(confirmed_flush_lsn >= '{lsn}', false) FROM pg_replication_slots \
         WHERE slot_name = {}",
        escape_literal(slot)
    );
    let mut last_error = None;
    for _ in 0..50 {
        let rows = match client.simple_query(&state).await {
            Ok(rows) => rows,
            Err(e) => {
                last_error = Some(e);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let flag = |i: usize| {
            rows.first()
                .and_then(|r| r.get(i).cloned().flatten())
                .is_some_and(|v| v.as_ref() == b"t")
        };
        if rows.is_empty() || flag(1) {
            // Dropped (the next session says so), or recorded with the last status update.
            return Ok(());
        }
        if !flag(0) {
            // Taken again meanwhile, or its walsender still exiting: tried again.
            match client
                .simple_query(&format!(
                    "SELECT pg_replication_slot_advance({}, '{lsn}')",
                    escape_literal(slot)
                ))
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) => last_error = Some(e),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some(e) = last_error {
        return Err(e);
    }
    tracing::warn!(%slot, final_lsn = %lsn, "the slot stayed active: the final position is not recorded; the next start resumes from the slot's own");
    Ok(())
}

/// `CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')` on a gated session: returns the
/// snapshot's name and the slot's consistent point. The snapshot stays importable until the
/// session runs its next command: the next one must be START_REPLICATION, after the rows
/// are read.
pub(super) async fn create_slot_exporting_snapshot(
    client: &mut ReplicationClient,
    slot: &str,
    failover: bool,
) -> Result<(String, Lsn), pgwire_replication::PgWireError> {
    use pgwire_replication::PgWireError;
    // The slot name is validated to [a-z0-9_] in config.
    let rows = client
        .simple_query(&format!(
            "CREATE_REPLICATION_SLOT \"{slot}\" LOGICAL pgoutput (SNAPSHOT 'export'{})",
            if failover { ", FAILOVER true" } else { "" }
        ))
        .await?;
    let row = rows
        .into_iter()
        .next()
        .ok_or_else(|| PgWireError::Protocol("CREATE_REPLICATION_SLOT returned no row".into()))?;
    let text = |i: usize| {
        row.get(i)
            .and_then(|v| v.as_ref())
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(|| {
                PgWireError::Protocol(format!("CREATE_REPLICATION_SLOT: column {i} is missing"))
            })
    };
    let consistent_point = Lsn::parse(&text(1)?).ok_or_else(|| {
        PgWireError::Protocol("CREATE_REPLICATION_SLOT: unreadable consistent_point".into())
    })?;
    Ok((text(2)?, consistent_point))
}
