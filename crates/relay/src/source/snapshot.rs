//! `snapshot.mode=initial`: the outbox rows that exist when the slot is created are relayed
//! once, before streaming, and none is missed.
//!
//! Consistency: a new slot is created on the replication connection with an *exported
//! snapshot* (`CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')`), and the rows are read in
//! exactly that snapshot (`SET TRANSACTION SNAPSHOT`). Every transaction is then either in
//! the snapshot or in the stream from the slot's consistent point — never both, never
//! neither. An outbox that deletes its rows in the writing transaction (or a cleanup job)
//! loses nothing: what the snapshot does not see, the stream carries. Rows are emitted in
//! insertion order (the table's identity or serial column).
//!
//! Durability: a marker row (`<schema>.outbox_relay_snapshots`) is written *before* the
//! slot is created and marked complete only after Kafka acknowledged every snapshot row.
//! A crash in between finds an incomplete marker on restart and takes the snapshot again,
//! in a new snapshot, while the stream still starts at the slot's position: nothing is
//! skipped by transaction, so a retake may duplicate, never lose. A slot that already exists
//! without a marker (Debezium's slot, or one created with `no_data`) is never snapshotted:
//! switching from Debezium does not replay history.

use super::sql_rows;
use crate::error::RelayError;
use outbox_router::TableName;
use pgoutput::Lsn;
use pgoutput::{Insert, Relation};
use postgres_protocol::escape::{escape_identifier, escape_literal};

pub const MARKER_TABLE: &str = super::own_tables::SNAPSHOTS;

/// The relation id the snapshot rows of the first outbox table are routed under, the next
/// table's one less, and so on (PostgreSQL OIDs never reach these).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotState {
    /// No marker: nothing to do.
    None,
    /// The snapshot is owed (or was interrupted): take it now.
    Owed,
    /// Taken and acknowledged.
    Done,
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
                "SELECT completed FROM {} WHERE slot_name = $1",
                marker_table(table)
            ),
            &[&slot],
        )
        .await
        .map_err(sql_error("reading the snapshot marker", table))?;
    Ok(match row {
        None => SnapshotState::None,
        Some(r) if r.get::<_, bool>(0) => SnapshotState::Done,
        Some(_) => SnapshotState::Owed,
    })
}

/// Records the snapshot complete, with the exported snapshot's name and the slot's
/// consistent point (for operators: the snapshot holds every transaction committed before
/// it; both `None` for a retake).
pub async fn mark_complete(
    sql: &tokio_postgres::Client,
    table: &TableName,
    slot: &str,
    (snapshot, position): (Option<String>, Option<Lsn>),
) -> Result<(), RelayError> {
    sql.execute(
        &format!(
            "UPDATE {} SET completed = true, snapshot = $2, snapshot_lsn = $3 WHERE slot_name = $1",
            marker_table(table)
        ),
        &[&slot, &snapshot, &position.map(|p| p.to_string())],
    )
    .await
    .map_err(sql_error("recording the completed snapshot", table))?;
    Ok(())
}

/// Bytes of row text a fetch aims at: with large rows it fetches fewer than the fetch size,
/// so that what one fetch holds stays bounded in bytes as well as in rows.
const FETCH_BYTES: u64 = 8 << 20;

const CURSOR: &str = "outbox_relay_snapshot";

/// Where a table stands in the snapshot, for Debezium's `source.snapshot` markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TablePlace {
    /// The first table of the snapshot (rows or none).
    pub first_table: bool,
    /// No later table of the snapshot has a row: its last row is the snapshot's last record.
    pub last_with_rows: bool,
}

/// The places of tables holding `totals` rows, in snapshot order.
pub fn places(totals: &[u64]) -> Vec<TablePlace> {
    let last_with_rows = totals.iter().rposition(|t| *t > 0);
    (0..totals.len())
        .map(|i| TablePlace {
            first_table: i == 0,
            last_with_rows: Some(i) == last_with_rows,
        })
        .collect()
}

/// Debezium's `source.snapshot` of row `row` (from 0) of `total` in a table at `place`, with
/// `RelationalSnapshotChangeEventSource`'s precedence: the snapshot's last record `last`, its
/// first `first`, a table's last `last_in_data_collection`, its first
/// `first_in_data_collection`, any other `true`. (The snapshot's last record is `last` even
/// when later tables are empty: Debezium rewrites the last record it emitted so.)
pub fn marker(place: TablePlace, row: u64, total: u64) -> &'static str {
    let first_in_table = row == 0;
    let last_in_table = row + 1 == total;
    if last_in_table && place.last_with_rows {
        "last"
    } else if first_in_table && place.first_table {
        "first"
    } else if last_in_table {
        "last_in_data_collection"
    } else if first_in_table {
        "first_in_data_collection"
    } else {
        "true"
    }
}

