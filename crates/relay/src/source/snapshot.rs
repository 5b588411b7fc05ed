//! `snapshot.mode=initial`: the outbox rows that exist when the slot is created are relayed
//! once, before streaming, and exactly once with respect to the stream.
//!
//! Consistency: the slot is created first (its consistent point C), then the rows are read
//! in a REPEATABLE READ snapshot S taken after C. A transaction committed between C and S
//! is in both; while streaming, a transaction whose commit LSN is at or before S's WAL
//! position and whose xid S sees is skipped: its rows were in the snapshot.
//!
//! Durability: a marker row (`<schema>.outbox_relay_snapshots`) is written *before* the
//! slot is created and marked complete only after Kafka acknowledged every snapshot row.
//! A crash anywhere in between finds an incomplete marker on restart and takes the
//! snapshot again (duplicates, never loss). A slot that already exists without a marker
//! (Debezium's slot, or one created with `no_data`) is never snapshotted: switching from
//! Debezium does not replay history.

use super::sql_rows;
use crate::error::RelayError;
use outbox_router::TableName;
use pgoutput::Lsn;
use pgoutput::{Insert, Relation};
use postgres_protocol::escape::{escape_identifier, escape_literal};

const MARKER_TABLE: &str = "outbox_relay_snapshots";

/// The relation id snapshot rows are routed under (PostgreSQL OIDs never reach it).
pub const SNAPSHOT_RELATION_ID: u32 = u32::MAX;

fn marker_table(table: &TableName) -> String {
    format!(
        "{}.{}",
        escape_identifier(&table.schema),
        escape_identifier(MARKER_TABLE)
    )
}

/// A failed marker statement; see [`RelayError::query_failed`].
fn sql_error<'a>(
    context: &'a str,
    table: &'a TableName,
) -> impl FnOnce(tokio_postgres::Error) -> RelayError + 'a {
    move |e| {
        RelayError::postgres(context, e, || {
            format!(
                "snapshot.mode=initial keeps its progress in {}.{MARKER_TABLE}: grant CREATE on schema {} \
                 (or create the table: `CREATE TABLE {} (slot_name text PRIMARY KEY, snapshot text, snapshot_lsn text, completed boolean NOT NULL DEFAULT false)`), \
                 or use snapshot.mode=no_data",
                table.schema,
                escape_identifier(&table.schema),
                marker_table(table)
            )
        })
    }
}

/// Before the slot is created: record that this slot's snapshot is owed.
pub async fn register_new_slot(
    sql: &tokio_postgres::Client,
    table: &TableName,
    slot: &str,
) -> Result<(), RelayError> {
    let exists = super::catalog::slot_state(sql, slot)
        .await
        .map_err(sql_error("reading the replication slots", table))?
        .is_some();
    if exists {
        return Ok(());
    }
    sql.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {} (slot_name text PRIMARY KEY, snapshot text, snapshot_lsn text, \
         completed boolean NOT NULL DEFAULT false)",
        marker_table(table)
    ))
    .await
    .map_err(sql_error("creating the snapshot marker table", table))?;
    sql.batch_execute(&format!(
        "INSERT INTO {} (slot_name) VALUES ({}) ON CONFLICT (slot_name) DO UPDATE SET completed = false, snapshot = NULL",
        marker_table(table),
        escape_literal(slot)
    ))
    .await
    .map_err(sql_error("recording the owed snapshot", table))?;
    Ok(())
}

/// What the marker says once the slot exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotState {
    /// No marker: nothing to do.
    None,
    /// The snapshot is owed (or was interrupted): take it now.
    Owed,
    /// Taken and acknowledged; skip the stream's copies of its transactions.
    Done(TakenSnapshot),
}

pub async fn state(
    sql: &tokio_postgres::Client,
    table: &TableName,
    slot: &str,
) -> Result<SnapshotState, RelayError> {
    let marker = TableName {
        schema: table.schema.clone(),
        name: MARKER_TABLE.to_owned(),
    };
    if !super::catalog::table_exists(sql, &marker).await? {
        return Ok(SnapshotState::None);
    }
    let row = sql
        .query_opt(
            &format!(
                "SELECT completed, snapshot, snapshot_lsn FROM {} WHERE slot_name = $1",
                marker_table(table)
            ),
            &[&slot],
        )
        .await
        .map_err(sql_error("reading the snapshot marker", table))?;
    Ok(match row {
        None => SnapshotState::None,
        Some(r) if !r.get::<_, bool>(0) => SnapshotState::Owed,
        Some(r) => match (r.get::<_, Option<String>>(1), r.get::<_, Option<String>>(2)) {
            (Some(snapshot), Some(lsn)) => SnapshotState::Done(
                TakenSnapshot::parse(&snapshot, &lsn).map_err(RelayError::Misconfiguration)?,
            ),
            _ => SnapshotState::None,
        },
    })
}

