//! `--cleanup`: the relay deletes the outbox rows it relayed, and only those whose events
//! Kafka acknowledged and whose position is confirmed.
//!
//! CDC and the initial snapshot: each routed outbox row's primary key is noted with its
//! event's number ([`Notes`], pure). A position the acknowledgement tracker allows is not
//! confirmed at once: first the keys of every delivered event (less those that went to the
//! dead-letter topic: their rows stay) are written to the ledger `<schema>.outbox_relay_cleanup`
//! in one statement, and only then is the position confirmed. A crash before that confirms
//! nothing: the stream sends those rows again and they are noted again. A crash after it
//! leaves them in the ledger, which outlives the process. So no relayed row is forgotten,
//! and none is deleted before its event is in Kafka.
//!
//! The cleaner ([`clean_every`]) runs only in the session that holds the slot (one instance
//! of an active/standby pair): every `--cleanup-interval` it deletes, in one transaction,
//! the rows of the oldest ledger entries past `--cleanup-grace` and the entries themselves,
//! `--cleanup-batch` rows at most.
//!
//! Polling mode has its own mark: rows whose `--processed-column` is set (in the transaction
//! that committed after Kafka acknowledged them) are deleted in the same batches, once the
//! mark is older than the grace.

use super::sql_rows::qualified;
use crate::config::Cleanup;
use crate::deliver::Seq;
use crate::error::RelayError;
use crate::metrics::Metrics;
use crate::source::postgres::Database;
use outbox_router::TableName;
use pgoutput::{Insert, Lsn, Relation};
use postgres_protocol::escape::{escape_identifier, escape_literal};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// The ledger table, in the first outbox table's schema.
pub const LEDGER: &str = super::own_tables::CLEANUP;

/// How often the outbox's size and oldest row are read for the metrics.
const MEASURE_EVERY: Duration = Duration::from_secs(5);

pub fn ledger_table(schema: &str) -> String {
    qualified(&TableName {
        schema: schema.to_owned(),
        name: LEDGER.to_owned(),
    })
}

/// The sequence of the ledger's ids (its role needs USAGE on it).
pub fn ledger_sequence(schema: &str) -> String {
    qualified(&TableName {
        schema: schema.to_owned(),
        name: format!("{LEDGER}_id_seq"),
    })
}

/// The ledger's DDL, also printed by `setup-sql --cleanup`.
pub fn ledger_ddl(schema: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (id bigserial PRIMARY KEY, slot_name text NOT NULL, table_name text NOT NULL, \
         keys jsonb NOT NULL, rows integer NOT NULL, committed_at timestamptz, recorded_at timestamptz NOT NULL DEFAULT now())",
        ledger_table(schema)
    )
}

/// An outbox table and its primary key: (column, type as `format_type` spells it), in key
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableKey {
    pub table: TableName,
    pub columns: Vec<(String, String)>,
}

impl TableKey {
    /// Reads `table`'s primary key; refused with the DDL when it has none.
    pub async fn read(sql: &tokio_postgres::Client, table: &TableName) -> Result<Self, RelayError> {
        let columns = super::catalog::primary_key(sql, table).await?;
        if columns.is_empty() {
            return Err(RelayError::misconfigured(format!(
                "--cleanup deletes relayed rows by primary key, and {table} has none; add one \
                 (`ALTER TABLE {} ADD PRIMARY KEY (id);`) or run without --cleanup",
                qualified(table)
            )));
        }
        Ok(Self {
            table: table.clone(),
            columns,
        })
    }

    /// `DELETE` of the rows whose keys are in `$1`, a JSON array of key arrays (text values).
    fn delete_statement(&self) -> String {
        let matches: Vec<String> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (column, ty))| format!("t.{} = (k.v->>{i})::{ty}", escape_identifier(column)))
            .collect();
        format!(
            "DELETE FROM {} AS t USING jsonb_array_elements($1::text::jsonb) AS k(v) WHERE {}",
            qualified(&self.table),
            matches.join(" AND ")
        )
    }
}