/// A connection in a read-only REPEATABLE READ transaction, in the slot's exported snapshot
/// when there is one (`table`: what an error names).
async fn begin(
    database: &super::postgres::Database,
    table: &TableName,
    exported: Option<(&str, Lsn)>,
) -> Result<tokio_postgres::Client, RelayError> {
    let client = database.connect().await?;
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(read_error(table, "starting the snapshot"))?;
    if let Some((name, _)) = exported {
        client
            .batch_execute(&format!(
                "SET TRANSACTION SNAPSHOT {}",
                escape_literal(name)
            ))
            .await
            .map_err(read_error(table, "importing the slot's snapshot"))?;
    }
    Ok(client)
}

/// The rows each table holds in the snapshot (`exported`, else a snapshot of its own), counted
/// on one connection that is closed again: the snapshot's markers need to know which table
/// holds its last row before the first is read.
pub async fn count_rows(
    database: &super::postgres::Database,
    tables: &[TableName],
    exported: Option<(&str, Lsn)>,
) -> Result<Vec<u64>, RelayError> {
    count(database, tables, &vec![None; tables.len()], exported).await
}

/// [`count_rows`] of a blocking snapshot, whose tables `filters` may limit (see [`source`]).
pub async fn count_rows_where(
    database: &super::postgres::Database,
    tables: &[TableName],
    filters: &[Option<String>],
) -> Result<Vec<u64>, RelayError> {
    count(database, tables, filters, None).await
}

async fn count(
    database: &super::postgres::Database,
    tables: &[TableName],
    filters: &[Option<String>],
    exported: Option<(&str, Lsn)>,
) -> Result<Vec<u64>, RelayError> {
    let Some(first) = tables.first() else {
        return Ok(Vec::new());
    };
    let client = begin(database, first, exported).await?;
    let mut counts = Vec::with_capacity(tables.len());
    for (table, filter) in tables.iter().zip(filters) {
        let count: i64 = client
            .query_one(
                &format!("SELECT count(*) FROM {}", source(table, filter.as_deref())),
                &[],
            )
            .await
            .map_err(read_error(table, "counting the snapshot's rows"))?
            .get(0);
        counts.push(count.max(0) as u64);
    }
    let _ = client.batch_execute("COMMIT").await;
    Ok(counts)
}

/// What a snapshot of `table` reads, as `FROM` names it (aliased `outbox`): the table, or
/// the rows `filter` keeps: a `WHERE` condition, or a whole `SELECT` of the table (a blocking
/// snapshot's `additional-conditions` entry, as Debezium takes it).
fn source(table: &TableName, filter: Option<&str>) -> String {
    match filter.map(str::trim).filter(|f| !f.is_empty()) {
        None => format!("{} AS outbox", sql_rows::qualified(table)),
        Some(select)
            if select
                .get(..7)
                .is_some_and(|s| s.eq_ignore_ascii_case("select ")) =>
        {
            format!("({select}) AS outbox")
        }
        Some(condition) => format!(
            "(SELECT * FROM {} WHERE {condition}) AS outbox",
            sql_rows::qualified(table)
        ),
    }
}

/// The outbox rows in insertion order, as pgoutput would describe them, read through a
/// cursor a fetch at a time (the table can be larger than memory: an outbox that was never
/// cleaned), all in one snapshot.
pub struct SnapshotReader {
    client: tokio_postgres::Client,
    table: TableName,
    pub relation: Relation,
    relation_id: u32,
    /// The rows the snapshot holds (for progress).
    pub total: u64,
    fetch_size: usize,
    /// Rows and bytes fetched so far: the next fetch's size.
    fetched: (u64, u64),
    done: bool,
    /// The exported snapshot the rows are read in, or `None` for a retake.
    pub snapshot: Option<String>,
    /// The slot's consistent point when the snapshot was exported with the slot.
    pub position: Option<Lsn>,
}

fn read_error<'a>(
    table: &'a TableName,
    context: &'static str,
) -> impl FnOnce(tokio_postgres::Error) -> RelayError + 'a {
    move |e| {
        RelayError::postgres(context, e, || {
            format!("the relay's role needs SELECT on {table}")
        })
    }
}

/// Opens a cursor over every row of `table` as text (pgoutput's format): in the snapshot
/// `exported` with the slot (its name and consistent point), or, for a retake, in a new
/// REPEATABLE READ snapshot. At most `fetch_size` rows are fetched at a time.
pub async fn open(
    database: &super::postgres::Database,
    table: &TableName,
    relation_id: u32,
    exported: Option<(&str, Lsn)>,
    fetch_size: usize,
) -> Result<SnapshotReader, RelayError> {
    open_filtered(database, table, relation_id, (exported, None), fetch_size).await
}

/// [`open`] for a blocking snapshot: a snapshot of its own, the rows `filter` keeps (see
/// [`source`]).
pub async fn open_where(
    database: &super::postgres::Database,
    table: &TableName,
    relation_id: u32,
    filter: Option<&str>,
    fetch_size: usize,
) -> Result<SnapshotReader, RelayError> {
    open_filtered(database, table, relation_id, (None, filter), fetch_size).await
}

