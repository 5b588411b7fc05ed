//! The incremental snapshot's SQL: a table's key, its largest key, one chunk, the watermark
//! rows in the signal table, and the saved progress.

use super::Progress;
use crate::error::RelayError;
use crate::source::sql_rows;
use outbox_router::TableName;
use pgoutput::{Insert, Relation};
use postgres_protocol::escape::{escape_identifier, escape_literal};

/// The relay's own table of incremental snapshot progress, one row per slot.
pub const PROGRESS_TABLE: &str = crate::source::own_tables::INCREMENTAL_SNAPSHOTS;

fn failed<'a>(
    context: &'static str,
    table: &'a str,
) -> impl FnOnce(tokio_postgres::Error) -> RelayError + 'a {
    move |e| {
        RelayError::postgres(context, e, || {
            format!("the relay's role needs SELECT on {table}, and INSERT on the signal table")
        })
    }
}

/// The columns chunks are ordered by, with their types: the surrogate key when one is
/// given, else the primary key (empty when the table has none).
pub async fn key_columns(
    client: &tokio_postgres::Client,
    table: &TableName,
    surrogate_key: Option<&str>,
) -> Result<Result<Vec<(String, String)>, String>, RelayError> {
    let columns = crate::source::catalog::primary_key(client, table).await?;
    let Some(surrogate) = surrogate_key else {
        return Ok(Ok(columns));
    };
    let row = client
        .query_opt(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = $1::text::regclass AND attname = $2 AND attnum > 0 AND NOT attisdropped",
            &[&sql_rows::qualified(table), &surrogate],
        )
        .await
        .map_err(failed("reading the surrogate key", &table.name))?;
    Ok(match row {
        Some(row) => Ok(vec![(surrogate.to_owned(), row.get(0))]),
        None => Err(format!(
            "Surrogate key \"{surrogate}\" doesn't exist in table \"{table}\""
        )),
    })
}

/// `ROW("a", "b")`.
fn key_row(columns: &[(String, String)]) -> String {
    let names: Vec<String> = columns.iter().map(|(n, _)| escape_identifier(n)).collect();
    format!("ROW({})", names.join(", "))
}

/// `ROW('x'::type, …)` of a key's text forms.
fn key_literal(columns: &[(String, String)], key: &[String]) -> String {
    let values: Vec<String> = columns
        .iter()
        .zip(key)
        .map(|((_, ty), v)| format!("{}::{ty}", escape_literal(v)))
        .collect();
    format!("ROW({})", values.join(", "))
}