/// One event's row, noted until its event is delivered.
#[derive(Debug)]
struct Noted {
    seq: Seq,
    table: usize,
    key: Vec<String>,
    committed_micros: Option<i64>,
}

/// Rows of one table for the ledger: at most one batch of keys.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    pub table: usize,
    pub keys: Vec<Vec<String>>,
    /// The oldest commit among them (PostgreSQL micros); `None` for snapshot rows.
    pub committed_micros: Option<i64>,
}

/// The keys of routed rows, until their events are delivered, and the position held back
/// until they are in the ledger. Pure: no I/O, no clock.
#[derive(Debug)]
pub struct Notes {
    tables: Vec<TableKey>,
    /// relation id -> (table index, positions of the key columns in the row).
    relations: HashMap<u32, (usize, Vec<usize>)>,
    pending: VecDeque<Noted>,
    /// Events that went to the dead-letter topic: their rows stay in the outbox.
    dead_lettered: BTreeSet<Seq>,
    /// A position the tracker allowed, confirmed once the ledger has what precedes it.
    held: Option<Lsn>,
    batch: usize,
}

impl Notes {
    pub fn new(tables: Vec<TableKey>, batch: u32) -> Self {
        Self {
            tables,
            relations: HashMap::new(),
            pending: VecDeque::new(),
            dead_lettered: BTreeSet::new(),
            held: None,
            batch: batch.max(1) as usize,
        }
    }

    pub fn tables(&self) -> &[TableKey] {
        &self.tables
    }

    /// A Relation message: where the key columns of one of the outbox tables are in its rows.
    pub fn relation(&mut self, relation: &Relation) {
        let Some(index) = self
            .tables
            .iter()
            .position(|t| t.table.schema == relation.namespace && t.table.name == relation.name)
        else {
            return;
        };
        let positions: Option<Vec<usize>> = self.tables[index]
            .columns
            .iter()
            .map(|(column, _)| relation.column_index(column))
            .collect();
        match positions {
            Some(positions) => {
                self.relations
                    .insert(relation.relation_id, (index, positions));
            }
            None => {
                // A publication with a column list that leaves a key column out: its rows
                // cannot be named, so they are not deleted.
                tracing::warn!(table = %self.tables[index].table, "--cleanup: the publication does not send every primary key column of this table; its rows are not deleted");
                self.relations.remove(&relation.relation_id);
            }
        }
    }

    /// The row of event `seq` (an outbox table's insert).
    pub fn note(&mut self, seq: Seq, insert: &Insert, committed_micros: Option<i64>) {
        let column = |i: usize| {
            insert
                .new_tuple
                .columns
                .get(i)
                .and_then(|c| c.bytes())
                .map(|b| &b[..])
        };
        self.note_key(seq, insert.relation_id, column, committed_micros);
    }

    /// [`Self::note`] for an Insert read where it lies in its pgoutput `message`: its relation
    /// `relation_id` and its `columns` ([`outbox_router::Router::last_insert_columns`]).
    pub fn note_columns(
        &mut self,
        seq: Seq,
        relation_id: u32,
        message: &[u8],
        columns: &[pgoutput::RawColumn],
        committed_micros: Option<i64>,
    ) {
        let column = |i: usize| match columns.get(i) {
            Some(pgoutput::RawColumn::Text(range) | pgoutput::RawColumn::Binary(range)) => {
                message.get(range.clone())
            }
            _ => None,
        };
        self.note_key(seq, relation_id, column, committed_micros);
    }