async fn open_filtered(
    database: &super::postgres::Database,
    table: &TableName,
    relation_id: u32,
    (exported, filter): (Option<(&str, Lsn)>, Option<&str>),
    fetch_size: usize,
) -> Result<SnapshotReader, RelayError> {
    let client = begin(database, table, exported).await?;
    let relation = sql_rows::relation(&client, table, relation_id).await?;
    let order = super::catalog::insertion_order_columns(&client, table).await?;
    let order_by = match order.first() {
        Some(column) => format!(" ORDER BY outbox.{}", escape_identifier(column)),
        None => {
            tracing::warn!(%table, "the outbox has no identity or serial column: snapshot rows are read in physical order, \
                which need not be insertion order (sql/outbox.sql has a seq column)");
            String::new()
        }
    };
    let total: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM {}", source(table, filter)),
            &[],
        )
        .await
        .map_err(read_error(
            table,
            "counting the outbox rows for the snapshot",
        ))?
        .get(0);
    client
        .batch_execute(&format!(
            "DECLARE {CURSOR} NO SCROLL CURSOR FOR SELECT {} FROM {}{order_by}",
            sql_rows::select_list(&relation),
            source(table, filter)
        ))
        .await
        .map_err(read_error(table, "reading the outbox for the snapshot"))?;
    Ok(SnapshotReader {
        client,
        table: table.clone(),
        relation,
        relation_id,
        total: total.max(0) as u64,
        fetch_size: fetch_size.max(1),
        fetched: (0, 0),
        done: false,
        snapshot: exported.map(|(name, _)| name.to_owned()),
        position: exported.map(|(_, lsn)| lsn),
    })
}

/// How many rows the next fetch asks for, after `fetched` (rows, bytes): the fetch size,
/// fewer when the rows seen so far are large (one row first, to learn their size).
fn next_fetch(fetch_size: usize, (rows, bytes): (u64, u64)) -> u64 {
    if rows == 0 {
        return 1;
    }
    let average = (bytes / rows).max(1);
    (FETCH_BYTES / average).clamp(1, fetch_size as u64)
}

impl SnapshotReader {
    /// The next rows, in order; empty once every row was read.
    pub async fn next_rows(&mut self) -> Result<Vec<Insert>, RelayError> {
        if self.done {
            return Ok(Vec::new());
        }
        let wanted = next_fetch(self.fetch_size, self.fetched);
        let rows = self
            .client
            .query(&format!("FETCH {wanted} FROM {CURSOR}"), &[])
            .await
            .map_err(read_error(
                &self.table,
                "reading the outbox for the snapshot",
            ))?;
        self.done = (rows.len() as u64) < wanted;
        let inserts: Vec<Insert> = rows
            .into_iter()
            .map(|r| sql_rows::insert(&r, 0, self.relation_id))
            .collect();
        let bytes: usize = inserts
            .iter()
            .flat_map(|i| &i.new_tuple.columns)
            .map(|c| match c {
                pgoutput::ColumnValue::Text(t) => t.len(),
                _ => 0,
            })
            .sum();
        self.fetched.0 += inserts.len() as u64;
        self.fetched.1 += bytes as u64;
        Ok(inserts)
    }

    /// Ends the snapshot's transaction.
    pub async fn finish(self) -> Result<(), RelayError> {
        self.client
            .batch_execute("COMMIT")
            .await
            .map_err(read_error(&self.table, "ending the snapshot"))
    }
}

#[cfg(test)]
mod marker_tests {
    use super::*;

    /// Debezium's markers (its RecordsSnapshotProducerIT and the resolver's order).
    #[test]
    fn debeziums_snapshot_markers() {
        let of = |totals: &[u64]| -> Vec<Vec<&'static str>> {
            places(totals)
                .into_iter()
                .zip(totals)
                .map(|(place, total)| (0..*total).map(|r| marker(place, r, *total)).collect())
                .collect()
        };
        assert_eq!(of(&[1]), [vec!["last"]]);
        assert_eq!(of(&[3]), [vec!["first", "true", "last"]]);
        assert_eq!(
            of(&[1, 1, 1]),
            [vec!["first"], vec!["last_in_data_collection"], vec!["last"]]
        );
        assert_eq!(
            of(&[2, 3]),
            [
                vec!["first", "last_in_data_collection"],
                vec!["first_in_data_collection", "true", "last"]
            ]
        );
        // The first table empty: no `first`; the last empty: the one before ends with `last`.
        assert_eq!(
            of(&[0, 2]),
            [vec![], vec!["first_in_data_collection", "last"]]
        );
        assert_eq!(of(&[2, 0]), [vec!["first", "last"], vec![]]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fetch size bounds rows; the rows' size bounds bytes (a first fetch of one row
    /// learns it).
    #[test]
    fn fetches_are_bounded_in_rows_and_bytes() {
        let sizes = next_fetch;
        assert_eq!(sizes(10_240, (0, 0)), 1);
        assert_eq!(sizes(10_240, (1, 2_000)), 4_194);
        assert_eq!(sizes(10_240, (1, 100)), 10_240);
        assert_eq!(sizes(10_240, (1, 100 << 20)), 1);
        assert_eq!(sizes(500, (10, 1_000)), 500);
    }
}