pub async fn mark_complete(
    sql: &tokio_postgres::Client,
    table: &TableName,
    slot: &str,
    taken: &TakenSnapshot,
) -> Result<(), RelayError> {
    sql.execute(
        &format!(
            "UPDATE {} SET completed = true, snapshot = $2, snapshot_lsn = $3 WHERE slot_name = $1",
            marker_table(table)
        ),
        &[&slot, &taken.snapshot_text, &taken.wal_lsn.to_string()],
    )
    .await
    .map_err(sql_error("recording the completed snapshot", table))?;
    Ok(())
}

/// The snapshot the rows were read in: which transactions it saw, and the WAL position
/// after which no transaction it saw can commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenSnapshot {
    snapshot_text: String,
    xmax: u32,
    in_progress: Vec<u32>,
    pub wal_lsn: Lsn,
}

impl TakenSnapshot {
    /// `xmin:xmax:xip,...` (pg_current_snapshot) and an LSN `X/Y`.
    pub fn parse(snapshot: &str, lsn: &str) -> Result<Self, anyhow::Error> {
        let bad = || anyhow::anyhow!("unreadable snapshot marker {snapshot:?} / {lsn:?}");
        let mut parts = snapshot.split(':');
        let _xmin = parts.next().ok_or_else(bad)?;
        let xmax: u64 = parts.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let in_progress = parts
            .next()
            .unwrap_or("")
            .split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.parse::<u64>().map(|x| x as u32).map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let wal_lsn = Lsn::parse(lsn).ok_or_else(bad)?;
        Ok(Self {
            snapshot_text: snapshot.to_owned(),
            xmax: xmax as u32,
            in_progress,
            wal_lsn,
        })
    }

    /// Whether the streamed transaction `xid` committing at `commit_lsn` was already in the
    /// snapshot. xids are compared modulo 2^32 as PostgreSQL does; the LSN bound keeps the
    /// comparison to transactions near the snapshot.
    pub fn already_relayed(&self, xid: u32, commit_lsn: Lsn) -> bool {
        commit_lsn <= self.wal_lsn
            && (xid.wrapping_sub(self.xmax) as i32) < 0
            && !self.in_progress.contains(&xid)
    }
}

/// The outbox rows in snapshot order, as pgoutput would describe them.
pub struct SnapshotRows {
    pub relation: Relation,
    pub rows: Vec<Insert>,
    pub taken: TakenSnapshot,
}

/// Reads every row of `table` in a REPEATABLE READ snapshot, as text (pgoutput's format).
pub async fn read(url: &str, table: &TableName) -> Result<SnapshotRows, RelayError> {
    let mut client = super::postgres::connect(url).await?;
    let read_error = |context: &'static str| {
        move |e| {
            RelayError::postgres(context, e, || {
                format!("the relay's role needs SELECT on {table}")
            })
        }
    };
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(read_error("starting the snapshot"))?;
    let marks = tx
        .query_one(
            "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text",
            &[],
        )
        .await
        .map_err(read_error("starting the snapshot"))?;
    let taken =
        TakenSnapshot::parse(marks.get(0), marks.get(1)).map_err(RelayError::Misconfiguration)?;
    let relation = sql_rows::relation(&tx, table, SNAPSHOT_RELATION_ID).await?;
    // Physical order, as Debezium's snapshot reads it: insertion order for an
    // insert-only table.
    let rows = tx
        .query(
            &format!(
                "SELECT {} FROM {}",
                sql_rows::select_list(&relation),
                sql_rows::qualified(table)
            ),
            &[],
        )
        .await
        .map_err(read_error("reading the outbox for the snapshot"))?;
    tx.commit()
        .await
        .map_err(read_error("ending the snapshot"))?;
    let rows = rows
        .iter()
        .map(|r| sql_rows::insert(r, 0, SNAPSHOT_RELATION_ID))
        .collect();
    Ok(SnapshotRows {
        relation,
        rows,
        taken,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_sees_committed_xids_below_xmax_only() {
        let s = TakenSnapshot::parse("100:105:101,103", "0/1000").unwrap();
        let l = Lsn::from_u64;
        assert!(s.already_relayed(99, l(0x800)));
        assert!(s.already_relayed(102, l(0x1000)));
        assert!(
            !s.already_relayed(101, l(0x800)),
            "in progress at snapshot time"
        );
        assert!(
            !s.already_relayed(105, l(0x800)),
            "started after the snapshot"
        );
        assert!(
            !s.already_relayed(99, l(0x1001)),
            "commits after the snapshot's WAL position"
        );
        // xids wrap around modulo 2^32.
        let wrapped = TakenSnapshot::parse("4294967290:4294967300:", "0/10").unwrap();
        assert!(wrapped.already_relayed(4294967295, l(1)));
        assert!(wrapped.already_relayed(2, l(1)));
        assert!(!wrapped.already_relayed(5, l(1)));
    }
}