    /// Notes the row of `relation_id` whose column `i` is `column(i)` (`None`: NULL or not
    /// sent), by its key.
    fn note_key<'a>(
        &mut self,
        seq: Seq,
        relation_id: u32,
        column: impl Fn(usize) -> Option<&'a [u8]>,
        committed_micros: Option<i64>,
    ) {
        let Some((table, positions)) = self.relations.get(&relation_id) else {
            return;
        };
        let key: Option<Vec<String>> = positions
            .iter()
            .map(|&i| column(i).map(|b| String::from_utf8_lossy(b).into_owned()))
            .collect();
        if let Some(key) = key {
            self.pending.push_back(Noted {
                seq,
                table: *table,
                key,
                committed_micros,
            });
        }
    }

    /// Events that went to the dead-letter topic.
    pub fn dead_lettered(&mut self, seqs: impl IntoIterator<Item = Seq>) {
        self.dead_lettered.extend(seqs);
    }

    /// `lsn` may be confirmed once the ledger has the rows delivered so far.
    pub fn hold(&mut self, lsn: Lsn) {
        self.held = Some(self.held.map_or(lsn, |h| h.max(lsn)));
    }

    pub fn holds(&self) -> bool {
        self.held.is_some()
    }

    pub fn noted(&self) -> usize {
        self.pending.len()
    }

    /// The ledger entries of every event numbered before `delivered_before` (all
    /// acknowledged), less the dead-lettered ones, and the position held, which may be
    /// confirmed once those entries are written: every event at or before it was numbered
    /// before `delivered_before`.
    pub fn take(&mut self, delivered_before: Seq) -> (Vec<Entry>, Option<Lsn>) {
        let mut entries: Vec<Entry> = Vec::new();
        // The open entry of each table.
        let mut open: HashMap<usize, usize> = HashMap::new();
        while self
            .pending
            .front()
            .is_some_and(|n| n.seq < delivered_before)
        {
            let noted = self.pending.pop_front().expect("a front");
            if self.dead_lettered.remove(&noted.seq) {
                continue;
            }
            let at = match open.get(&noted.table) {
                Some(&at) if entries[at].keys.len() < self.batch => at,
                _ => {
                    entries.push(Entry {
                        table: noted.table,
                        keys: Vec::new(),
                        committed_micros: None,
                    });
                    open.insert(noted.table, entries.len() - 1);
                    entries.len() - 1
                }
            };
            let entry = &mut entries[at];
            entry.keys.push(noted.key);
            entry.committed_micros = match (entry.committed_micros, noted.committed_micros) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        // Dead letters of events already taken are forgotten.
        self.dead_lettered = self.dead_lettered.split_off(&delivered_before);
        (entries, self.held.take())
    }
}

/// Writes ledger entries for `slot`.
#[derive(Debug, Clone)]
pub struct Ledger {
    table: String,
    sequence: String,
    slot: String,
}

impl Ledger {
    /// The ledger of `slot` in `schema`, created when missing.
    pub async fn open(
        sql: &tokio_postgres::Client,
        schema: &str,
        slot: &str,
    ) -> Result<Self, RelayError> {
        let ledger = TableName {
            schema: schema.to_owned(),
            name: LEDGER.to_owned(),
        };
        // CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when the table exists.
        if !super::catalog::table_exists(sql, &ledger).await? {
            sql.batch_execute(&ledger_ddl(schema)).await.map_err(|e| {
                RelayError::postgres("creating the --cleanup ledger", e, || {
                    format!(
                        "--cleanup keeps the relayed rows' keys in {}: create it as the schema's owner \
                         (`{}; GRANT SELECT, INSERT, DELETE ON {} TO <relay role>; GRANT USAGE ON SEQUENCE {} TO <relay role>;`, \
                         or `outbox-relay setup-sql --cleanup`)",
                        qualified(&ledger),
                        ledger_ddl(schema),
                        qualified(&ledger),
                        ledger_sequence(schema),
                    )
                })
            })?;
        }
        Ok(Self {
            table: qualified(&ledger),
            sequence: ledger_sequence(schema),
            slot: slot.to_owned(),
        })
    }

    fn privilege_fix(&self) -> String {
        format!(
            "GRANT SELECT, INSERT, DELETE ON {} TO <relay role>; GRANT USAGE ON SEQUENCE {} TO <relay role>; \
             and DELETE on the outbox table (`outbox-relay setup-sql --cleanup`)",
            self.table, self.sequence
        )
    }