/// The key columns' text forms, first in a select list.
fn key_select(columns: &[(String, String)]) -> String {
    columns
        .iter()
        .map(|(n, _)| format!("format('%s', {})", escape_identifier(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn order_by(columns: &[(String, String)], descending: bool) -> String {
    columns
        .iter()
        .map(|(n, _)| {
            format!(
                "{}{}",
                escape_identifier(n),
                if descending { " DESC" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The largest key among the rows `condition` keeps; `None` for none.
pub async fn max_key(
    client: &tokio_postgres::Client,
    table: &TableName,
    columns: &[(String, String)],
    condition: Option<&str>,
) -> Result<Option<Vec<String>>, RelayError> {
    let filter = condition.map(|c| format!(" WHERE {c}")).unwrap_or_default();
    let row = client
        .query_opt(
            &format!(
                "SELECT {} FROM {}{filter} ORDER BY {} LIMIT 1",
                key_select(columns),
                sql_rows::qualified(table),
                order_by(columns, true)
            ),
            &[],
        )
        .await
        .map_err(failed("reading the snapshot's maximum key", &table.name))?;
    Ok(row.map(|r| (0..columns.len()).map(|i| r.get(i)).collect()))
}

/// One chunk: at most `size` rows after `after` and up to `max`, in key order, each with its
/// key, as pgoutput inserts under `relation`.
pub async fn read_chunk(
    client: &tokio_postgres::Client,
    relation: &Relation,
    columns: &[(String, String)],
    (after, max): (Option<&[String]>, &[String]),
    condition: Option<&str>,
    size: usize,
) -> Result<Vec<(Vec<String>, Insert)>, RelayError> {
    let table = TableName {
        schema: relation.namespace.clone(),
        name: relation.name.clone(),
    };
    let mut bounds = Vec::new();
    if let Some(after) = after {
        bounds.push(format!(
            "{} > {}",
            key_row(columns),
            key_literal(columns, after)
        ));
    }
    bounds.push(format!(
        "{} <= {}",
        key_row(columns),
        key_literal(columns, max)
    ));
    if let Some(condition) = condition {
        bounds.push(condition.to_owned());
    }
    let rows = client
        .query(
            &format!(
                "SELECT {}, {} FROM {} WHERE {} ORDER BY {} LIMIT {size}",
                key_select(columns),
                sql_rows::select_list(relation),
                sql_rows::qualified(&table),
                bounds.join(" AND "),
                order_by(columns, false)
            ),
            &[],
        )
        .await
        .map_err(failed(
            "reading a chunk of the incremental snapshot",
            &table.name,
        ))?;
    Ok(rows
        .iter()
        .map(|r| {
            let key = (0..columns.len()).map(|i| r.get(i)).collect();
            (
                key,
                sql_rows::insert(r, columns.len(), relation.relation_id),
            )
        })
        .collect())
}

/// A watermark row, `INSERT INTO <signal table> VALUES (id, type, data)` by position, as
/// Debezium writes it, committed at once.
pub async fn write_watermark(
    client: &tokio_postgres::Client,
    signal_table: &TableName,
    (id, kind, data): (&str, &str, &str),
) -> Result<(), RelayError> {
    // Literals, not text parameters: PostgreSQL gives them the columns' own types (a signal
    // table may keep `data` as jsonb, `id` as uuid text), as Debezium's JDBC strings get.
    client
        .batch_execute(&format!(
            "INSERT INTO {} VALUES ({}, {}, {})",
            sql_rows::qualified(signal_table),
            escape_literal(id),
            escape_literal(kind),
            escape_literal(data)
        ))
        .await
        .map_err(|e| {
            RelayError::postgres("writing an incremental snapshot's watermark", e, || {
                format!(
                    "the relay's role needs INSERT on the signal table {signal_table} (id, type, data as text); \
                     or read.only=true (PostgreSQL 13+) to write nothing"
                )
            })
        })?;
    Ok(())
}

/// The server's WAL position (its replay position on a standby): read-only incremental
/// snapshots' window closes when the stream passed it.
pub async fn wal_position(client: &tokio_postgres::Client) -> Result<pgoutput::Lsn, RelayError> {
    let text: String = client
        .query_one(
            // The insert position: every commit the chunk's reading saw was inserted before it
            // (the write position can lag behind with synchronous_commit=off).
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text",
            &[],
        )
        .await
        .map_err(|e| {
            RelayError::postgres("reading the server's WAL position", e, || {
                "read.only incremental snapshots read pg_current_wal_lsn()".into()
            })
        })?
        .get(0);
    text.parse()
        .map_err(|_| RelayError::misconfigured(format!("a WAL position PostgreSQL gave: {text:?}")))
}

fn progress_table(home: &TableName) -> String {
    format!(
        "{}.{}",
        escape_identifier(&home.schema),
        escape_identifier(PROGRESS_TABLE)
    )
}

fn progress_error<'a>(
    context: &'static str,
    home: &'a TableName,
) -> impl FnOnce(tokio_postgres::Error) -> RelayError + 'a {
    move |e| {
        RelayError::postgres(context, e, || {
            format!(
                "incremental snapshots keep their progress in {}.{PROGRESS_TABLE}: grant CREATE on schema {}, \
                 or create it: `CREATE TABLE {} (slot_name text PRIMARY KEY, progress text NOT NULL)`",
                home.schema,
                escape_identifier(&home.schema),
                progress_table(home)
            )
        })
    }
}

/// Whether the progress table exists (nothing was saved before it did).
async fn progress_table_exists(
    client: &tokio_postgres::Client,
    home: &TableName,
) -> Result<bool, RelayError> {
    let table = TableName {
        schema: home.schema.clone(),
        name: PROGRESS_TABLE.to_owned(),
    };
    crate::source::catalog::table_exists(client, &table).await
}

/// The progress saved for `slot`, if a snapshot was under way.
pub async fn load(
    client: &tokio_postgres::Client,
    home: &TableName,
    slot: &str,
) -> Result<Option<Progress>, RelayError> {
    if !progress_table_exists(client, home).await? {
        return Ok(None);
    }
    let row = client
        .query_opt(
            &format!(
                "SELECT progress FROM {} WHERE slot_name = $1",
                progress_table(home)
            ),
            &[&slot],
        )
        .await
        .map_err(progress_error(
            "reading the incremental snapshot's progress",
            home,
        ))?;
    Ok(row
        .and_then(|r| serde_json::from_str::<Progress>(&r.get::<_, String>(0)).ok())
        .filter(Progress::running))
}

/// Saves `progress` for `slot` (removes the row once the snapshot is over).
pub async fn save(
    client: &tokio_postgres::Client,
    home: &TableName,
    slot: &str,
    progress: &Progress,
) -> Result<(), RelayError> {
    let table = progress_table(home);
    if !progress.running() {
        if progress_table_exists(client, home).await? {
            client
                .execute(
                    &format!("DELETE FROM {table} WHERE slot_name = $1"),
                    &[&slot],
                )
                .await
                .map_err(progress_error(
                    "recording the incremental snapshot's end",
                    home,
                ))?;
        }
        return Ok(());
    }
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (slot_name text PRIMARY KEY, progress text NOT NULL)"
        ))
        .await
        .map_err(progress_error("creating the incremental snapshot's progress table", home))?;
    let text = serde_json::to_string(progress).expect("progress serialises");
    client
        .execute(
            &format!(
                "INSERT INTO {table} (slot_name, progress) VALUES ($1, $2) \
                 ON CONFLICT (slot_name) DO UPDATE SET progress = EXCLUDED.progress"
            ),
            &[&slot, &text],
        )
        .await
        .map_err(progress_error(
            "recording the incremental snapshot's progress",
            home,
        ))?;
    Ok(())
}