    /// Writes `entries` in one statement.
    pub async fn record(
        &self,
        sql: &tokio_postgres::Client,
        tables: &[TableKey],
        entries: &[Entry],
    ) -> Result<(), RelayError> {
        if entries.is_empty() {
            return Ok(());
        }
        // At most this many entries (each one batch of keys) per statement: a statement
        // stays far below PostgreSQL's limits whatever one transaction wrote.
        for chunk in entries.chunks(16) {
            self.record_chunk(sql, tables, chunk).await?;
        }
        Ok(())
    }

    async fn record_chunk(
        &self,
        sql: &tokio_postgres::Client,
        tables: &[TableKey],
        entries: &[Entry],
    ) -> Result<(), RelayError> {
        let values: Vec<String> = entries
            .iter()
            .map(|e| {
                let keys = serde_json::to_string(&e.keys).expect("strings serialise");
                let committed = e.committed_micros.map_or("NULL".to_owned(), |micros| {
                    format!(
                        "to_timestamp({})",
                        crate::pg_time::epoch_millis(micros) as f64 / 1000.0
                    )
                });
                format!(
                    "({}, {}, {}::jsonb, {}, {committed})",
                    escape_literal(&self.slot),
                    escape_literal(&qualified(&tables[e.table].table)),
                    escape_literal(&keys),
                    e.keys.len(),
                )
            })
            .collect();
        sql.batch_execute(&format!(
            "INSERT INTO {} (slot_name, table_name, keys, rows, committed_at) VALUES {}",
            self.table,
            values.join(", ")
        ))
        .await
        .map_err(|e| {
            RelayError::postgres("recording relayed rows for --cleanup", e, || {
                self.privilege_fix()
            })
        })
    }
}

/// `--cleanup` in a CDC session: the routed rows' keys, and the ledger they are written to
/// before a position is confirmed (on a connection of its own).
pub struct Recorder {
    notes: Notes,
    ledger: Ledger,
    sql: tokio_postgres::Client,
}

impl Recorder {
    /// How often what was delivered is written to the ledger (and the position confirmed).
    pub const FLUSH_EVERY: Duration = Duration::from_millis(200);

    pub fn new(notes: Notes, ledger: Ledger, sql: tokio_postgres::Client) -> Self {
        Self { notes, ledger, sql }
    }

    pub fn notes(&mut self) -> &mut Notes {
        &mut self.notes
    }

    /// Something to write: a position waits for the ledger, or many keys are noted (a long
    /// transaction: its delivered rows go to the ledger before it commits, so memory stays
    /// bounded by the in-flight window).
    pub fn due(&self) -> bool {
        self.notes.holds() || self.notes.noted() >= Self::NOTED_BEFORE_FLUSH
    }

    /// Keys noted that are written without waiting for a position.
    const NOTED_BEFORE_FLUSH: usize = 10_000;

    /// Writes the rows of the events numbered before `delivered_before` (less
    /// `dead_lettered`) to the ledger; then the position held may be confirmed.
    pub async fn flush(
        &mut self,
        delivered_before: Seq,
        dead_lettered: Vec<Seq>,
    ) -> Result<Option<Lsn>, RelayError> {
        self.notes.dead_lettered(dead_lettered);
        let (entries, held) = self.notes.take(delivered_before);
        self.ledger
            .record(&self.sql, self.notes.tables(), &entries)
            .await?;
        Ok(held)
    }
}

/// `--cleanup` for a CDC session on `tables`: the recorder its stream writes the ledger
/// with, and what its cleaner deletes. Refused, with the fix, when a table has no primary
/// key or the role may not delete from it.
pub async fn for_session(
    database: &Database,
    tables: &[TableName],
    schema: &str,
    slot: &str,
    batch: u32,
) -> Result<(Recorder, Cleaning), RelayError> {
    let sql = database.connect().await?;
    let mut keys = Vec::with_capacity(tables.len());
    for table in tables {
        may_delete(&sql, table).await?;
        keys.push(TableKey::read(&sql, table).await?);
    }
    let ledger = Ledger::open(&sql, schema, slot).await?;
    Ok((
        Recorder::new(Notes::new(keys.clone(), batch), ledger.clone(), sql),
        Cleaning::Ledger {
            ledger,
            tables: keys,
        },
    ))
}

/// Refuses `--cleanup` when the relay's role may not delete from `table`.
pub async fn may_delete(sql: &tokio_postgres::Client, table: &TableName) -> Result<(), RelayError> {
    let allowed: bool = sql
        .query_one(
            "SELECT has_table_privilege($1::text::regclass, 'DELETE')",
            &[&qualified(table)],
        )
        .await
        .map_err(|e| {
            RelayError::postgres("reading the relay's privileges", e, || {
                format!("the relay's role needs SELECT and DELETE on {table}")
            })
        })?
        .get(0);
    if !allowed {
        return Err(RelayError::misconfigured(format!(
            "--cleanup deletes relayed rows from {table}, and the relay's role may not:              `GRANT DELETE ON {} TO <relay role>;` (or run without --cleanup)",
            qualified(table)
        )));
    }
    Ok(())
}

/// What the cleaner deletes.
#[derive(Debug, Clone)]
pub enum Cleaning {
    /// CDC: the rows the ledger of `ledger`'s slot names.
    Ledger {
        ledger: Ledger,
        tables: Vec<TableKey>,
    },
    /// Polling: rows whose `processed` column is set.
    Processed { table: TableName, processed: String },
}

/// Deletes what `cleaning` allows, `cleanup.batch` rows at most every `cleanup.interval`,
/// for as long as it runs (the session that holds the slot aborts it when it ends). A
/// database error is logged and tried again at the next round; a missing privilege, which
/// no retry cures, stops cleaning (the relay goes on).
pub async fn clean_every(
    database: Database,
    cleanup: Cleanup,
    cleaning: Cleaning,
    metrics: Arc<Metrics>,
) {
    let mut timer = tokio::time::interval(cleanup.interval);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut client: Option<tokio_postgres::Client> = None;
    let mut measured_at: Option<tokio::time::Instant> = None;
    let mut failing = false;
    loop {
        timer.tick().await;
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            client = match database.connect().await {
                Ok(client) => Some(client),
                Err(e) => {
                    if !failing {
                        tracing::warn!(
                            "--cleanup cannot connect to delete relayed rows ({e}); trying again every {:?}",
                            cleanup.interval
                        );
                    }
                    failing = true;
                    None
                }
            };
        }
        let Some(sql) = client.as_mut() else {
            continue;
        };
        match clean_once(sql, &cleanup, &cleaning).await {
            Ok(deleted) => {
                metrics.cleanup_deleted_rows.inc_by(deleted);
                if failing {
                    tracing::info!("--cleanup: deleting relayed rows again");
                }
                failing = false;
            }
            Err(e)
                if e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) =>
            {
                tracing::error!(
                    "--cleanup stops: {}. The relay goes on relaying; grant DELETE on the outbox table \
                     (`outbox-relay setup-sql --cleanup`) and restart it",
                    crate::error::server_message(&e)
                );
                return;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        "--cleanup could not delete relayed rows ({}); trying again every {:?}",
                        crate::error::server_message(&e),
                        cleanup.interval
                    );
                }
                failing = true;
                if e.code() == Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION) {
                    // The server became a standby (a failover): connect again, to the primary.
                    client = None;
                }
                continue;
            }
        }
        if measured_at.is_none_or(|at| at.elapsed() >= MEASURE_EVERY) {
            measured_at = Some(tokio::time::Instant::now());
            if let Err(e) = measure(sql, &cleaning, &metrics).await {
                tracing::debug!("--cleanup: reading the outbox's size: {e}");
            }
        }
    }
}

/// One round: rows deleted.
async fn clean_once(
    sql: &mut tokio_postgres::Client,
    cleanup: &Cleanup,
    cleaning: &Cleaning,
) -> Result<u64, tokio_postgres::Error> {
    let grace_s = cleanup.grace.as_secs_f64();
    match cleaning {
        Cleaning::Processed { table, processed } => {
            let column = escape_identifier(processed);
            let table = qualified(table);
            sql.execute(
                &format!(
                    // (tableoid, ctid): a ctid names a row within one partition only.
                    "DELETE FROM {table} WHERE (tableoid, ctid) IN (SELECT tableoid, ctid FROM {table} WHERE {column} IS NOT NULL \
                     AND {column} <= now() - make_interval(secs => $1) LIMIT $2 FOR UPDATE SKIP LOCKED)"
                ),
                &[&grace_s, &i64::from(cleanup.batch)],
            )
            .await
        }
        Cleaning::Ledger { ledger, tables } => {
            let mut deleted = 0u64;
            let mut taken = 0u64;
            // The oldest entries first, whole entries only (each holds at most one batch).
            while taken < u64::from(cleanup.batch) {
                let transaction = sql.transaction().await?;
                let Some(entry) = transaction
                    .query_opt(
                        &format!(
                            "SELECT id, table_name, keys::text, rows FROM {} WHERE slot_name = $1 \
                             AND recorded_at <= now() - make_interval(secs => $2) \
                             ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
                            ledger.table
                        ),
                        &[&ledger.slot, &grace_s],
                    )
                    .await?
                else {
                    break;
                };
                let (id, table, keys, rows): (i64, String, String, i32) =
                    (entry.get(0), entry.get(1), entry.get(2), entry.get(3));
                if taken > 0 && taken + rows as u64 > u64::from(cleanup.batch) {
                    break;
                }
                if let Some(key) = tables.iter().find(|t| qualified(&t.table) == table) {
                    deleted += transaction
                        .execute(&key.delete_statement(), &[&keys])
                        .await?;
                }
                transaction
                    .execute(
                        &format!("DELETE FROM {} WHERE id = $1", ledger.table),
                        &[&id],
                    )
                    .await?;
                transaction.commit().await?;
                taken += rows.max(1) as u64;
            }
            Ok(deleted)
        }
    }
}

/// The outbox tables' rows and bytes, and the oldest relayed row kept.
async fn measure(
    sql: &tokio_postgres::Client,
    cleaning: &Cleaning,
    metrics: &Metrics,
) -> Result<(), tokio_postgres::Error> {
    let (tables, oldest): (Vec<String>, String) = match cleaning {
        Cleaning::Ledger { ledger, tables } => (
            tables.iter().map(|t| qualified(&t.table)).collect(),
            format!(
                "SELECT extract(epoch FROM now() - min(coalesce(committed_at, recorded_at)))::float8 FROM {} WHERE slot_name = {}",
                ledger.table,
                escape_literal(&ledger.slot)
            ),
        ),
        Cleaning::Processed { table, processed } => (
            vec![qualified(table)],
            format!(
                "SELECT extract(epoch FROM now() - min({}))::float8 FROM {}",
                escape_identifier(processed),
                qualified(table)
            ),
        ),
    };
    let size = sql
        .query_one(
            "SELECT coalesce(sum(coalesce(s.n_live_tup, 0)), 0)::int8, coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8 \
             FROM unnest($1::text[]) AS t(name) JOIN pg_class c ON c.oid = t.name::regclass \
             LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid",
            &[&tables],
        )
        .await?;
    metrics.outbox_rows.set(size.get(0));
    metrics.outbox_bytes.set(size.get(1));
    let age: Option<f64> = sql.query_one(&oldest, &[]).await?.get(0);
    metrics
        .outbox_oldest_row_age_seconds
        .set(age.unwrap_or(0.0).max(0.0));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use pgoutput::{Column, ColumnValue, ReplicaIdentity, TupleData};

    fn tables() -> Vec<TableKey> {
        vec![TableKey {
            table: TableName {
                schema: "public".into(),
                name: "outbox".into(),
            },
            columns: vec![("id".into(), "uuid".into())],
        }]
    }

    fn relation(id: u32, columns: &[&str]) -> Relation {
        Relation {
            relation_id: id,
            namespace: "public".into(),
            name: "outbox".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: columns
                .iter()
                .map(|c| Column {
                    flags: 0,
                    name: (*c).into(),
                    type_oid: 25,
                    type_modifier: -1,
                })
                .collect(),
        }
    }

    fn insert(relation_id: u32, id: &str) -> Insert {
        Insert {
            relation_id,
            new_tuple: TupleData {
                columns: vec![
                    ColumnValue::Text(Bytes::from_static(b"Order")),
                    ColumnValue::Text(Bytes::copy_from_slice(id.as_bytes())),
                ],
            },
        }
    }

    /// Events numbered 0..n, one row each; the last number is past them all.
    fn noted(n: usize, batch: u32) -> (Notes, Vec<Seq>) {
        let mut notes = Notes::new(tables(), batch);
        notes.relation(&relation(7, &["aggregatetype", "id"]));
        let mut tracker = crate::deliver::AckTracker::new(Lsn::ZERO);
        let mut seqs = Vec::new();
        for i in 0..n {
            let ticket = tracker.produced();
            seqs.push(ticket.seq());
            notes.note(ticket.seq(), &insert(7, &format!("k{i}")), Some(i as i64));
            let _ = tracker.delivered(ticket);
        }
        seqs.push(tracker.produced().seq());
        (notes, seqs)
    }

    #[test]
    fn only_delivered_events_reach_the_ledger_and_the_held_position_comes_with_them() {
        let (mut notes, seqs) = noted(4, 100);
        notes.hold(Lsn::from_u64(100));
        // Events 0 and 1 delivered (numbered before seqs[2]).
        let (entries, held) = notes.take(seqs[2]);
        assert_eq!(held, Some(Lsn::from_u64(100)));
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0].keys,
            vec![vec!["k0".to_owned()], vec!["k1".to_owned()]]
        );
        assert_eq!(entries[0].committed_micros, Some(0), "the oldest commit");
        assert_eq!(notes.noted(), 2, "events not delivered stay noted");
        assert!(!notes.holds());
        let (entries, held) = notes.take(seqs[2]);
        assert!(entries.is_empty() && held.is_none(), "nothing twice");
    }

    #[test]
    fn dead_lettered_rows_stay_in_the_outbox() {
        let (mut notes, seqs) = noted(3, 100);
        notes.dead_lettered([seqs[1]]);
        let (entries, _) = notes.take(seqs[2]);
        assert_eq!(entries[0].keys, vec![vec!["k0".to_owned()]]);
        // A dead letter of an event not taken yet is kept for its turn.
        let (mut notes, seqs) = noted(3, 100);
        notes.dead_lettered([seqs[2]]);
        let _ = notes.take(seqs[1]);
        let (entries, _) = notes.take(seqs[3]);
        assert_eq!(entries[0].keys, vec![vec!["k1".to_owned()]]);
    }

    #[test]
    fn entries_hold_at_most_one_batch() {
        let (mut notes, seqs) = noted(5, 2);
        let (entries, _) = notes.take(seqs[5]);
        let sizes: Vec<usize> = entries.iter().map(|e| e.keys.len()).collect();
        assert_eq!(sizes, vec![2, 2, 1]);
    }

    #[test]
    fn rows_of_other_tables_or_without_their_key_are_not_noted() {
        let mut notes = Notes::new(tables(), 10);
        // The publication's column list leaves the key out.
        notes.relation(&relation(7, &["aggregatetype", "payload"]));
        let mut tracker = crate::deliver::AckTracker::new(Lsn::ZERO);
        let ticket = tracker.produced();
        notes.note(ticket.seq(), &insert(7, "k0"), None);
        notes.note(ticket.seq(), &insert(8, "k0"), None);
        assert_eq!(notes.noted(), 0);
    }

    #[test]
    fn the_delete_names_each_key_column_with_its_type() {
        let key = TableKey {
            table: TableName {
                schema: "app".into(),
                name: "Outbox".into(),
            },
            columns: vec![
                ("tenant".into(), "text".into()),
                ("id".into(), "bigint".into()),
            ],
        };
        assert_eq!(
            key.delete_statement(),
            "DELETE FROM \"app\".\"Outbox\" AS t USING jsonb_array_elements($1::text::jsonb) AS k(v) \
             WHERE t.\"tenant\" = (k.v->>0)::text AND t.\"id\" = (k.v->>1)::bigint"
        );
    }
}
